"""A chatbot with semantic memory, as LangGraph's memory documentation writes one: it recalls the
memories nearest the user's message (`store.asearch(..., query=...)`) and keeps what it is asked
to remember (`store.aput`), which the store embeds with the project's `store.index`; a synchronous
node reads them back too (`store.search`, from LangGraph's thread)."""

import hashlib

from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore

NAMESPACE = ("memories", "user")


async def chat(state: MessagesState, *, store: BaseStore) -> dict:
    asked = str(state["messages"][-1].content)
    if asked.lower().startswith("remember "):
        memory = asked[len("remember ") :]
        key = hashlib.sha256(memory.encode()).hexdigest()[:8]
        await store.aput(NAMESPACE, key, {"text": memory})
        return {"messages": [AIMessage(content=f"I will remember: {memory}")]}
    found = await store.asearch(NAMESPACE, query=asked, limit=2)
    recalled = "; ".join(f"{item.value['text']} ({item.score:.3f})" for item in found)
    return {"messages": [AIMessage(content=f"I recall: {recalled}")]}


def count(state: MessagesState, *, store: BaseStore) -> dict:
    near = store.search(NAMESPACE, query=str(state["messages"][0].content), limit=10)
    scored = sum(1 for item in near if item.score is not None)
    return {"messages": [AIMessage(content=f"{scored} of {len(near)} memories are scored")]}


builder = StateGraph(MessagesState)
builder.add_node(chat)
builder.add_node(count)
builder.add_edge(START, "chat")
builder.add_edge("chat", "count")
graph = builder.compile()
