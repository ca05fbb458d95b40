"""mostrador's Python runner: executes Python LangGraph graphs for a Rust worker.

The worker starts a few runner processes, with the path of a `langgraph.json`. A runner loads the
graphs once, then executes many runs at once, each an asyncio task, with LangGraph's own engine
(the `langgraph` package of this environment), so the graphs' semantics are LangGraph's. What
surrounds the engine stays with the worker: the claim, the lease and its heartbeat, the events'
log, drain and cancel, and every database write. A run's checkpointer is a `MostradorSaver` of its
own, whose reads and writes the worker executes in Postgres, fenced by the run's lease; its store
is `MostradorStore`, the Store's items of the thread's owner. The graphs may import `mostrador`
(written beside this script): its `deepagents` module reaches the worker through the run's `Link`.

The protocol is one JSON object per line on the runner's original stdin and stdout, which it
keeps for itself: user code that prints writes to stderr, and reads nothing from stdin. Every
message of a run carries the run's number in this process (`"run": n`), chosen by the worker.

worker -> runner: {"t": "start", "run": n, "spec": {...}}, {"t": "reply", "id": n, "result" |
                  "error": ...}, {"t": "drain", "run": n, "reason": str}, {"t": "cancel",
                  "run": n}, {"t": "describe"}
runner -> worker: {"t": "ready", "graphs": [...]} once loaded; for a run: {"t": "call", "id": n,
                  "op": ...} (ids unique in the process) for the saver's reads and checkpoints,
                  the store's operations (`store`), and what deep agents ask (`files`,
                  `execute`, `subagent`: `mostrador.deepagents`), {"t": "cast", "op": ...} for
                  what needs no answer (a task's writes, the snapshots of checkpoints,
                  `subagent_done`, `span`), {"t": "event", "event": name, "data": ...} for the
                  stream, {"t": "done", "outcome": ..., ...} when the run ends, {"t":
                  "blocked", "seconds": s} when its task has held the event loop that long (the
                  run unknown: `"run": null`); and {"t": "described", "graphs": {id: {"name",
                  "schemas", "graph", "subgraphs"} | {"error"}}}.

The worker handles a run's messages in the order they were sent, so a cast is written before
anything the run sent after it (a call that takes long, `execute` or a wait for a `subagent` slot,
is answered when done, and others' answers may come before it); if it cannot be written, the
worker ends the run (the run is retried from its last checkpoint) instead of answering.
"""

import asyncio
import base64
import contextlib
import gc
import importlib.util
import inspect
import json
import os
import sys
import threading
import time
import traceback
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

# The protocol's streams, taken before any user code runs.
_PROTOCOL_OUT = os.fdopen(os.dup(1), "wb", buffering=0)
_PROTOCOL_IN_FD = os.dup(0)
os.dup2(2, 1)
_devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(_devnull, 0)
sys.stdout = sys.stderr

from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.checkpoint.base import (  # noqa: E402
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
from langgraph.errors import GraphDrained, GraphRecursionError  # noqa: E402
from langgraph.pregel import Pregel  # noqa: E402
from langgraph.runtime import RunControl  # noqa: E402
from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    PutOp,
    SearchItem,
    SearchOp,
)
from langgraph.types import Command, Send, StateSnapshot  # noqa: E402
from langgraph.version import __version__ as LANGGRAPH_VERSION  # noqa: E402

import mostrador  # noqa: E402 - beside this script: what the graphs may use of mostrador

try:
    import orjson
except ImportError:  # pragma: no cover - orjson comes with langsmith
    orjson = None


# ---------------------------------------------------------------------------------------------
# JSON, as the official server writes it.


def _default(obj: Any) -> Any:
    if isinstance(obj, Send):
        return {"node": obj.node, "args": obj.arg}
    if hasattr(obj, "model_dump") and callable(obj.model_dump) and not isinstance(obj, type):
        return obj.model_dump()
    if hasattr(obj, "dict") and callable(obj.dict) and not isinstance(obj, type):
        return obj.dict()
    if hasattr(obj, "_asdict") and callable(obj._asdict) and not isinstance(obj, type):
        return obj._asdict()
    if isinstance(obj, BaseException):
        return {"error": type(obj).__name__, "message": str(obj)}
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    if isinstance(obj, bytes):
        return base64.b64encode(obj).decode()
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    return str(obj)


def dumps(obj: Any) -> bytes:
    """JSON as the official server writes it; objects are turned into JSON on the way."""
    if orjson is not None:
        return orjson.dumps(
            obj,
            default=_default,
            option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY,
        )
    return json.dumps(obj, default=_default, separators=(",", ":")).encode()


def loads(data: bytes) -> Any:
    return orjson.loads(data) if orjson is not None else json.loads(data)


def jsonable(obj: Any) -> Any:
    """The JSON value the official server would send for `obj`, for what must be kept as JSON
    (messages are encoded once, by `dumps`, on their way out)."""
    return loads(dumps(obj))


# ---------------------------------------------------------------------------------------------
# The protocol.


class SaverFailed(Exception):
    """The worker could not execute a saver operation (the database failed)."""


class Channel:
    """Lines to and from the worker, shared by the runs of this process, and the calls waiting for
    their replies (by call id, unique in the process)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.next_id = 0
        self.waiting: dict[int, asyncio.Future] = {}
        self.messages: asyncio.Queue = asyncio.Queue()
        # Callbacks of tools run in threads send too: one line at a time.
        self.sending = threading.Lock()

    def send(self, message: dict) -> None:
        line = dumps(message) + b"\n"
        with self.sending:
            _PROTOCOL_OUT.write(line)

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
        await self.loop.connect_read_pipe(lambda: protocol, os.fdopen(_PROTOCOL_IN_FD, "rb"))
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
        self.send({"t": "cast", "op": op, **args})

    async def call(self, op: str, **args: Any) -> Any:
        return await self.channel.call({"t": "call", "op": op, "run": self.run, **args})

    def call_from_thread(self, op: str, **args: Any) -> Any:
        """For LangGraph's synchronous paths (a sync node invoking a subgraph)."""
        return asyncio.run_coroutine_threadsafe(self.call(op, **args), self.loop).result()


def _b64(data: str) -> bytes:
    return base64.b64decode(data) if data else b""


# ---------------------------------------------------------------------------------------------
# The checkpointer.


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
                return _own_copy(self.latest)
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
        listed = await self.channel.call(
            "list", ns=ns, before=before_id, limit=limit if limit is not None else 1000
        )
        for found in listed:
            checkpoint_tuple = self._tuple(found)
            if filter and not all(
                checkpoint_tuple.metadata.get(k) == v for k, v in filter.items()
            ):
                continue
            yield checkpoint_tuple

    def _tuple(self, found: dict) -> CheckpointTuple:
        ns = found["ns"]
        values = {
            blob["channel"]: self.serde.loads_typed((blob["type"], _b64(blob["bytes"])))
            for blob in found["blobs"]
            if blob["type"] != "empty"
        }
        checkpoint = {**found["saved"], "channel_values": values}
        config = {
            "configurable": {
                "thread_id": self.thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": found["checkpoint_id"],
            }
        }
        parent = found.get("parent_checkpoint_id")
        parent_config = (
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
        writes = [
            (w["task_id"], w["channel"], self.serde.loads_typed((w["type"], _b64(w["bytes"]))))
            for w in found["writes"]
        ]
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
        saved_config = {
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
            {"configurable": {**saved_config["configurable"], "checkpoint_id": parent_id}}
            if parent_id
            else None,
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
                for w in cached.pending_writes
                if not (w[0] == task_id and w[1] in WRITES_IDX_MAP)
                or all(c != w[1] for c, _ in writes)
            ]
            known = {(w[0], w[1]) for w in kept}
            added = [
                (task_id, channel, value)
                for channel, value in writes
                if channel in WRITES_IDX_MAP or (task_id, channel) not in known
            ]
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
        return asyncio.run_coroutine_threadsafe(
            self.aget_tuple(config), self.channel.loop
        ).result()

    def list(self, config, *, filter=None, before=None, limit=None) -> Iterator[CheckpointTuple]:
        async def collect():
            return [
                t async for t in self.alist(config, filter=filter, before=before, limit=limit)
            ]

        yield from asyncio.run_coroutine_threadsafe(collect(), self.channel.loop).result()

    def put(self, config, checkpoint, metadata, new_versions) -> RunnableConfig:
        return asyncio.run_coroutine_threadsafe(
            self.aput(config, checkpoint, metadata, new_versions), self.channel.loop
        ).result()

    def put_writes(self, config, writes, task_id, task_path="") -> None:
        asyncio.run_coroutine_threadsafe(
            self.aput_writes(config, writes, task_id, task_path), self.channel.loop
        ).result()


# ---------------------------------------------------------------------------------------------
# Graphs from langgraph.json.


class MostradorStore(BaseStore):
    """LangGraph's `BaseStore` over mostrador's Store, in Postgres: the items of the run's thread's
    owner, as the worker reads and writes them (a graph cannot name another owner). No semantic
    index: a search finds items by namespace prefix and filter."""

    supports_ttl = True

    def __init__(self, channel: RunChannel, ttl_config: dict | None = None) -> None:
        self.channel = channel
        # `store.ttl` of the langgraph.json: LangGraph applies its `default_ttl` to a put
        # without a ttl, and its `refresh_on_read` to a read that does not say.
        self.ttl_config = ttl_config

    async def abatch(self, ops: Any) -> list:
        ops = list(ops)
        results = await self.channel.call("store", ops=[_store_op(op) for op in ops])
        return [_store_result(op, result) for op, result in zip(ops, results, strict=True)]

    def batch(self, ops: Any) -> list:
        """From LangGraph's synchronous paths (a sync node runs in a thread of its own)."""
        ops = list(ops)
        results = self.channel.call_from_thread("store", ops=[_store_op(op) for op in ops])
        return [_store_result(op, result) for op, result in zip(ops, results, strict=True)]


def _store_op(op: Any) -> dict:
    if isinstance(op, GetOp):
        return {"op": "get", "namespace": list(op.namespace), "key": op.key,
                "refresh_ttl": op.refresh_ttl}
    if isinstance(op, PutOp):
        # A value of None deletes the item.
        return {"op": "put", "namespace": list(op.namespace), "key": op.key, "value": op.value,
                "ttl": op.ttl}
    if isinstance(op, SearchOp):
        return {"op": "search", "namespace_prefix": list(op.namespace_prefix),
                "filter": op.filter, "limit": op.limit, "offset": op.offset,
                "refresh_ttl": op.refresh_ttl}
    if isinstance(op, ListNamespacesOp):
        conditions = {c.match_type: list(c.path) for c in op.match_conditions or ()}
        return {"op": "list_namespaces", "prefix": conditions.get("prefix", []),
                "suffix": conditions.get("suffix", []), "max_depth": op.max_depth,
                "limit": op.limit, "offset": op.offset}
    raise ValueError(f"unknown store operation {op!r}")


def _item(found: dict, kind: type = Item) -> Item:
    return kind(
        namespace=tuple(found["namespace"]),
        key=found["key"],
        value=found["value"],
        created_at=datetime.fromisoformat(found["created_at"]),
        updated_at=datetime.fromisoformat(found["updated_at"]),
    )


def _store_result(op: Any, result: Any) -> Any:
    if isinstance(op, GetOp):
        return None if result is None else _item(result)
    if isinstance(op, SearchOp):
        return [_item(found, SearchItem) for found in result]
    if isinstance(op, ListNamespacesOp):
        return [tuple(namespace) for namespace in result]
    return None


def load_config(path: str) -> dict:
    """The project's `langgraph.json`, its folders put where its imports look, as `langgraph dev`
    puts them: its local `dependencies`, then the project's own folder (for module paths such as
    `"my_agent.graph:graph"`). Its `env` (a mapping, or a file) joins the environment; a file
    that is missing is no error (a project as cloned ships `.env.example`), as officially."""
    with open(path) as f:
        config = json.load(f)
    base = os.path.dirname(os.path.abspath(path))
    for dependency in config.get("dependencies", []):
        if dependency.startswith(".") or dependency.startswith("/"):
            folder = os.path.normpath(os.path.join(base, dependency))
            if folder not in sys.path:
                sys.path.insert(0, folder)
    if base not in sys.path:
        sys.path.append(base)
    env = config.get("env")
    if isinstance(env, dict):
        os.environ.update({k: str(v) for k, v in env.items()})
    elif isinstance(env, str):
        env_path = os.path.join(base, env)
        if os.path.isfile(env_path):
            for key, value in _env_file(env_path):
                os.environ.setdefault(key, value)
        else:
            print(f"mostrador runner: no env file {env_path}: the graphs start without it", file=sys.stderr)
    config["_base"] = base
    return config


def _env_file(path: str) -> Iterator[tuple[str, str]]:
    """`KEY=VALUE` lines (`export` and quotes allowed, `#` comments), as dotenv reads them."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("export "):
                line = line[len("export ") :].lstrip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, value = line.split("=", 1)
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            elif " #" in value:
                value = value.split(" #", 1)[0].rstrip()
            yield key.strip(), value


def load_graph(base: str, graph_id: str, spec: str | dict) -> Any:
    """What `langgraph.json` names: `./file.py:attr` (a file of the project) or `pkg.module:attr`
    (a module on the path). A builder is compiled once, here, as officially."""
    if isinstance(spec, dict):
        spec = spec["path"]
    location, _, attr = spec.rpartition(":")
    if location.endswith(".py") or "/" in location:
        path = os.path.normpath(os.path.join(base, location))
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        module_spec = importlib.util.spec_from_file_location(
            f"mostrador_graphs.{graph_id}", path
        )
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(location)
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, Pregel) and hasattr(obj, "compile") and callable(obj.compile):
        obj = obj.compile()
    return obj


class User(dict):
    """The caller a run acts for (`langgraph_auth_user`), read as the official server's user is:
    by key or by attribute (`identity`, `permissions`, ...), so LangGraph's `runtime.server_info`
    and a `ServerRuntime` carry it."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def identity(self) -> str:
        return self.get("identity", "")

    @property
    def display_name(self) -> str:
        return self.get("display_name") or self.identity

    @property
    def is_authenticated(self) -> bool:
        return self.get("is_authenticated", True)

    @property
    def permissions(self) -> Sequence[str]:
        return self.get("permissions") or []


def _is_server_runtime(annotation: Any) -> bool:
    """Whether a factory's parameter is annotated `ServerRuntime` (bare, parameterized,
    `Annotated`, or one of its variants)."""
    import typing

    if annotation is inspect.Parameter.empty or _SERVER_RUNTIME is None:
        return False
    alias, variants = _SERVER_RUNTIME
    if annotation is alias:
        return True
    if isinstance(annotation, type):
        return issubclass(annotation, variants)
    origin = typing.get_origin(annotation)
    if origin is None:
        return False
    if origin is alias:
        return True
    args = typing.get_args(annotation)
    return bool(args) and _is_server_runtime(args[0])


try:
    from langgraph_sdk.runtime import ServerRuntime, _ExecutionRuntime, _ReadRuntime

    _SERVER_RUNTIME: tuple | None = (ServerRuntime, (_ExecutionRuntime, _ReadRuntime))
except ImportError:  # pragma: no cover - an SDK before ServerRuntime: factories take config
    _SERVER_RUNTIME = None


def factory_arguments(factory: Callable) -> Callable[[RunnableConfig, Any], dict]:
    """How the official server calls a graph factory, from its parameters: none; one, the
    config, or the `ServerRuntime` when so annotated; two, the config and the runtime (by name,
    in either order). Anything else is refused when the project loads."""
    import typing

    parameters = list(inspect.signature(factory).parameters.values())
    try:
        hints = typing.get_type_hints(
            factory,
            localns={"ServerRuntime": _SERVER_RUNTIME[0] if _SERVER_RUNTIME else None,
                     "RunnableConfig": RunnableConfig, "Config": RunnableConfig},
        )
    except Exception:  # noqa: BLE001 - an annotation that cannot be resolved names no runtime
        hints = {}
    runtime = [p.name for p in parameters if _is_server_runtime(hints.get(p.name, p.annotation))]
    names = [p.name for p in parameters]
    if not names:
        return lambda config, server_runtime: {}
    if len(names) == 1:
        if runtime:
            return lambda config, server_runtime: {names[0]: server_runtime}
        return lambda config, server_runtime: {names[0]: config}
    if len(names) == 2 and len(runtime) == 1:
        (config_name,) = [name for name in names if name != runtime[0]]
        return lambda config, server_runtime: {runtime[0]: server_runtime, config_name: config}
    raise TypeError(
        f"graph factory {getattr(factory, '__qualname__', factory)} must take no argument, the "
        f"config, a ServerRuntime, or both (got {names})"
    )


class Project:
    """The graphs of a `langgraph.json`, loaded once; each run or description enters its own
    graph, as the official server does: a compiled graph as it is, a factory called with the
    run's config and a `ServerRuntime` (its `context` for a run), entered when it gives a
    context manager and left when the run ends."""

    def __init__(self, config: dict) -> None:
        self.values: dict[str, Any] = {}
        self.arguments: dict[str, Callable] = {}
        self.store_ttl: dict | None = (config.get("store") or {}).get("ttl")
        self._context_keys: dict[Any, frozenset | None] = {}
        for graph_id, spec in config.get("graphs", {}).items():
            value = load_graph(config["_base"], graph_id, spec)
            if not isinstance(value, Pregel):
                if not callable(value):
                    raise TypeError(f"graph {graph_id!r}: {type(value).__name__} is not a graph or a graph factory")
                self.arguments[graph_id] = factory_arguments(value)
            self.values[graph_id] = value

    def __contains__(self, graph_id: str) -> bool:
        return graph_id in self.values

    def ids(self) -> list[str]:
        return sorted(self.values)

    @contextlib.asynccontextmanager
    async def enter(
        self,
        graph_id: str,
        config: RunnableConfig,
        *,
        access: str,
        store: BaseStore | None = None,
        context: dict | None = None,
    ) -> AsyncIterator[Pregel]:
        """The graph `graph_id` for `access` (`threads.create_run`, `threads.update`,
        `threads.read`, `assistants.read`), named after its id unless its code named it."""
        value = self.values[graph_id]
        if graph_id in self.arguments:
            value = value(**self.arguments[graph_id](config, self._server_runtime(config, access, store, context)))
        async with _entered(value) as made:
            if not isinstance(made, Pregel) and hasattr(made, "compile") and callable(made.compile):
                made = made.compile()
            if not isinstance(made, Pregel):
                raise TypeError(f"graph {graph_id!r} gave {type(made).__name__}, not a graph")
            yield made.copy(update={"name": graph_id}) if made.name == "LangGraph" else made

    @staticmethod
    def _server_runtime(config: RunnableConfig, access: str, store: Any, context: dict | None) -> Any:
        if _SERVER_RUNTIME is None:
            return None
        user = (config.get("configurable") or {}).get("langgraph_auth_user")
        if access == "threads.create_run":
            return _ExecutionRuntime(access_context=access, user=user, store=store, context=context)
        return _ReadRuntime(access_context=access, user=user, store=store)

    def context_for(self, graph: Pregel, context: dict) -> dict:
        """The run's context as the graph takes it: the keys its context schema declares, when it
        declares some (the official server drops the others, so a dataclass is not handed a key it
        has no field for)."""
        if not context:
            return context
        schema = graph.context_schema
        if schema not in self._context_keys:
            keys = None
            with contextlib.suppress(Exception):
                properties = (graph.get_context_jsonschema() or {}).get("properties")
                keys = frozenset(properties) if properties else None
            self._context_keys[schema] = keys
        keys = self._context_keys[schema]
        return context if keys is None else {k: v for k, v in context.items() if k in keys}


@contextlib.asynccontextmanager
async def _entered(value: Any) -> AsyncIterator[Any]:
    """What a factory gave: awaited if a coroutine, entered if a context manager."""
    if inspect.isawaitable(value) and not hasattr(value, "__aenter__"):
        value = await value
    if hasattr(value, "__aenter__") and hasattr(value, "__aexit__"):
        async with value as entered:
            yield entered
    elif hasattr(value, "__enter__") and hasattr(value, "__exit__"):
        with value as entered:
            yield entered
    else:
        yield value


# ---------------------------------------------------------------------------------------------
# Graphs described for the api: their schemas, drawings and subgraphs, as the official server
# answers `assistants.get_schemas`, `get_graph` and `get_subgraphs`.

# Keys of `configurable` that the server fills, left out of a graph's config schema.
_SERVER_CONFIGURABLE = (
    "__pregel_checkpointer",
    "__pregel_store",
    "checkpoint_id",
    "checkpoint_ns",
    "thread_id",
)


def _or_none(what: str, compute: Any) -> Any:
    import warnings

    try:
        with warnings.catch_warnings():
            # `config_schema` is deprecated, and still what the official server reads.
            warnings.simplefilter("ignore", DeprecationWarning)
            return compute()
    except Exception as err:  # noqa: BLE001 - a schema the graph cannot give is absent
        print(f"mostrador runner: no {what} (as on the official server): {err!r}", file=sys.stderr)
        return None


def _config_schema(graph: Pregel) -> dict:
    from pydantic import TypeAdapter

    config_schema = graph.config_schema()
    fields = getattr(config_schema, "model_fields", None) or getattr(
        config_schema, "__fields__", None
    )
    if fields is None or "configurable" not in fields:
        return {}
    schema = TypeAdapter(fields["configurable"].annotation).json_schema()
    if schema:
        for key in _SERVER_CONFIGURABLE:
            schema.get("properties", {}).pop(key, None)
    config_type = getattr(graph, "config_type", None)
    if config_type is not None and hasattr(config_type, "__name__"):
        schema["title"] = config_type.__name__
    return schema


def _state_schema(graph: Pregel) -> dict:
    from langchain_core.runnables.utils import create_model

    fields: dict = {}
    for key in graph.stream_channels_list:
        update_type = graph.channels[key].UpdateType
        try:
            create_model(key, __root__=(update_type, None)).model_json_schema()
            fields[key] = (update_type, None)
        except Exception:  # noqa: BLE001 - a type pydantic cannot describe is any value
            fields[key] = (Any, None)
    return create_model(graph.get_name("State"), **fields).model_json_schema()


def schemas(graph: Pregel) -> dict:
    return jsonable(
        {
            "input_schema": _or_none("input schema", graph.get_input_jsonschema),
            "output_schema": _or_none("output schema", graph.get_output_jsonschema),
            "state_schema": _or_none("state schema", lambda: _state_schema(graph)),
            "config_schema": _or_none("config schema", lambda: _config_schema(graph)),
            "context_schema": _or_none("context schema", graph.get_context_jsonschema),
        }
    )


def drawing(graph: Pregel, xray: bool | int) -> dict | None:
    try:
        drawn = graph.get_graph(xray=xray).to_json()
    except NotImplementedError:
        return None
    for node in drawn.get("nodes", []):
        if isinstance(node.get("data"), dict):
            node["data"].pop("id", None)
    return jsonable(drawn)


async def describe(project: Project, graph_id: str) -> dict:
    """What the api serves about a graph: the assistant's name (a compiled graph's own `name`,
    as the official server names its assistant), schemas, its drawings (`xray` false, 1 to the
    depth of its subgraphs, true) and the schemas of every subgraph by namespace
    (`parent|child`)."""
    value = project.values[graph_id]
    name = value.name if isinstance(value, Pregel) and value.name != "LangGraph" else graph_id
    async with project.enter(graph_id, {"configurable": {}}, access="assistants.read") as graph:
        subgraphs = {ns: schemas(sub) for ns, sub in graph.get_subgraphs(recurse=True)}
        depth = max((ns.count("|") + 1 for ns in subgraphs), default=0)
        return {
            "name": name,
            "schemas": schemas(graph),
            "graph": {
                "false": drawing(graph, False),
                **{str(level): drawing(graph, level) for level in range(1, depth)},
                "true": drawing(graph, True),
            },
            "subgraphs": subgraphs,
        }


# ---------------------------------------------------------------------------------------------
# Runs.


def goto(value: Any) -> Any:
    """A command's `goto` as the SDKs send it: node names, or `{"node", "input"}` for a Send."""
    if value is None:
        return ()
    if isinstance(value, dict):
        return Send(value["node"], value.get("input"))
    if isinstance(value, list):
        return [goto(item) for item in value]
    return value


def checkpoint_json(thread_id: str, config: RunnableConfig | None) -> dict | None:
    if not config or not config.get("configurable", {}).get("checkpoint_id"):
        return None
    configurable = config["configurable"]
    found = {
        "checkpoint_id": configurable["checkpoint_id"],
        "thread_id": thread_id,
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
    }
    if "checkpoint_map" in configurable:
        found["checkpoint_map"] = configurable["checkpoint_map"]
    return found


def interrupt_json(interrupt: Any) -> dict:
    if isinstance(interrupt, dict):
        return {"id": interrupt.get("id"), "value": interrupt.get("value")}
    return {"id": interrupt.id, "value": interrupt.value}


def thread_state(thread_id: str, state: StateSnapshot) -> dict:
    """A state snapshot as the official server answers it (`ThreadState`), for `dumps`."""
    return {
            "values": state.values,
            "next": state.next,
            "tasks": [
                {
                    "id": task.id,
                    "name": task.name,
                    "path": task.path,
                    "error": task.error,
                    "interrupts": [interrupt_json(i) for i in task.interrupts],
                    "checkpoint": task.state["configurable"]
                    if task.state is not None and not isinstance(task.state, StateSnapshot)
                    else None,
                    "state": thread_state(thread_id, task.state)
                    if isinstance(task.state, StateSnapshot)
                    else None,
                    "result": getattr(task, "result", None),
                }
                for task in state.tasks
            ],
            "metadata": state.metadata,
            "created_at": state.created_at,
            "checkpoint": checkpoint_json(thread_id, state.config),
            "parent_checkpoint": checkpoint_json(thread_id, state.parent_config),
            "interrupts": [interrupt_json(i) for i in getattr(state, "interrupts", ())],
            "checkpoint_id": (state.config or {}).get("configurable", {}).get("checkpoint_id"),
            "parent_checkpoint_id": (state.parent_config or {})
            .get("configurable", {})
            .get("checkpoint_id"),
        }


class Link:
    """A run's link with its worker, as `mostrador.current()` gives it to the graph's code."""

    def __init__(self, channel: RunChannel, thread_id: str) -> None:
        self.loop = channel.loop
        self.run = channel.run
        self.thread_id = thread_id
        self.call = channel.call
        self.cast = channel.cast


# Spans are sent only where the worker exports them.
SPANS = bool(os.environ.pop("MOSTRADOR_RUNNER_SPANS", ""))


class Spans(BaseCallbackHandler):
    """The run's model calls, tool calls and subagent delegations (deepagents' `task` tool), as
    spans the worker exports under the run's own. Each hangs under the nearest of them that
    encloses it: a subagent's calls under its delegation, whatever chains lie between."""

    run_inline = True

    def __init__(self, channel: RunChannel) -> None:
        self.channel = channel
        self.parents: dict[Any, Any] = {}
        self.open: set[Any] = set()

    def _enclosing(self, parent: Any) -> str | None:
        while parent is not None and parent not in self.open:
            parent = self.parents.get(parent)
        return None if parent is None else str(parent)

    def _start(self, run_id: Any, parent: Any, name: str, kind: str, **attributes: str) -> None:
        self.parents[run_id] = parent
        self.open.add(run_id)
        self.channel.cast("span", phase="start", id=str(run_id), parent=self._enclosing(parent), name=name, kind=kind, **attributes)

    def _end(self, run_id: Any, error: BaseException | None = None) -> None:
        self.parents.pop(run_id, None)
        if run_id in self.open:
            self.open.discard(run_id)
            self.channel.cast("span", phase="end", id=str(run_id), error=None if error is None else f"{type(error).__name__}: {error}")

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: Any, parent_run_id: Any = None, **kwargs: Any) -> None:
        self.parents[run_id] = parent_run_id

    def on_chain_end(self, outputs: Any, *, run_id: Any, **kwargs: Any) -> None:
        self.parents.pop(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self.parents.pop(run_id, None)

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any, parent_run_id: Any = None, **kwargs: Any) -> None:
        params = kwargs.get("invocation_params") or {}
        model = params.get("model") or params.get("model_name") or (kwargs.get("metadata") or {}).get("ls_model_name") or ""
        self._start(run_id, parent_run_id, "model call", "model", model=str(model))

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: Any, parent_run_id: Any = None, **kwargs: Any) -> None:
        self._start(run_id, parent_run_id, "model call", "model")

    def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
        self._end(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self._end(run_id, error)

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: Any, parent_run_id: Any = None, **kwargs: Any) -> None:
        tool = (serialized or {}).get("name") or kwargs.get("name") or ""
        if tool == "task":
            inputs = kwargs.get("inputs") or {}
            self._start(run_id, parent_run_id, "delegation", "delegation", tool=tool, subagent=str(inputs.get("subagent_type", "")))
        else:
            self._start(run_id, parent_run_id, "tool call", "tool", tool=tool)

    def on_tool_end(self, output: Any, *, run_id: Any, **kwargs: Any) -> None:
        self._end(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self._end(run_id, error)


class Run:
    """One run: LangGraph's stream, its events to the worker, its checkpoints described."""

    def __init__(self, channel: RunChannel, project: Project, spec: dict) -> None:
        self.channel = channel
        self.project = project
        self.spec = spec
        self.thread_id = spec["thread_id"]
        self.control = RunControl()
        self.saver = MostradorSaver(channel, self.thread_id)
        self.saver.saving = self.saving
        self.store = MostradorStore(channel, project.store_ttl)
        self.link = Link(channel, self.thread_id)
        self.spans = Spans(channel) if SPANS else None
        if "latest" in spec:
            # Read by the worker with the run.
            self.saver.latest = self.saver._tuple(spec["latest"]) if spec["latest"] else None
        # The newest checkpoint of the thread this run made or goes on from, not yet described:
        # it is described when its tasks have run (with their results), at the next checkpoint or
        # at the run's end.
        self.undescribed: str | None = None
        # Past checkpoints whose records are due, and those being described while LangGraph goes
        # on: one at a time, in order, each after the one before.
        self.due: list[str] = []
        self.recording: asyncio.Task | None = None
        self.input_checkpoint: str | None = None

    def config(self) -> RunnableConfig:
        spec = self.spec
        run_config = spec.get("config") or {}
        configurable = {
            **(run_config.get("configurable") or {}),
            "thread_id": self.thread_id,
            "run_id": spec["run_id"],
            "graph_id": spec["graph_id"],
            "assistant_id": spec["assistant_id"],
        }
        metadata = {
            **(spec.get("metadata") or {}),
            "run_id": spec["run_id"],
            "thread_id": self.thread_id,
            "graph_id": spec["graph_id"],
            "assistant_id": spec["assistant_id"],
            "run_attempt": spec["attempt"],
            # As the official server's, the engine that ran it.
            "langgraph_version": LANGGRAPH_VERSION,
        }
        user = configurable.get("langgraph_auth_user")
        if isinstance(user, dict):
            configurable["langgraph_auth_user"] = User(user)
        config: dict = {
            "configurable": configurable,
            "metadata": metadata,
            "recursion_limit": run_config.get("recursion_limit", 25),
            "tags": run_config.get("tags", []),
        }
        if run_config.get("max_concurrency"):
            config["max_concurrency"] = run_config["max_concurrency"]
        if self.spans is not None:
            config["callbacks"] = [self.spans]
        return config

    async def execute(self) -> dict:
        spec = self.spec
        config = self.config()
        update = (spec.get("command") or {}).get("update_state")
        # The run's context (its assistant's merged with its own, `{}` when neither has one, so
        # the schema's defaults apply), as the official server hands it to LangGraph.
        context = spec.get("context") or {}
        async with self.project.enter(
            spec["graph_id"],
            config,
            access="threads.update" if update is not None else "threads.create_run",
            store=self.store,
            context=context,
        ) as graph:
            self.graph = graph.copy(update={"checkpointer": self.saver, "store": self.store})
            if update is not None:
                return await self.update_state(update)
            return await self.stream(config, self.project.context_for(graph, context))

    async def stream(self, config: RunnableConfig, context: dict) -> dict:
        spec = self.spec
        graph = self.graph
        latest = await graph.aget_state(config)
        if latest.metadata and latest.metadata.get("run_id") == spec["run_id"]:
            # This run saved a checkpoint before (it was drained, or its worker died): go on.
            graph_input = None
            self.undescribed = latest.config["configurable"]["checkpoint_id"]
        elif spec.get("checkpoint_id"):
            # From a past checkpoint (regenerate, edit, time travel): LangGraph forks there.
            config = {
                **config,
                "configurable": {**config["configurable"], "checkpoint_id": spec["checkpoint_id"]},
            }
            graph_input = self.given_input()
        else:
            graph_input = self.given_input()
        wanted = list(spec.get("stream_mode") or ["values"])
        modes = set(wanted) - {"events"}
        # Checkpoints are described to the worker (LangGraph's `values` carry the interrupts).
        modes |= {"checkpoints"}
        subgraphs = bool(spec.get("stream_subgraphs"))
        kwargs = {}
        if spec.get("interrupt_before"):
            kwargs["interrupt_before"] = spec["interrupt_before"]
        if spec.get("interrupt_after"):
            kwargs["interrupt_after"] = spec["interrupt_after"]
        kwargs.update(
            context=context,
            stream_mode=sorted(modes),
            subgraphs=True,
            control=self.control,
            durability=spec.get("durability") or "sync",
        )
        if "events" in wanted:
            chunks = self.with_events(graph, graph_input, config, kwargs)
        else:
            chunks = graph.astream(graph_input, config, **kwargs)
        try:
            async for ns, mode, data in chunks:
                await self.on_chunk(ns, mode, data, wanted, subgraphs)
        except GraphDrained as drained:
            await self.describe_latest()
            return {"outcome": "drained", "reason": drained.reason}
        except BaseException:
            # Failed or cancelled: its last checkpoint is the thread's state (with a failed
            # task's error, saved with it).
            with contextlib.suppress(Exception):
                await self.describe_latest()
            raise
        final = await self.describe_latest()
        if final is None:
            final = {"next": (await graph.aget_state(self.config())).next}
        return {"outcome": "interrupted" if final["next"] else "success"}

    async def with_events(
        self, graph: Pregel, graph_input: Any, config: RunnableConfig, kwargs: dict
    ) -> AsyncIterator[tuple]:
        """The stream's chunks, sending LangChain's callback events (`events`) beside them, as
        the official server streams them: the chunks come out of the graph's own
        `on_chain_stream` events; every other event is sent whole, but those tagged hidden."""
        if self.spec["attempt"] == 1:
            # The run's id is its root callback run's, as on the official server.
            config = {**config, "run_id": self.spec["run_id"]}
        async for event in graph.astream_events(graph_input, config, version="v2", **kwargs):
            if event["event"] == "on_chain_stream" and not event.get("parent_ids"):
                yield event["data"]["chunk"]
            elif "langsmith:hidden" not in (event.get("tags") or ()):
                self.emit("events", event)

    def given_input(self) -> Any:
        """The run's input, or its command (a resume, an update, a goto)."""
        command = self.spec.get("command")
        if not command:
            return self.spec.get("input")
        return Command(
            resume=command.get("resume"),
            update=command.get("update"),
            goto=goto(command.get("goto")),
        )

    async def update_state(self, update: dict) -> dict:
        """`threads.update_state`: the graph's own reducers apply the values as `as_node` wrote
        them, in a new checkpoint, as the official server does. A refusal (an unknown node, a
        value no channel takes) is reported to the api and changes nothing."""
        spec = self.spec
        # As the official server's: the thread and graph, not the run, are the update's config;
        # the run id makes a retried update (its worker died) apply once.
        config = {
            "configurable": {
                "thread_id": self.thread_id,
                "graph_id": spec["graph_id"],
                "checkpoint_ns": "",
                "run_id": spec["run_id"],
            }
        }
        latest = await self.graph.aget_state(config)
        if latest.metadata and latest.metadata.get("run_id") == spec["run_id"]:
            applied = latest.config
        else:
            # From a past checkpoint when the client names one: LangGraph forks the thread there.
            at = config
            if update.get("checkpoint_id"):
                at = {"configurable": {**config["configurable"], "checkpoint_id": update["checkpoint_id"]}}
            try:
                applied = await self.graph.aupdate_state(
                    at, update.get("values"), as_node=update.get("as_node")
                )
            except SaverFailed:
                raise
            except Exception as err:  # noqa: BLE001 - LangGraph refused the update
                self.emit("update_state", {"error": type(err).__name__, "message": str(err)})
                return {"outcome": "interrupted" if latest.next else "success"}
        self.undescribed = applied["configurable"]["checkpoint_id"]
        final = await self.describe_latest()
        self.emit("update_state", checkpoint_json(self.thread_id, applied))
        return {"outcome": "interrupted" if final is not None and final["next"] else "success"}

    async def on_chunk(self, ns: tuple, mode: str, data: Any, wanted: list, subgraphs: bool):
        if mode == "checkpoints" and not ns:
            checkpoint_id = data["config"]["configurable"]["checkpoint_id"]
            if checkpoint_id == self.undescribed:
                self.channel.cast(
                    "describe",
                    checkpoint_id=checkpoint_id,
                    snapshot=self.arrived(checkpoint_id, data),
                )
        if ns and not subgraphs:
            return
        suffix = "|" + "|".join(ns) if ns else ""
        if mode == "messages":
            # Stored as `[message, metadata]`: the api unfolds them for clients of `messages`.
            if "messages" in wanted:
                self.emit("messages" + suffix, data)
        elif mode in wanted:
            self.emit(mode + suffix, data)

    def emit(self, event: str, data: Any) -> None:
        self.channel.send({"t": "event", "event": event, "data": data})

    async def describe(self, checkpoint_id: str, *, live: bool) -> dict:
        """Describes a checkpoint of the thread for the api, with the states of waiting subgraphs
        (the api leaves them out unless asked). `live`: the thread's latest, as LangGraph shows
        the current state (the writes of tasks that finished applied, `next` only what is left
        to run); otherwise as a record of its step, as history shows it. The snapshot is sent
        without waiting: the worker writes it before anything this run sends after it."""
        configurable = {**self.config()["configurable"], "checkpoint_ns": ""}
        if not live:
            configurable["checkpoint_id"] = checkpoint_id
        state = await self.graph.aget_state({"configurable": configurable}, subgraphs=True)
        snapshot = thread_state(self.thread_id, state)
        self.channel.cast("describe", checkpoint_id=checkpoint_id, snapshot=snapshot)
        return snapshot

    def arrived(self, checkpoint_id: str, data: dict) -> dict:
        """A new checkpoint as LangGraph's `checkpoints` event tells it (values, next, tasks):
        the thread's state until the checkpoint is described with the graph, once its tasks have
        run or at the run's end (a run killed in between keeps this one). It costs no `aget_state`;
        its tasks lack their `path`."""
        saved = self.saver.saved.get(("", checkpoint_id))
        tasks = []
        for task in data.get("tasks", ()):
            state = task.get("state")
            tasks.append(
                {
                    "id": task["id"],
                    "name": task["name"],
                    "path": [],
                    "error": task.get("error"),
                    "interrupts": [interrupt_json(i) for i in task.get("interrupts", ())],
                    "checkpoint": state.get("configurable") if isinstance(state, dict) else None,
                    "state": None,
                    "result": task.get("result"),
                }
            )
        return {
            "values": data.get("values"),
            "next": data.get("next", []),
            "tasks": tasks,
            "metadata": data.get("metadata"),
            "created_at": saved.checkpoint.get("ts") if saved is not None else None,
            "interrupts": [i for task in tasks for i in task["interrupts"]],
        }

    def saving(self, checkpoint_id: str, source: str | None) -> None:
        """LangGraph saves a new checkpoint of the thread: the previous one's tasks have run, so
        it is described now with their results, off LangGraph's path (while the worker writes
        the new one, which is the thread's state until it is described in turn). The input's
        checkpoint waits one more step: the run's first event, the next checkpoint's values,
        goes out first."""
        if source == "input":
            self.input_checkpoint = checkpoint_id
        if self.undescribed is not None:
            self.due.append(self.undescribed)
        self.undescribed = checkpoint_id
        if self.due and self.due != [self.input_checkpoint]:
            self.start_recording()

    def start_recording(self) -> None:
        due, self.due = self.due, []
        self.recording = asyncio.ensure_future(self.record(self.recording, due))

    async def record(self, before: asyncio.Task | None, checkpoint_ids: list[str]) -> None:
        if before is not None:
            await before
        for checkpoint_id in checkpoint_ids:
            try:
                await self.describe(checkpoint_id, live=False)
            except Exception:  # noqa: BLE001 - the checkpoint keeps its state as it arrived
                traceback.print_exc()

    async def describe_latest(self) -> dict | None:
        """At the run's end (or a drain, an error, an update): its last checkpoint, as the
        thread's current state, after the records of the ones before it."""
        if self.due:
            self.start_recording()
        recording, self.recording = self.recording, None
        if recording is not None:
            await recording
        if self.undescribed is None:
            return None
        checkpoint_id, self.undescribed = self.undescribed, None
        return await self.describe(checkpoint_id, live=True)


async def run_one(run: Run) -> None:
    """Executes a run to its end and tells the worker how it ended."""
    # What the graph's code reaches of mostrador is this run's, in this task and those it starts.
    mostrador._run.set(run.link)
    try:
        done = await run.execute()
    except asyncio.CancelledError:
        done = {"outcome": "cancelled"}
    except SaverFailed as failed:
        done = {"outcome": "error", "error": "CheckpointerError", "message": str(failed), "retryable": True}
    except MemoryError:
        # Over the runner's memory limit: another process, with its memory whole, tries again
        # from the last checkpoint; this one takes no new run.
        done = {
            "outcome": "error",
            "error": "MemoryError",
            "message": "the run exceeded the runner's memory limit",
            "retryable": True,
            "retire": True,
        }
    except GraphRecursionError as err:
        done = {"outcome": "error", "error": "GraphRecursionError", "message": str(err), "retryable": False}
    except Exception as err:  # noqa: BLE001 - the user's graph failed: the run ends `error`
        traceback.print_exc()
        done = {"outcome": "error", "error": type(err).__name__, "message": str(err), "retryable": False}
    run.channel.send({"t": "done", **done})


async def describe_all(channel: Channel, project: Project) -> None:
    described = {}
    for graph_id in project.ids():
        try:
            described[graph_id] = await describe(project, graph_id)
        except Exception as err:  # noqa: BLE001 - e.g. a factory that needs a run
            traceback.print_exc()
            described[graph_id] = {"error": f"{type(err).__name__}: {err}"}
    channel.send({"t": "described", "graphs": described})


def watch_the_loop(channel: Channel, blocked_after: float) -> None:
    """A thread that tells the worker when a run has blocked this process's event loop for
    `blocked_after` seconds (a `time.sleep` or a CPU-bound loop in an async node): every run of
    the process waits for it, so the worker ends that run and replaces the process. The run is
    the one whose task holds the loop (its context carries the run's link)."""
    loop = channel.loop
    beat = [time.monotonic()]
    # The run of each task: its creator's (tasks inherit their creator's context, and with it the
    # run's link).
    runs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def task_of_its_run(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        context = kwargs.get("context")
        link = context.get(mostrador._run) if context is not None else mostrador._run.get()
        if link is not None:
            runs[task] = link.run
        return task

    loop.set_task_factory(task_of_its_run)

    def tick() -> None:
        beat[0] = time.monotonic()
        loop.call_later(0.1, tick)

    loop.call_soon_threadsafe(tick)

    def watch() -> None:
        told = None
        while True:
            time.sleep(0.1)
            blocked = time.monotonic() - beat[0]
            if blocked < blocked_after:
                told = None
                continue
            task = asyncio.tasks._current_tasks.get(loop)
            run = runs.get(task) if task is not None else None
            if told != run:
                told = run
                channel.send({"t": "blocked", "run": run, "seconds": round(blocked, 1)})

    threading.Thread(target=watch, name="mostrador-loop-watch", daemon=True).start()


def limit_memory() -> None:
    """The worker's `--python-memory-limit-mib`, before any user code allocates."""
    mib = os.environ.pop("MOSTRADOR_RUNNER_MEMORY_LIMIT_MIB", "")
    if mib:
        import resource

        limit = int(mib) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


async def main() -> None:
    limit_memory()
    config_path = sys.argv[1]
    channel = Channel()
    reading = asyncio.ensure_future(channel.read())
    project = Project(load_config(config_path))
    # What was loaded stays: the collector need not scan it again. LangGraph allocates many
    # short-lived objects per step; collecting the youngest generation less often spares most of
    # the collector's passes, for a few megabytes.
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    blocked_after = float(os.environ.pop("MOSTRADOR_RUNNER_BLOCKED_AFTER", "") or 0)
    if blocked_after > 0:
        watch_the_loop(channel, blocked_after)
    channel.send({"t": "ready", "graphs": project.ids()})
    # The runs this process executes, by their number, each a task of its own.
    runs: dict[int, tuple[Run, asyncio.Task]] = {}
    while True:
        message = await channel.messages.get()
        kind, number = message["t"], message.get("run")
        if kind == "start":
            run = Run(RunChannel(channel, number), project, message["spec"])
            task = asyncio.ensure_future(run_one(run))
            runs[number] = (run, task)
            task.add_done_callback(lambda _, number=number: runs.pop(number, None))
        elif kind == "drain" and number in runs:
            runs[number][0].control.request_drain(message.get("reason") or "shutdown")
        elif kind == "cancel" and number in runs:
            runs[number][1].cancel()
        elif kind == "describe":
            asyncio.ensure_future(describe_all(channel, project))
        # A drain or cancel of a run that has ended concerns nothing.
    reading.cancel()


if __name__ == "__main__":
    try:
        # The official server's event loop, where the environment has it.
        import uvloop
    except ImportError:
        uvloop = None
    if uvloop is not None:
        uvloop.run(main())
    else:
        asyncio.run(main())
