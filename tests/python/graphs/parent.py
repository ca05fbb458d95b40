"""Parent graph with a compiled subgraph as the node `child`.

With `stream_subgraphs=True` the subgraph's events arrive namespaced, e.g.
`updates|child:<task id>`. The subgraph shares the `value` key only.
"""

import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph


class ChildState(TypedDict):
    value: str


class ParentState(TypedDict, total=False):
    value: str
    log: Annotated[list[str], operator.add]


def child_a(state: ChildState) -> dict[str, Any]:
    return {"value": state["value"] + "-a"}


def child_b(state: ChildState) -> dict[str, Any]:
    return {"value": state["value"] + "-b"}


child_builder = StateGraph(ChildState)
child_builder.add_node("child_a", child_a)
child_builder.add_node("child_b", child_b)
child_builder.add_edge(START, "child_a")
child_builder.add_edge("child_a", "child_b")
child_builder.add_edge("child_b", END)
child = child_builder.compile()


def prepare(state: ParentState) -> dict[str, Any]:
    return {"value": state.get("value", "") + "-p", "log": ["prepare"]}


def finish(state: ParentState) -> dict[str, Any]:
    return {"log": ["finish:" + state["value"]]}


builder = StateGraph(ParentState)
builder.add_node("prepare", prepare)
builder.add_node("child", child)
builder.add_node("finish", finish)
builder.add_edge(START, "prepare")
builder.add_edge("prepare", "child")
builder.add_edge("child", "finish")
builder.add_edge("finish", END)
graph = builder.compile()
