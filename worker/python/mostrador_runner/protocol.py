"""The runner's side of the protocol with its worker (see `mostrador_runner`): its messages, as
`TypedDict`s, the process's channel, shared by its runs, and each run's view of it.

The worker's side is `worker/src/runner/protocol.rs`. `protocol-examples.json`, beside this
package, holds an example of every message, which the contract tests of both sides read
(`tests/test_protocol.py` here): each must be one of these types, field for field.
"""

import asyncio
import os
import threading
from typing import Any, BinaryIO, Literal, NotRequired, TypedDict

from .encoding import dumps, loads
from .streams import take_streams as take_streams

# The protocol's version, which the runner says it speaks when it is ready.
VERSION = 2


# ---------------------------------------------------------------------------------------------
# Worker -> runner.


class Blob(TypedDict):
    """A channel's value as LangGraph serialized it (`type` "empty": the channel has none)."""

    channel: str
    version: int
    type: str
    bytes: str


class SavedWrite(TypedDict):
    task_id: str
    channel: str
    type: str
    bytes: str


class Saved(TypedDict):
    """A checkpoint read back: its body, its channels' values and its pending writes."""

    ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    saved: dict[str, Any]
    metadata: dict[str, Any]
    blobs: list[Blob]
    writes: list[SavedWrite]


class Latest(TypedDict):
    checkpoint: Saved | None


class StateUpdate(TypedDict):
    """`threads.update_state`: the values a node is taken to have written."""

    values: Any
    as_node: str | None
    checkpoint_id: str | None


class RunCommand(TypedDict, total=False):
    """LangGraph's `Command` as a run carries it, or an update of the thread's state; only the
    parts it names are present."""

    resume: Any
    goto: Any
    update: Any
    update_state: StateUpdate


class RunSpec(TypedDict):
    run_id: str
    thread_id: str
    graph_id: str
    assistant_id: str
    attempt: int
    input: Any
    command: RunCommand | None
    config: dict[str, Any]
    metadata: dict[str, Any]
    stream_mode: list[str]
    stream_subgraphs: bool
    interrupt_before: Literal["*"] | list[str] | None
    interrupt_after: Literal["*"] | list[str] | None
    durability: Literal["sync", "async", "exit"] | None
    checkpoint_id: str | None
    context: dict[str, Any]
    latest: Latest | None


class Start(TypedDict):
    t: Literal["start"]
    run: int
    spec: RunSpec


class Reply(TypedDict):
    t: Literal["reply"]
    id: int
    result: Any
    error: NotRequired[str]


class Drain(TypedDict):
    t: Literal["drain"]
    run: int
    reason: str


class Cancel(TypedDict):
    t: Literal["cancel"]
    run: int


class Describe(TypedDict):
    t: Literal["describe"]
    # A JavaScript runner's ask to read TypeScript types too; a Python state's schemas are known
    # at run time, so a Python runner describes alike either way.
    types: NotRequired[bool]


ToRunner = Start | Reply | Drain | Cancel | Describe


# ---------------------------------------------------------------------------------------------
# Runner -> worker.


class Ready(TypedDict):
    t: Literal["ready"]
    protocol: int
    pid: int
    graphs: list[str]


class Described(TypedDict):
    t: Literal["described"]
    graphs: dict[str, Any]


class Blocked(TypedDict):
    t: Literal["blocked"]
    run: int | None
    seconds: float


class Get(TypedDict):
    op: Literal["get"]
    ns: str
    checkpoint_id: str | None


class List(TypedDict):
    op: Literal["list"]
    ns: str
    before: str | None
    limit: int


class Put(TypedDict):
    op: Literal["put"]
    ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    saved: dict[str, Any]
    metadata: dict[str, Any]
    blobs: list[Blob]


class Embedded(TypedDict):
    field: str
    vector: list[float]


class StoreGet(TypedDict):
    op: Literal["get"]
    namespace: list[str]
    key: str
    refresh_ttl: bool


class StorePut(TypedDict):
    """A put (a `value` of None deletes the item); under a `store.index`, with the vectors the
    runner embedded."""

    op: Literal["put"]
    namespace: list[str]
    key: str
    value: dict[str, Any] | None
    ttl: float | None
    embedded: NotRequired[list[Embedded]]


class StoreSearch(TypedDict):
    """A search; with a query under a `store.index`, its vector, which the runner embedded."""

    op: Literal["search"]
    namespace_prefix: list[str]
    filter: dict[str, Any] | None
    limit: int
    offset: int
    refresh_ttl: bool
    query_vector: NotRequired[list[float]]


class StoreListNamespaces(TypedDict):
    op: Literal["list_namespaces"]
    prefix: list[str]
    suffix: list[str]
    max_depth: int | None
    limit: int
    offset: int


StoreOp = StoreGet | StorePut | StoreSearch | StoreListNamespaces


class Store(TypedDict):
    op: Literal["store"]
    ops: list[StoreOp]


class FileJson(TypedDict):
    path: str
    content: str
    encoding: str


class Files(TypedDict):
    op: Literal["files"]
    action: Literal["list", "read", "read_under", "write"]
    path: NotRequired[str]
    files: NotRequired[list[FileJson]]
    deleted: NotRequired[list[str]]


class Execute(TypedDict):
    op: Literal["execute"]
    command: str
    timeout: int | None
    span_parent: str | None


class Subagent(TypedDict):
    op: Literal["subagent"]


class Call(TypedDict):
    t: Literal["call"]
    run: int
    id: int
    call: Get | List | Put | Store | Files | Execute | Subagent


class Write(TypedDict):
    task_id: str
    task_path: str
    idx: int
    channel: str
    type: str
    bytes: str


class PutWrites(TypedDict):
    op: Literal["put_writes"]
    ns: str
    checkpoint_id: str
    writes: list[Write]


class DescribeCheckpoint(TypedDict):
    op: Literal["describe"]
    checkpoint_id: str
    snapshot: dict[str, Any]


class SubagentDone(TypedDict):
    op: Literal["subagent_done"]
    slot: int


class Span(TypedDict):
    op: Literal["span"]
    phase: Literal["start", "end"]
    id: str
    parent: NotRequired[str | None]
    name: NotRequired[str]
    kind: NotRequired[str]
    model: NotRequired[str]
    tool: NotRequired[str]
    subagent: NotRequired[str]
    error: NotRequired[str | None]


class Cast(TypedDict):
    t: Literal["cast"]
    run: int
    cast: Put | PutWrites | DescribeCheckpoint | SubagentDone | Span


class Event(TypedDict):
    t: Literal["event"]
    run: int
    event: str
    data: Any


class Outcome(TypedDict):
    kind: Literal["success", "interrupted", "cancelled", "drained", "error"]
    reason: NotRequired[str]
    error: NotRequired[str]
    message: NotRequired[str]
    retryable: NotRequired[bool]
    retire: NotRequired[bool]


class Done(TypedDict):
    t: Literal["done"]
    run: int
    outcome: Outcome


FromRunner = Ready | Described | Blocked | Call | Cast | Event | Done


class SaverFailed(Exception):
    """The worker could not execute a saver operation (the database failed)."""


class Channel:
    """Lines to and from the worker, shared by the runs of this process, and the calls waiting for
    their replies (by call id, unique in the process)."""

    def __init__(self, out: BinaryIO, in_fd: int) -> None:
        self.out = out
        self.in_fd = in_fd
        self.loop = asyncio.get_running_loop()
        self.next_id = 0
        self.waiting: dict[int, asyncio.Future] = {}
        self.messages: asyncio.Queue = asyncio.Queue()
        # Lines sent and not written yet, written together once the loop's current step is done:
        # a superstep sends several messages (writes, events, a checkpoint), and each write is a
        # system call. Callbacks of tools run in threads send too.
        self.pending: list[bytes] = []
        self.sending = threading.Lock()
        # One write at a time on the pipe.
        self.writing = threading.Lock()

    def send(self, message: dict) -> None:
        line = dumps(message) + b"\n"
        with self.sending:
            self.pending.append(line)
            if len(self.pending) > 1:
                return
        try:
            running = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            running = False
        if running:
            self.loop.call_soon(self.flush)
        else:
            self.loop.call_soon_threadsafe(self.flush)

    def flush(self) -> None:
        with self.sending:
            lines, self.pending = self.pending, []
        if lines:
            with self.writing:
                self.out.write(b"".join(lines))

    def send_now(self, message: dict) -> None:
        """Written at once, from any thread, even while the loop is blocked (after what waits)."""
        line = dumps(message) + b"\n"
        with self.sending:
            lines, self.pending = [*self.pending, line], []
        with self.writing:
            self.out.write(b"".join(lines))

    async def call(self, message: dict) -> Any:
        self.next_id += 1
        call_id = self.next_id
        future = self.loop.create_future()
        self.waiting[call_id] = future
        self.send({**message, "id": call_id})
        try:
            return await future
        finally:
            self.waiting.pop(call_id, None)

    async def read(self) -> None:
        reader = asyncio.StreamReader(limit=1 << 30)
        protocol = asyncio.StreamReaderProtocol(reader)
        await self.loop.connect_read_pipe(lambda: protocol, os.fdopen(self.in_fd, "rb"))
        while line := await reader.readline():
            message = loads(line)
            if message["t"] == "reply":
                future = self.waiting.pop(message["id"], None)
                if future is None or future.done():
                    continue
                # A lost lease gets no reply: the worker stops the run.
                error = message.get("error")
                if error is None:
                    future.set_result(message.get("result"))
                else:
                    future.set_exception(SaverFailed(error))
            else:
                await self.messages.put(message)
        # The worker is gone: nothing this process does can be recorded any more.
        os._exit(0)


class RunChannel:
    """One run's messages: the process's channel, each message marked with the run's number."""

    def __init__(self, channel: Channel, run: int) -> None:
        self.channel = channel
        self.run = run
        self.loop = channel.loop

    def send(self, message: dict) -> None:
        self.channel.send({**message, "run": self.run})

    def cast(self, op: str, **args: Any) -> None:
        """An operation that needs no answer (see the module's documentation)."""
        self.send({"t": "cast", "cast": {"op": op, **args}})

    async def call(self, op: str, **args: Any) -> Any:
        return await self.channel.call({"t": "call", "run": self.run, "call": {"op": op, **args}})

    def call_from_thread(self, op: str, **args: Any) -> Any:
        """For LangGraph's synchronous paths (a sync node invoking a subgraph)."""
        return asyncio.run_coroutine_threadsafe(self.call(op, **args), self.loop).result()
