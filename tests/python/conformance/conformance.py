"""LangGraph's checkpointer conformance suite (PyPI `langgraph-checkpoint-conformance`) against the
checkpointer mostrador gives Python graphs: the runner's own `MostradorSaver`, whose every call the
worker's own code executes (`worker/src/runner/checkpointer.rs`) in mostrador's tables, fenced by
a run's lease.

A graph's saver belongs to its run, and a run to one thread; the suite names many threads per
saver. So `Threads` gives each thread the suite names a run of its own (the Rust side,
`worker/tests/conformance.rs`, creates the thread, enqueues a run on it, claims it and answers its
calls) and hands each call to that run's `MostradorSaver`, as a runner would.

Started by that test with the protocol's pipes; the suite's report is its last message.
"""

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks
from mostrador_runner.checkpointer import MostradorSaver
from mostrador_runner.protocol import Channel, RunChannel, take_streams


class Threads(BaseCheckpointSaver):
    """Each thread's calls to its own run's saver. It offers what a run's saver offers, no more:
    `put`, `put_writes`, `get_tuple`, `list` of one thread (see docs/python-graphs.md)."""

    def __init__(self, channel: Channel) -> None:
        super().__init__()
        self.channel = channel
        self.savers: dict[str, MostradorSaver] = {}

    async def saver(self, config: RunnableConfig) -> MostradorSaver:
        thread_id = str(config["configurable"]["thread_id"])
        saver = self.savers.get(thread_id)
        if saver is None:
            run = await self.channel.call({"t": "open", "thread": thread_id})
            saver = self.savers[thread_id] = MostradorSaver(RunChannel(self.channel, run), thread_id)
        return saver

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await (await self.saver(config)).aget_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        if config is None:
            raise NotImplementedError("a run's saver lists its own thread's checkpoints only")
        saver = await self.saver(config)
        async for found in saver.alist(config, filter=filter, before=before, limit=limit):
            yield found

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await (await self.saver(config)).aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await (await self.saver(config)).aput_writes(config, writes, task_id, task_path)


async def main() -> None:
    out, in_fd = take_streams()
    channel = Channel(out, in_fd)
    reader = asyncio.create_task(channel.read())

    @checkpointer_test(name="MostradorSaver")
    async def mostrador() -> AsyncIterator[BaseCheckpointSaver]:
        yield Threads(channel)

    report = await validate(mostrador, progress=ProgressCallbacks.verbose())
    report.print_report()
    channel.send_now({"t": "report", "report": report.to_dict()})
    reader.cancel()


if __name__ == "__main__":
    asyncio.run(main())
