"""A Python graph beside the TypeScript ones (mixed.json): one node answering what it was given."""

from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    said: str
    answer: str


def answer(state: State) -> dict:
    return {"answer": f"python heard {state['said']}"}


graph = StateGraph(State).add_node("answer", answer).add_edge(START, "answer").add_edge("answer", END).compile()
