"""One node that reports what its runner process can see of the platform: its own environment,
and whether it can read its worker's (`/proc/<worker>/environ`, `/proc/<worker>/mem`; the
worker's pid comes in the input), as code that no one reviewed (a compromised dependency, a tool
that evaluates what a model wrote) would try."""

import os
from typing import Any

from typing_extensions import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    worker: int
    seen: dict


def look(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return "read: " + f.read(4096).decode(errors="replace")
    except OSError as err:
        return f"refused: {type(err).__name__}"


def probe(state: State) -> dict[str, Any]:
    worker = state["worker"]
    return {
        "seen": {
            "environ": dict(os.environ),
            "worker_environ": look(f"/proc/{worker}/environ"),
            "worker_mem": look(f"/proc/{worker}/mem"),
        }
    }


builder = StateGraph(State)
builder.add_node("probe", probe)
builder.add_edge(START, "probe")
builder.add_edge("probe", END)
graph = builder.compile()
