"""The linear Python graphs every server in `bench/servers` serves, unchanged, from this file.

`linear6` has the shape of `tests/python/graphs/linear6.py`: nodes n1 -> ... -> n6, each a plain
(synchronous) function that appends its name to the `path` list channel (reducer `operator.add`).
`linear1` is the same with one node: the difference between the two is the cost of five more
supersteps, with the per-run costs (request, queue, thread, first read) taken out.
"""

import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    path: Annotated[list[str], operator.add]


def _node(name: str):
    def node(state: State) -> dict:
        return {"path": [name]}

    node.__name__ = name
    return node


def linear(steps: int) -> StateGraph:
    """The graph's builder (not compiled): `bench/langgraph/bench.py` compiles it with
    LangGraph's `PostgresSaver`, the servers compile it with their own checkpointers."""
    builder = StateGraph(State)
    names = [f"n{i}" for i in range(1, steps + 1)]
    for name in names:
        builder.add_node(name, _node(name))
    builder.add_edge(START, names[0])
    for a, b in zip(names, names[1:]):
        builder.add_edge(a, b)
    builder.add_edge(names[-1], END)
    return builder


linear6 = linear(6).compile()
linear1 = linear(1).compile()
