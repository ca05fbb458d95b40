"""Six-node linear graph for benchmarks: n1 -> ... -> n6, each node appends its
name to the `path` list channel (reducer: operator.add)."""

import operator
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    path: Annotated[list[str], operator.add]


def make_node(name: str) -> Callable[[State], dict[str, Any]]:
    def node(state: State) -> dict[str, Any]:
        return {"path": [name]}

    node.__name__ = name
    return node


NAMES = [f"n{i}" for i in range(1, 7)]

builder = StateGraph(State)
for name in NAMES:
    builder.add_node(name, make_node(name))
builder.add_edge(START, NAMES[0])
for a, b in zip(NAMES, NAMES[1:]):
    builder.add_edge(a, b)
builder.add_edge(NAMES[-1], END)
graph = builder.compile()
