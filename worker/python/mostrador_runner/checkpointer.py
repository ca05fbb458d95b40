"""LangGraph's checkpointer, executed by the worker in mostrador's Postgres tables."""

import asyncio
import base64
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    copy_checkpoint,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)

from .encoding import jsonable
from .protocol import RunChannel


def _b64(data: str) -> bytes:
    return base64.b64decode(data) if data else b""


_UNREAD = object()


def _own_copy(found: CheckpointTuple | None) -> CheckpointTuple | None:
    """A kept checkpoint as a read from the database gives it: the caller's to change.

    LangGraph changes what it reads: `aget_state` applies the writes of finished tasks to the
    checkpoint itself (its `versions_seen` and `channel_versions`), so a run going on from that
    same object would find those tasks done without their writes, and lose them.
    """
    if found is None:
        return None
    return found._replace(
        checkpoint=copy_checkpoint(found.checkpoint),
        pending_writes=list(found.pending_writes or ()),
    )


class MostradorSaver(BaseCheckpointSaver[int]):
    """LangGraph's checkpointer, executed by the worker in mostrador's Postgres tables.

    Every write is fenced by the run's lease in the same statement. The checkpoints this run saves
    are also kept here, so that describing them (`aget_state`) reads nothing back.
    """

    def __init__(self, channel: RunChannel, thread_id: str) -> None:
        super().__init__()
        self.channel = channel
        self.thread_id = thread_id
        self.saved: dict[tuple[str, str], CheckpointTuple] = {}
        # The thread's latest checkpoint as first read: the run checks it before LangGraph reads
        # it again, and only this run writes to the thread until its first put.
        self.latest: CheckpointTuple | None | object = _UNREAD
        # Told of each new checkpoint of the thread before it is saved.
        self.saving: Callable[[str, str | None], None] | None = None

    # Reads.

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        ns = config["configurable"].get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is not None and (ns, checkpoint_id) in self.saved:
            return _own_copy(self.saved[(ns, checkpoint_id)])
        root_latest = ns == "" and checkpoint_id is None
        if root_latest:
            # Only this run writes to the thread: its newest checkpoint is the thread's latest.
            own = [key for key in self.saved if key[0] == ""]
            if own:
                return _own_copy(self.saved[own[-1]])
            if self.latest is not _UNREAD:
                return _own_copy(cast(CheckpointTuple | None, self.latest))
        found = await self.channel.call("get", ns=ns, checkpoint_id=checkpoint_id)
        found = self._tuple(found) if found else None
        if root_latest and not self.saved:
            self.latest = _own_copy(found)
        return found

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        ns = (config or {}).get("configurable", {}).get("checkpoint_ns", "")
        before_id = get_checkpoint_id(before) if before else None
        listed = await self.channel.call("list", ns=ns, before=before_id, limit=limit if limit is not None else 1000)
        for found in listed:
            checkpoint_tuple = self._tuple(found)
            if filter and not all(checkpoint_tuple.metadata.get(k) == v for k, v in filter.items()):
                continue
            yield checkpoint_tuple

    def _tuple(self, found: dict) -> CheckpointTuple:
        ns = found["ns"]
        values = {
            blob["channel"]: self.serde.loads_typed((blob["type"], _b64(blob["bytes"])))
            for blob in found["blobs"]
            if blob["type"] != "empty"
        }
        checkpoint = cast(Checkpoint, {**found["saved"], "channel_values": values})
        config: RunnableConfig = {
            "configurable": {
                "thread_id": self.thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": found["checkpoint_id"],
            }
        }
        parent = found.get("parent_checkpoint_id")
        parent_config: RunnableConfig | None = (
            {
                "configurable": {
                    "thread_id": self.thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": parent,
                }
            }
            if parent
            else None
        )
        writes = [(w["task_id"], w["channel"], self.serde.loads_typed((w["type"], _b64(w["bytes"])))) for w in found["writes"]]
        return CheckpointTuple(config, checkpoint, found["metadata"], parent_config, writes)

    # Writes.

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        ns = configurable.get("checkpoint_ns", "")
        saved = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        values = checkpoint.get("channel_values", {})
        blobs = []
        for channel, version in new_versions.items():
            if channel in values:
                kind, data = self.serde.dumps_typed(values[channel])
            else:
                kind, data = "empty", b""
            blobs.append(
                {
                    "channel": channel,
                    "version": version,
                    "type": kind,
                    "bytes": base64.b64encode(data or b"").decode(),
                }
            )
        stored_metadata = jsonable(get_serializable_checkpoint_metadata(config, metadata))
        # LangGraph leaves the thread out of a checkpoint's metadata; the official server's
        # checkpointer puts it back, and clients filter history by it.
        stored_metadata.setdefault("thread_id", self.thread_id)
        if ns == "" and self.saving is not None:
            self.saving(checkpoint["id"], metadata.get("source"))
        put = {
            "ns": ns,
            "checkpoint_id": checkpoint["id"],
            "parent_checkpoint_id": configurable.get("checkpoint_id"),
            "saved": saved,
            "metadata": stored_metadata,
            "blobs": blobs,
        }
        if metadata.get("source") == "input":
            # The input's checkpoint: no node runs before the next checkpoint, which the worker
            # writes after it (in one transaction) and whose answer says both are saved.
            self.channel.cast("put", **put)
        else:
            await self.channel.call("put", **put)
        saved_config: RunnableConfig = {
            "configurable": {
                "thread_id": self.thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }
        parent_id = configurable.get("checkpoint_id")
        self.saved[(ns, checkpoint["id"])] = CheckpointTuple(
            saved_config,
            checkpoint,
            stored_metadata,
            {"configurable": {**saved_config["configurable"], "checkpoint_id": parent_id}} if parent_id else None,
            [],
        )
        return saved_config

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = configurable["checkpoint_id"]
        rows = []
        for idx, (channel, value) in enumerate(writes):
            kind, data = self.serde.dumps_typed(value)
            rows.append(
                {
                    "task_id": task_id,
                    "task_path": task_path,
                    "idx": WRITES_IDX_MAP.get(channel, idx),
                    "channel": channel,
                    "type": kind,
                    "bytes": base64.b64encode(data or b"").decode(),
                }
            )
        # LangGraph does not wait for a task's writes before it goes on (it saves them in the
        # background); the worker writes them before the next checkpoint, which it reads after.
        self.channel.cast("put_writes", ns=ns, checkpoint_id=checkpoint_id, writes=rows)
        cached = self.saved.get((ns, checkpoint_id))
        if cached is not None:
            kept = [
                w
                for w in cached.pending_writes or ()
                if not (w[0] == task_id and w[1] in WRITES_IDX_MAP) or all(c != w[1] for c, _ in writes)
            ]
            known = {(w[0], w[1]) for w in kept}
            added = [(task_id, channel, value) for channel, value in writes if channel in WRITES_IDX_MAP or (task_id, channel) not in known]
            self.saved[(ns, checkpoint_id)] = cached._replace(pending_writes=kept + added)

    def get_next_version(self, current: int | None, channel: None) -> int:
        """Integers, which the worker stores as such: the next after `current`, and never one a
        branch of the thread already used. A run from a past checkpoint (a fork) bumps versions
        from that checkpoint's, and the values of another branch at the same version would be
        read back in place of its own: so a version is at least the clock in microseconds (the
        thread's runs come one after another)."""
        if current is None:
            current = 0
        elif isinstance(current, str):
            current = int(current.split(".")[0])
        return max(current + 1, time.time_ns() // 1000)

    # LangGraph's synchronous paths.

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return asyncio.run_coroutine_threadsafe(self.aget_tuple(config), self.channel.loop).result()

    def list(self, config, *, filter=None, before=None, limit=None) -> Iterator[CheckpointTuple]:
        async def collect():
            return [t async for t in self.alist(config, filter=filter, before=before, limit=limit)]

        yield from asyncio.run_coroutine_threadsafe(collect(), self.channel.loop).result()

    def put(self, config, checkpoint, metadata, new_versions) -> RunnableConfig:
        return asyncio.run_coroutine_threadsafe(self.aput(config, checkpoint, metadata, new_versions), self.channel.loop).result()

    def put_writes(self, config, writes, task_id, task_path="") -> None:
        asyncio.run_coroutine_threadsafe(self.aput_writes(config, writes, task_id, task_path), self.channel.loop).result()
