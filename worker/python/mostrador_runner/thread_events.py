"""A run's events for the thread-centric stream protocol (`client.threads.stream`, the official
server's "v3" protocol): LangGraph's own `astream_events(version="v3")` events, shaped as the
official server shapes them for its clients.

A run started by `run.start` carries the official marker in its `configurable`. Its events are
stored already shaped, one protocol event each (`{namespace, data, node?, timestamp,
event_id?}` under the event name `<method>|<namespace>`); the api numbers them across the
thread's runs, adds each run's root lifecycle (`running`, then how it ended) and filters them
for each subscriber.

What the shaping does, per run:
* a subgraph's `lifecycle` is moved onto the subgraph's own namespace, `started` once;
* a subgraph whose node reported its update (`updates` of the parent naming it) is
  `completed`; the ones still open when the run ends are completed, deepest first;
* a state's interrupts become `input.requested` events, once per interrupt, followed by the
  root's `interrupted`; `__interrupt__` never reaches a `values` event;
* messages in a state are written in the protocol's message shape;
* LangGraph's streamed messages are already protocol events and pass as they are.
"""

import json
import time
from typing import Any

from .encoding import jsonable

MARKER = "__event_streaming_v2"

MESSAGE_TYPES = {"human", "user", "ai", "assistant", "system", "tool", "function", "remove"}
BLOCK_TYPES = {
    "text",
    "reasoning",
    "tool_call",
    "tool_call_chunk",
    "invalid_tool_call",
    "server_tool_call",
    "server_tool_call_chunk",
    "server_tool_call_result",
    "image",
    "audio",
    "video",
    "file",
    "non_standard",
}


def asked(config: Any) -> bool:
    """Whether a run was started by the thread-centric protocol (its `configurable` says so)."""
    return bool((config.get("configurable") or {}).get(MARKER))


def checkpoint_tap(on_checkpoint):
    """A transformer that hands the run's root checkpoints to `on_checkpoint` (they are described
    to the worker, as in every run) and keeps them off the protocol's events."""

    # LangGraph's v3 streaming is new (1.2): imported only by the runs that use it.
    from langgraph.stream._types import StreamTransformer

    class CheckpointTap(StreamTransformer):
        required_stream_modes = ("checkpoints",)

        def init(self) -> dict:
            return {}

        def process(self, event: Any) -> bool:
            if event.get("method") != "checkpoints":
                return True
            params = event.get("params") or {}
            if not params.get("namespace"):
                on_checkpoint(params.get("data"))
            return False

    return CheckpointTap


def record(value: Any) -> dict:
    """`value` if it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def ns_key(namespace: list[str]) -> str:
    return "\x00".join(namespace)


def guess_graph_name(namespace: list[str]) -> str:
    return namespace[-1].split(":", 1)[0] if namespace else ""


class Shaper:
    """Shapes one run's protocol events; each shaped event is handed to `emit(name, payload)`."""

    def __init__(self, run_id: str, graph_id: str, emit) -> None:
        self.run_id = run_id
        self.graph_id = graph_id
        self.emit = emit
        # Open and closed subgraph namespaces of this run, in the order they were seen:
        # key -> [namespace, status, graph name].
        self.namespaces: dict[str, list] = {}
        self.started_sent: set[str] = set()
        self.interrupts_sent: set[str] = set()
        self.root_status = "running"

    def synth_id(self, *parts: str) -> str:
        return f"synth:{self.run_id}:" + "|".join(parts)

    def send(self, method: str, namespace: list[str], data: Any, *, node=None, event_id=None, timestamp=None) -> None:
        payload: dict[str, Any] = {
            "namespace": namespace,
            "timestamp": timestamp if isinstance(timestamp, int) else int(time.time() * 1000),
            "data": data,
        }
        if node is not None:
            payload["node"] = node
        if event_id is not None:
            payload["event_id"] = event_id
        suffix = "|" + "|".join(namespace) if namespace else ""
        self.emit(method + suffix, payload)

    def take(self, event: Any) -> None:
        """One event of LangGraph's `astream_events(version="v3")`."""
        method = str(event.get("method") or "")
        params = event.get("params") or {}
        namespace = [str(part) for part in params.get("namespace") or []]
        data = jsonable(params.get("data"))
        if method == "lifecycle":
            self.lifecycle(namespace, data)
            return
        if namespace:
            self.register(namespace)
        node = params.get("node") if isinstance(params.get("node"), str) else None
        if method == "messages":
            # LangGraph's streamed messages are protocol events, sent with their metadata.
            if isinstance(data, list) and len(data) == 2:
                data = data[0]
            if not (isinstance(data, dict) and isinstance(data.get("event"), str)):
                return
        elif method == "values":
            interrupts = [jsonable(item) for item in params.get("interrupts") or []]
            if isinstance(data, dict) and isinstance(data.get("__interrupt__"), list):
                interrupts += data["__interrupt__"]
            self.input_requested(namespace, interrupts)
            data = state(data)
        elif method == "updates":
            if node is None and isinstance(data, dict) and len(data) == 1:
                node = next(iter(data))
            if node == "__interrupt__":
                self.input_requested(namespace, list(record(data).get("__interrupt__") or []))
                return
            data = state(data)
        self.send(method, namespace, data, node=node, timestamp=params.get("timestamp"))
        if method == "updates" and node:
            self.child_completed(namespace, node)

    def finish(self) -> None:
        """The run ends: the subgraphs still open are completed, deepest first (the api adds the
        root's end)."""
        still_open = [entry for entry in self.namespaces.values() if entry[1] == "started"]
        for namespace, _, graph_name in sorted(still_open, key=lambda entry: -len(entry[0])):
            self.lifecycle_of(namespace, "completed", graph_name)

    def register(self, namespace: list[str]) -> None:
        for length in range(1, len(namespace) + 1):
            prefix = namespace[:length]
            known = self.namespaces.get(ns_key(prefix))
            if known is None:
                self.namespaces[ns_key(prefix)] = [prefix, "started", guess_graph_name(prefix)]
            elif known[1] != "started":
                known[1] = "started"

    def lifecycle(self, namespace: list[str], data: Any) -> None:
        if not isinstance(data, dict) or not isinstance(data.get("event"), str):
            if namespace:
                self.register(namespace)
            return
        own = data.get("namespace")
        if isinstance(own, list) and all(isinstance(part, str) for part in own) and len(own) > len(namespace):
            namespace = own
        if not namespace:
            # The root's lifecycle is the api's.
            return
        status = data["event"]
        if status == "started":
            key = ns_key(namespace)
            if key in self.started_sent:
                return
            self.started_sent.add(key)
            graph_name = data.get("graph_name") if isinstance(data.get("graph_name"), str) else guess_graph_name(namespace)
            known = self.namespaces.get(key)
            if known is None:
                self.namespaces[key] = [namespace, "started", graph_name]
            else:
                known[1:] = ["started", graph_name]
            self.send("lifecycle", namespace, data)
        elif status in ("running", "completed", "failed", "interrupted"):
            graph_name = data.get("graph_name") if isinstance(data.get("graph_name"), str) else None
            error = data.get("error") if isinstance(data.get("error"), str) else None
            self.lifecycle_of(namespace, status, graph_name, error=error)
        else:
            self.register(namespace)

    def lifecycle_of(self, namespace: list[str], status: str, graph_name: str | None, *, error: str | None = None) -> None:
        key = ns_key(namespace)
        if namespace and key not in self.namespaces:
            self.register(namespace)
        known = self.namespaces.get(key)
        name = graph_name or (known[2] if known else None) or (self.graph_id if not namespace else guess_graph_name(namespace))
        if not namespace:
            if self.root_status == status:
                return
            self.root_status = status
        else:
            known = self.namespaces[key]
            if known[1] == status and known[2] == name and error is None:
                return
            known[1:] = [status, name]
        data: dict[str, Any] = {"event": status, "graph_name": name}
        if error is not None:
            data["error"] = error
        self.send("lifecycle", namespace, data, event_id=self.synth_id("lc", key, status))

    def child_completed(self, parent: list[str], node: str) -> None:
        """A node's update at `parent`: the oldest open subgraph it ran is done."""
        if node.startswith("__"):
            return
        for namespace, status, graph_name in self.namespaces.values():
            if len(namespace) != len(parent) + 1 or status != "started" or namespace[: len(parent)] != parent:
                continue
            last = namespace[-1]
            if last == node or last.startswith(node + ":"):
                self.lifecycle_of(namespace, "completed", graph_name)
                return

    def input_requested(self, namespace: list[str], interrupts: list) -> None:
        sent_any = False
        for item in interrupts:
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                continue
            interrupt_id = item["id"]
            if interrupt_id in self.interrupts_sent:
                continue
            self.interrupts_sent.add(interrupt_id)
            request: dict[str, Any] = {"interrupt_id": interrupt_id}
            if "value" in item:
                request["payload"] = item["value"]
            self.send("input.requested", namespace, request, event_id=self.synth_id("input", ns_key(namespace), interrupt_id))
            sent_any = True
        if sent_any:
            # The run waits for `input.respond`: the root is interrupted now.
            self.lifecycle_of([], "interrupted", self.graph_id)


def state(value: Any) -> Any:
    """A state as the protocol shows it: messages in the protocol's shape, no `__interrupt__`."""
    if isinstance(value, list):
        return [message(item) if is_message(item) else state(item) for item in value]
    if not isinstance(value, dict):
        return value
    shaped = {}
    for key, entry in value.items():
        if key == "__interrupt__":
            continue
        if key == "messages" and isinstance(entry, list):
            shaped[key] = [message(item) if is_message(item) else item for item in entry]
        else:
            shaped[key] = state(entry)
    return shaped


def message_type(value: Any) -> str | None:
    return {"assistant": "ai", "user": "human"}.get(value, value) if isinstance(value, str) else None


def is_message(value: Any) -> bool:
    return isinstance(value, dict) and message_type(value.get("type")) in MESSAGE_TYPES


def message(value: dict) -> dict:
    kind = message_type(value.get("type"))
    shaped: dict[str, Any] = {"type": kind, "content": content(value.get("content", ""))}
    for key in ("id", "name"):
        if isinstance(value.get(key), str):
            shaped[key] = value[key]
    if kind in ("ai", "human") and isinstance(value.get("example"), bool):
        shaped["example"] = value["example"]
    if isinstance(value.get("response_metadata"), dict) and value["response_metadata"]:
        shaped["response_metadata"] = value["response_metadata"]
    if kind == "tool":
        if isinstance(value.get("tool_call_id"), str):
            shaped["tool_call_id"] = value["tool_call_id"]
        if value.get("status") in ("success", "error"):
            shaped["status"] = value["status"]
        if "artifact" in value:
            shaped["artifact"] = value["artifact"]
    if kind == "ai":
        extra = record(value.get("additional_kwargs"))
        raw_calls = value.get("tool_calls")
        if not (isinstance(raw_calls, list) and raw_calls):
            raw_calls = extra.get("tool_calls")
        calls, invalid = tool_calls(raw_calls)
        if isinstance(value.get("invalid_tool_calls"), list) and value["invalid_tool_calls"]:
            invalid = [invalid_call(raw) for raw in value["invalid_tool_calls"] if isinstance(raw, dict)]
        if calls:
            shaped["tool_calls"] = calls
        if invalid:
            shaped["invalid_tool_calls"] = invalid
    return shaped


def content(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    blocks = []
    for entry in value:
        if isinstance(entry, str):
            blocks.append({"type": "text", "text": entry})
        elif (block := content_block(entry)) is not None:
            blocks.append(block)
    return blocks or value


def content_block(value: Any) -> dict | None:
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return None
    if value["type"] in BLOCK_TYPES:
        return value
    if value["type"] == "image_url":
        image = value.get("image_url")
        url = image if isinstance(image, str) else image.get("url") if isinstance(image, dict) else None
        return {"type": "image", "url": url} if isinstance(url, str) else None
    return {"type": "non_standard", "value": dict(value)}


def tool_calls(raw: Any) -> tuple[list, list]:
    calls: list = []
    invalid: list = []
    for call in raw if isinstance(raw, list) else []:
        if not isinstance(call, dict):
            continue
        function = record(call.get("function"))
        call_id = call.get("id") if isinstance(call.get("id"), str) else None
        name = next((n for n in (call.get("name"), function.get("name")) if isinstance(n, str)), None)
        args = call["args"] if "args" in call else function.get("arguments")
        valid = True
        if args is None or args == "":
            args = {}
        elif isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                valid = False
        if name is None or not valid:
            entry: dict[str, Any] = {"type": "invalid_tool_call"}
            if name is not None:
                entry["name"] = name
            entry["error"] = "Malformed args." if name is not None else "Incomplete tool call."
            if call_id is not None:
                entry["id"] = call_id
            if isinstance(args, str):
                entry["args"] = args
            invalid.append(entry)
            continue
        shaped: dict[str, Any] = {"type": "tool_call", "name": name, "args": args}
        if call_id is not None:
            shaped["id"] = call_id
        calls.append(shaped)
    return calls, invalid


def invalid_call(raw: dict) -> dict:
    function = record(raw.get("function"))
    entry: dict[str, Any] = {"type": "invalid_tool_call"}
    if isinstance(raw.get("id"), str):
        entry["id"] = raw["id"]
    name = raw.get("name") if isinstance(raw.get("name"), str) else function.get("name")
    if isinstance(name, str):
        entry["name"] = name
    if isinstance(raw.get("args"), str):
        entry["args"] = raw["args"]
    entry["error"] = raw["error"] if isinstance(raw.get("error"), str) else "Malformed args."
    return entry
