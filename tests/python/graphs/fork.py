"""Two branches in one superstep: `quick` finishes while `ask` waits for a decision.

Resumed, only `ask` runs again and `join` sees both branches' writes: the finished branch's
write must survive the interrupt.
"""

import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    topic: str
    log: Annotated[list[str], operator.add]
    summary: str


def quick(state: State) -> dict[str, Any]:
    return {"log": ["quick:" + state["topic"]]}


def ask(state: State) -> dict[str, Any]:
    answer = interrupt({"question": "Include " + state["topic"] + "?"})
    return {"log": ["ask:" + str(answer)]}


def join(state: State) -> dict[str, Any]:
    return {"summary": " + ".join(sorted(state.get("log", [])))}


builder = StateGraph(State)
builder.add_node("quick", quick)
builder.add_node("ask", ask)
builder.add_node("join", join)
builder.add_edge(START, "quick")
builder.add_edge(START, "ask")
builder.add_edge(["quick", "ask"], "join")
builder.add_edge("join", END)
graph = builder.compile()
