"""Human-in-the-loop approval: `review` calls `interrupt(...)`.

Run it with {"request": "..."}; the run stops at the interrupt. Resume with
`Command(resume={"action": "approve", "comment": "..."})` (over HTTP:
`command={"resume": {...}}`); the decision is recorded in the state.
"""

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    request: str
    status: str
    decision: str
    comment: str


def draft(state: State) -> dict[str, Any]:
    return {"status": "pending"}


def review(state: State) -> dict[str, Any]:
    answer = interrupt({"question": "Approve this request?", "request": state["request"]})
    if isinstance(answer, dict):
        return {"decision": str(answer.get("action", "")), "comment": str(answer.get("comment", ""))}
    return {"decision": str(answer), "comment": ""}


def finalize(state: State) -> dict[str, Any]:
    return {"status": "approved" if state.get("decision") == "approve" else "rejected"}


builder = StateGraph(State)
builder.add_node("draft", draft)
builder.add_node("review", review)
builder.add_node("finalize", finalize)
builder.add_edge(START, "draft")
builder.add_edge("draft", "review")
builder.add_edge("review", "finalize")
builder.add_edge("finalize", END)
graph = builder.compile()
