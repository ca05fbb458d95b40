"""A chatbot that keeps memories of each user in the store and reads them back."""

import asyncio
from typing import cast

from langchain.chat_models import init_chat_model
from langchain_core.messages import AIMessage
from langgraph.config import get_store
from langgraph.graph import END, MessagesState, StateGraph
from langgraph.runtime import Runtime

from memory_agent import tools
from memory_agent.context import Context


def _model(name: str):
    provider, model = name.split("/", maxsplit=1)
    return init_chat_model(model, model_provider=provider)


async def call_model(state: MessagesState, runtime: Runtime[Context]) -> dict:
    """Answers with what it remembers of the user in its prompt."""
    user_id = runtime.context.user_id
    memories = await cast(object, runtime.store).asearch(
        ("memories", user_id),
        query=str([m.content for m in state["messages"][-3:]]),
        limit=10,
    )
    formatted = "\n".join(f"[{mem.key}]: {mem.value} (similarity: {mem.score})" for mem in memories)
    if formatted:
        formatted = f"<memories>\n{formatted}\n</memories>"
    system = runtime.context.system_prompt.format(user_info=formatted)
    msg = await _model(runtime.context.model).bind_tools([tools.upsert_memory]).ainvoke(
        [{"role": "system", "content": system}, *state["messages"]],
    )
    return {"messages": [msg]}


async def store_memory(state: MessagesState, runtime: Runtime[Context]) -> dict:
    """Keeps each memory the model asked to keep (through `get_store()`, as a node may)."""
    tool_calls = getattr(state["messages"][-1], "tool_calls", [])
    saved = await asyncio.gather(
        *(
            tools.upsert_memory(**tc["args"], user_id=runtime.context.user_id, store=get_store())
            for tc in tool_calls
        )
    )
    results = [
        {"role": "tool", "content": mem, "tool_call_id": tc["id"]}
        for tc, mem in zip(tool_calls, saved)
    ]
    return {"messages": results}


def route_message(state: MessagesState):
    msg = state["messages"][-1]
    if isinstance(msg, AIMessage) and msg.tool_calls:
        return "store_memory"
    return END


builder = StateGraph(MessagesState, context_schema=Context)
builder.add_node(call_model)
builder.add_edge("__start__", "call_model")
builder.add_node(store_memory)
builder.add_conditional_edges("call_model", route_message, ["store_memory", END])
builder.add_edge("store_memory", "call_model")
graph = builder.compile()
graph.name = "MemoryAgent"
