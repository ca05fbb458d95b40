"""LangGraph's store over mostrador's Store: the items of the run's thread's owner."""

import asyncio
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    PutOp,
    SearchItem,
    SearchOp,
)

from .index import Index
from .protocol import (
    RunChannel,
    StoreGet,
    StoreListNamespaces,
    StoreOp,
    StorePut,
    StoreSearch,
)


class MostradorStore(BaseStore):
    """LangGraph's `BaseStore` over mostrador's Store, in Postgres: the items of the run's thread's
    owner, as the worker reads and writes them (a graph cannot name another owner). With the
    project's `store.index`, this process embeds what the graph puts and the queries it searches
    with (the worker ranks the items by them); without, a search finds items by namespace prefix
    and filter, newest first."""

    supports_ttl = True

    def __init__(self, channel: RunChannel, ttl_config: Any = None, index: Index | None = None) -> None:
        self.channel = channel
        # `store.ttl` of the langgraph.json: LangGraph applies its `default_ttl` to a put
        # without a ttl, and its `refresh_on_read` to a read that does not say.
        self.ttl_config = ttl_config
        self.index = index

    async def abatch(self, ops: Any) -> list:
        ops = list(ops)
        sent = [_store_op(op) for op in ops]
        if self.index is not None:
            for op, message in zip(ops, sent, strict=True):
                if isinstance(op, PutOp) and op.value is not None and message["op"] == "put":
                    message["embedded"] = await self.index.aembed(op.value, op.index)
                elif isinstance(op, SearchOp) and op.query and message["op"] == "search":
                    message["query_vector"] = await self.index.aquery(op.query)
        results = await self.channel.call("store", ops=sent)
        return [_store_result(op, result) for op, result in zip(ops, results, strict=True)]

    def batch(self, ops: Any) -> list:
        """From LangGraph's synchronous paths (a sync node runs in a thread of its own): the same
        operations on the run's event loop, as the official server's store runs them (so an
        embedding function that is only async embeds here too)."""
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), self.channel.loop).result()


def _store_op(op: Any) -> StoreOp:
    if isinstance(op, GetOp):
        return StoreGet(op="get", namespace=list(op.namespace), key=op.key, refresh_ttl=op.refresh_ttl)
    if isinstance(op, PutOp):
        # A value of None deletes the item.
        value = None if op.value is None else dict(op.value)
        return StorePut(op="put", namespace=list(op.namespace), key=op.key, value=value, ttl=op.ttl)
    if isinstance(op, SearchOp):
        search: StoreSearch = {
            "op": "search",
            "namespace_prefix": list(op.namespace_prefix),
            "filter": op.filter,
            "limit": op.limit,
            "offset": op.offset,
            "refresh_ttl": op.refresh_ttl,
        }
        return search
    if isinstance(op, ListNamespacesOp):
        conditions = {c.match_type: list(c.path) for c in op.match_conditions or ()}
        listed: StoreListNamespaces = {
            "op": "list_namespaces",
            "prefix": conditions.get("prefix", []),
            "suffix": conditions.get("suffix", []),
            "max_depth": op.max_depth,
            "limit": op.limit,
            "offset": op.offset,
        }
        return listed
    raise ValueError(f"unknown store operation {op!r}")


def _fields(found: dict) -> dict:
    return {
        "namespace": tuple(found["namespace"]),
        "key": found["key"],
        "value": found["value"],
        "created_at": datetime.fromisoformat(found["created_at"]),
        "updated_at": datetime.fromisoformat(found["updated_at"]),
    }


def _store_result(op: Any, result: Any) -> Any:
    if isinstance(op, GetOp):
        return None if result is None else Item(**_fields(result))
    if isinstance(op, SearchOp):
        return [SearchItem(**_fields(found), score=found.get("score")) for found in result]
    if isinstance(op, ListNamespacesOp):
        return [tuple(namespace) for namespace in result]
    return None
