"""Map-reduce with `Send`: `plan` fans out one `Send("work", {"item": x})` per
item; the `results` channel reduces the branches with `operator.add`; `reduce`
joins them.
"""

import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send


class State(TypedDict, total=False):
    items: list[str]
    results: Annotated[list[str], operator.add]
    summary: str


class WorkState(TypedDict):
    item: str


def plan(state: State) -> dict[str, Any]:
    return {"items": [item.strip().lower() for item in state.get("items", [])]}


def fan_out(state: State) -> list[Send]:
    return [Send("work", {"item": item}) for item in state["items"]]


def work(state: WorkState) -> dict[str, Any]:
    return {"results": [state["item"].upper()]}


def reduce(state: State) -> dict[str, Any]:
    return {"summary": ",".join(sorted(state.get("results", [])))}


builder = StateGraph(State)
builder.add_node("plan", plan)
builder.add_node("work", work)
builder.add_node("reduce", reduce)
builder.add_edge(START, "plan")
builder.add_conditional_edges("plan", fan_out, ["work"])
builder.add_edge("work", "reduce")
builder.add_edge("reduce", END)
graph = builder.compile()
