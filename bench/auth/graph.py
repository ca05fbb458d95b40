"""A one-node graph: the benchmark creates and reads threads, it runs nothing."""

from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    n: int


graph = StateGraph(State).add_node("one", lambda state: {"n": 1}).add_edge(START, "one").add_edge("one", END).compile()
