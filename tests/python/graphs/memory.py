"""Long-term memory through LangGraph's store, as graphs use it: `remember` (a sync node) keeps
the note under the user's namespace and `recall` (an async node) reads back every note the user
has left, on any thread."""

from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore


class State(TypedDict, total=False):
    user: str
    note: str
    recalled: list[str]
    last: str


def remember(state: State, *, store: BaseStore) -> dict:
    store.put(("memories", state["user"]), state["note"], {"note": state["note"]})
    return {}


async def recall(state: State, *, store: BaseStore) -> dict:
    found = await store.asearch(("memories", state["user"]), limit=50)
    latest = await store.aget(("memories", state["user"]), state["note"])
    return {"recalled": sorted(item.value["note"] for item in found), "last": latest.value["note"]}


builder = StateGraph(State)
builder.add_node("remember", remember)
builder.add_node("recall", recall)
builder.add_edge(START, "remember")
builder.add_edge("remember", "recall")
builder.add_edge("recall", END)
graph = builder.compile()
