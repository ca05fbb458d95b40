"""Custom stream events: `work` writes progress events with
`langgraph.config.get_stream_writer()` (dicts and one plain string)."""

from typing import Any, TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    steps: int
    done: bool


def work(state: State) -> dict[str, Any]:
    writer = get_stream_writer()
    steps = state.get("steps", 3)
    for i in range(1, steps + 1):
        writer({"progress": i, "of": steps})
    writer("finished")
    return {"done": True}


builder = StateGraph(State)
builder.add_node("work", work)
builder.add_edge(START, "work")
builder.add_edge("work", END)
graph = builder.compile()
