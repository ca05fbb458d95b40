"""The tool the model calls to keep a memory."""

import uuid
from typing import Annotated, Optional

from langchain_core.tools import InjectedToolArg
from langgraph.store.base import BaseStore


async def upsert_memory(
    content: str,
    context: str,
    *,
    memory_id: Optional[uuid.UUID] = None,
    user_id: Annotated[str, InjectedToolArg],
    store: Annotated[BaseStore, InjectedToolArg],
) -> str:
    """Keeps a memory of the user: what to remember, and in which situation it came up."""
    mem_id = memory_id or uuid.uuid4()
    await store.aput(("memories", user_id), key=str(mem_id), value={"content": content, "context": context})
    return f"Stored memory {mem_id}"
