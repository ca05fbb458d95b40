"""A parent whose subgraph waits for a decision: `interrupt()` inside the node `child`.

While it waits, the parent's state has a `child` task whose state is the subgraph's (with
`subgraphs=True`) or a pointer to its namespace (without).
"""

import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class ChildState(TypedDict, total=False):
    value: str
    answer: str


class ParentState(TypedDict, total=False):
    value: str
    answer: str
    log: Annotated[list[str], operator.add]


def ask(state: ChildState) -> dict[str, Any]:
    answer = interrupt({"question": "Go on with " + state["value"] + "?"})
    return {"answer": str(answer)}


child_builder = StateGraph(ChildState)
child_builder.add_node("ask", ask)
child_builder.add_edge(START, "ask")
child_builder.add_edge("ask", END)
child = child_builder.compile()


def prepare(state: ParentState) -> dict[str, Any]:
    return {"value": state.get("value", "") + "-p", "log": ["prepare"]}


def finish(state: ParentState) -> dict[str, Any]:
    return {"log": ["finish:" + state.get("answer", "")]}


builder = StateGraph(ParentState)
builder.add_node("prepare", prepare)
builder.add_node("child", child)
builder.add_node("finish", finish)
builder.add_edge(START, "prepare")
builder.add_edge("prepare", "child")
builder.add_edge("child", "finish")
builder.add_edge("finish", END)
graph = builder.compile()
