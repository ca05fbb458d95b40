"""Record a LangGraph server's answers for the graphs in langgraph.json.

Runs one fixed sequence of calls with the official async SDK
(`langgraph_sdk.get_client`) and writes a normalized JSON document, so that
the answers of two servers (the official `langgraph dev` and mostrador) can be
compared with diff.py.

    python compare.py --url http://127.0.0.1:2024 [--header 'Authorization: Bearer X'] --out answers.json

Each call's result is stored under a descriptive key ("<graph>/<call>...").
A failing call is stored as {"error": {"status": <HTTP status or null>,
"message": ...}} and the sequence goes on.

Normalization (applied per top-level key, traversing dicts in sorted key order
so that numbering does not depend on the server's key order):
  * ids: every distinct uuid (in values and dict keys, also inside longer strings such as
    "lc_run--<uuid>-0" or "child:<uuid>"), every bare hex string of 16+
    characters (interrupt ids), the values of the keys in ID_KEYS and the `id`
    of tool calls / tool call chunks are replaced with "<idN>", numbered in
    order of first appearance within the key. Threads created by this script
    and assistants found by assistants.search get stable names instead
    ("<thread agent/wait>", "<assistant agent>") across the whole document.
  * timestamps: values of TIME_KEYS (strings or epoch numbers, e.g.
    configurable.__request_start_time_ms__) and any ISO-8601 datetime string
    (also inside longer strings) become "<ts>".
  * the server URL given with --url becomes "<url>" inside any string
    (the official server puts it in metadata as `langgraph_api_url`).
  * dropped: the `run_id` of each stream's `metadata` event (asked for by the
    comparison design; run ids still appear masked elsewhere).
  * reordered: assistants.search results are sorted by graph_id (the server
    orders by creation time, which ties for assistants created at startup).
Nothing else is dropped: server-specific fields (for instance versions in
checkpoint metadata) stay, and belong in diff.py's --allow file.
"""

import argparse
import asyncio
import json
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from langgraph_sdk import get_client

GRAPHS = ["agent", "approval", "mapreduce", "parent", "custom", "linear6"]

INPUTS: dict[str, Any] = {
    "agent": {"messages": [{"role": "user", "content": "What is the weather in Paris?"}]},
    "approval": {"request": "deploy v2"},
    "mapreduce": {"items": ["b", "A", "c"]},
    "parent": {"value": "x"},
    "custom": {"steps": 3},
    "linear6": {"path": []},
}

STREAM_MODES = [
    "values", "updates", "messages", "messages-tuple", "custom", "debug", "tasks", "checkpoints", "events",
]

RESUME = {"action": "approve", "comment": "looks good"}

ID_KEYS = {
    "thread_id",
    "run_id",
    "assistant_id",
    "checkpoint_id",
    "parent_checkpoint_id",
    "task_id",
    "interrupt_id",
    "tool_call_id",
}
TIME_KEYS = {"created_at", "updated_at", "ts", "timestamp", "__request_start_time_ms__"}

UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
HEX_RE = re.compile(r"[0-9a-fA-F]{16,}")
ISO_RE = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")


class Normalizer:
    """Masks ids and timestamps; `named` ids keep the same name everywhere."""

    def __init__(self, url: str = "") -> None:
        self.named: dict[str, str] = {}
        self.url = url

    def name(self, value: Any, label: str) -> None:
        if isinstance(value, str) and value:
            self.named.setdefault(value, label)

    def normalize(self, value: Any) -> Any:
        local: dict[str, str] = {}

        def mask_id(raw: str) -> str:
            if raw in self.named:
                return self.named[raw]
            key = raw.lower()
            if key not in local:
                local[key] = f"<id{len(local) + 1}>"
            return local[key]

        def mask_str(text: str) -> str:
            if text in self.named:
                return self.named[text]
            if HEX_RE.fullmatch(text):
                return mask_id(text)
            if self.url:
                text = text.replace(self.url, "<url>")
            text = ISO_RE.sub("<ts>", text)
            return UUID_RE.sub(lambda m: mask_id(m.group(0)), text)

        def id_free(text: str) -> str:
            return "" if HEX_RE.fullmatch(text) else UUID_RE.sub("", text)

        def walk(node: Any) -> Any:
            if isinstance(node, dict):
                is_tool_call = node.get("type") in ("tool_call", "tool_call_chunk") or (
                    "name" in node and "args" in node and "id" in node
                )
                out = {}
                # Keys can be ids too (thread.interrupts is keyed by task id):
                # order by the key with ids blanked out, so numbering is stable.
                for k in sorted(node, key=lambda k: (id_free(str(k)), str(k))):
                    v = node[k]
                    mk = mask_str(k) if isinstance(k, str) else k
                    if isinstance(v, (str, int, float)) and not isinstance(v, bool) and k in TIME_KEYS:
                        out[mk] = "<ts>"
                    elif isinstance(v, str) and (k in ID_KEYS or (k == "id" and is_tool_call)):
                        out[mk] = mask_id(v) if v else v
                    else:
                        out[mk] = walk(v)
                return out
            if isinstance(node, (list, tuple)):
                return [walk(v) for v in node]
            if isinstance(node, str):
                return mask_str(node)
            return node

        return walk(value)


def describe_error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, httpx.HTTPStatusError):
        try:
            body = exc.response.text
        except Exception:  # streamed response not read
            body = ""
        return {"status": exc.response.status_code, "message": body[:1000] or str(exc)}
    return {"status": None, "message": f"{type(exc).__name__}: {exc}"[:1000]}


class Recorder:
    def __init__(self) -> None:
        self.raw: dict[str, Any] = {}

    async def call(self, key: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """Await fn(); store its result (or the error) under key; return result or None."""
        try:
            result = await fn()
        except Exception as exc:  # record, do not abort
            self.raw[key] = {"error": describe_error(exc)}
            print(f"  {key}: ERROR {self.raw[key]['error']['status']}", file=sys.stderr)
            return None
        self.raw[key] = result
        print(f"  {key}: ok", file=sys.stderr)
        return result


async def collect_stream(stream: Any) -> list[list[Any]]:
    events = []
    async for part in stream:
        data = part.data
        if part.event == "metadata" and isinstance(data, dict):
            data = {k: v for k, v in data.items() if k != "run_id"}
        events.append([part.event, data])
    return events


async def run(url: str, headers: dict[str, str]) -> dict[str, Any]:
    client = get_client(url=url, headers=headers or None)
    rec = Recorder()
    norm = Normalizer(url)

    async def new_thread(label: str) -> str | None:
        thread = await rec.call(f"{label}/threads.create", lambda: client.threads.create())
        if thread is None:
            return None
        norm.name(thread["thread_id"], f"<thread {label}>")
        return thread["thread_id"]

    # Assistants.
    async def search() -> list[dict[str, Any]]:
        found = await client.assistants.search(limit=100)
        return sorted(found, key=lambda a: (str(a.get("graph_id")), str(a.get("assistant_id"))))

    assistants = await rec.call("assistants.search", search)
    # graph id -> assistant id of the system assistant (fall back to the graph id).
    aid = {graph: graph for graph in GRAPHS}
    for assistant in assistants or []:
        norm.name(assistant.get("assistant_id"), f"<assistant {assistant.get('graph_id')}>")
        if assistant.get("graph_id") in aid and (assistant.get("metadata") or {}).get("created_by") == "system":
            aid[assistant["graph_id"]] = assistant["assistant_id"]
    for graph in GRAPHS:
        a = aid[graph]
        await rec.call(f"{graph}/assistants.get", lambda a=a: client.assistants.get(a))
        await rec.call(f"{graph}/assistants.get_schemas", lambda a=a: client.assistants.get_schemas(a))
        await rec.call(f"{graph}/assistants.get_graph", lambda a=a: client.assistants.get_graph(a))
    for graph in ("agent", "parent"):
        await rec.call(
            f"{graph}/assistants.get_graph(xray)",
            lambda a=aid[graph]: client.assistants.get_graph(a, xray=True),
        )
    await rec.call("parent/assistants.get_subgraphs", lambda: client.assistants.get_subgraphs(aid["parent"]))
    await rec.call(
        "parent/assistants.get_subgraphs(recurse)",
        lambda: client.assistants.get_subgraphs(aid["parent"], recurse=True),
    )
    # The official server accepts a graph id in place of an assistant id for
    # runs and get_graph, but answers 422 for get_schemas/get_subgraphs.
    await rec.call("agent/assistants.get_graph(by graph id)", lambda: client.assistants.get_graph("agent"))
    await rec.call("agent/assistants.get_schemas(by graph id)", lambda: client.assistants.get_schemas("agent"))

    # One fresh thread per (graph, stream mode).
    for graph in GRAPHS:
        variants = [False, True] if graph == "parent" else [False]
        for subgraphs in variants:
            for mode in STREAM_MODES:
                label = f"{graph}/stream/{mode}" + ("/subgraphs" if subgraphs else "")
                thread_id = await new_thread(label)
                if thread_id is None:
                    continue
                await rec.call(
                    label,
                    lambda t=thread_id, g=graph, m=mode, s=subgraphs: collect_stream(
                        client.runs.stream(t, g, input=INPUTS[g], stream_mode=m, stream_subgraphs=s)
                    ),
                )
    # A combined multi-mode stream.
    label = "agent/stream/updates+messages-tuple+values"
    thread_id = await new_thread(label)
    if thread_id is not None:
        await rec.call(
            label,
            lambda t=thread_id: collect_stream(
                client.runs.stream(
                    t, "agent", input=INPUTS["agent"], stream_mode=["updates", "messages-tuple", "values"]
                )
            ),
        )

    # runs.wait, then state and history, on a fresh thread per graph.
    for graph in GRAPHS:
        label = f"{graph}/wait"
        thread_id = await new_thread(label)
        if thread_id is None:
            continue
        await rec.call(f"{label}/runs.wait", lambda t=thread_id, g=graph: client.runs.wait(t, g, input=INPUTS[g]))
        await rec.call(f"{label}/threads.get_state", lambda t=thread_id: client.threads.get_state(t))
        await rec.call(f"{label}/threads.get_history", lambda t=thread_id: client.threads.get_history(t, limit=50))
        await rec.call(f"{label}/threads.get", lambda t=thread_id: client.threads.get(t))

    # Threads found by their state's values: two threads of one graph, run with different inputs.
    probes = []
    for item in ("probe-one", "probe-two"):
        label = f"mapreduce/values/{item}"
        thread_id = await new_thread(label)
        if thread_id is not None:
            probes.append(thread_id)
            await rec.call(
                f"{label}/runs.wait",
                lambda t=thread_id, i=item: client.runs.wait(t, "mapreduce", input={"items": [i]}),
            )
    for values in ({"items": ["probe-one"]}, {"items": ["probe-two"]}, {"items": ["probe-three"]}):
        await rec.call(
            f"threads.search(values={values})",
            lambda v=values: client.threads.search(values=v, ids=probes),
        )
        await rec.call(f"threads.count(values={values})", lambda v=values: client.threads.count(values=v))

    # Approval: stream stops at the interrupt, then resume with a command.
    label = "approval/resume"
    thread_id = await new_thread(label)
    if thread_id is not None:
        t = thread_id
        await rec.call(
            f"{label}/runs.stream(values)",
            lambda: collect_stream(client.runs.stream(t, "approval", input=INPUTS["approval"], stream_mode="values")),
        )
        await rec.call(f"{label}/threads.get_state(interrupted)", lambda: client.threads.get_state(t))
        await rec.call(f"{label}/threads.get(interrupted)", lambda: client.threads.get(t))
        await rec.call(
            f"{label}/runs.wait(command.resume)",
            lambda: client.runs.wait(t, "approval", command={"resume": RESUME}),
        )
        await rec.call(f"{label}/runs.list", lambda: client.runs.list(t))
        await rec.call(f"{label}/threads.get_state(final)", lambda: client.threads.get_state(t))
        await rec.call(f"{label}/threads.get_history", lambda: client.threads.get_history(t, limit=50))
        await rec.call(f"{label}/threads.get(final)", lambda: client.threads.get(t))

    # Approval resumed through a stream (updates), to see the events after a resume.
    label = "approval/resume-stream"
    thread_id = await new_thread(label)
    if thread_id is not None:
        t = thread_id
        await rec.call(f"{label}/runs.wait", lambda: client.runs.wait(t, "approval", input=INPUTS["approval"]))
        await rec.call(
            f"{label}/runs.stream(updates, command.resume)",
            lambda: collect_stream(
                client.runs.stream(t, "approval", command={"resume": RESUME}, stream_mode="updates")
            ),
        )
        await rec.call(f"{label}/threads.get_state", lambda: client.threads.get_state(t))

    # update_state on linear6: plain, then as_node="n3" and continue from there.
    label = "linear6/update"
    thread_id = await new_thread(label)
    if thread_id is not None:
        t = thread_id
        await rec.call(f"{label}/runs.wait", lambda: client.runs.wait(t, "linear6", input=INPUTS["linear6"]))
        await rec.call(
            f"{label}/threads.update_state",
            lambda: client.threads.update_state(t, {"path": ["edited"]}),
        )
        await rec.call(f"{label}/threads.get_state(after update)", lambda: client.threads.get_state(t))
        await rec.call(
            f"{label}/threads.update_state(as_node=n3)",
            lambda: client.threads.update_state(t, {"path": ["from-n3"]}, as_node="n3"),
        )
        await rec.call(f"{label}/threads.get_state(after as_node)", lambda: client.threads.get_state(t))
        await rec.call(
            f"{label}/threads.update_state(as_node=unknown)",
            lambda: client.threads.update_state(t, {"path": ["x"]}, as_node="unknown"),
        )
        await rec.call(f"{label}/runs.wait(continue)", lambda: client.runs.wait(t, "linear6", input=None))
        await rec.call(f"{label}/runs.list", lambda: client.runs.list(t))
        await rec.call(f"{label}/threads.get_state(final)", lambda: client.threads.get_state(t))
        await rec.call(f"{label}/threads.get_history", lambda: client.threads.get_history(t, limit=50))

    # A subgraph that waits: the parent's state with and without the subgraphs' states.
    label = "nested/resume"
    thread_id = await new_thread(label)
    if thread_id is not None:
        t = thread_id
        await rec.call(
            f"{label}/runs.stream(values)",
            lambda: collect_stream(client.runs.stream(t, "nested", input={"value": "x"}, stream_mode="values")),
        )
        await rec.call(f"{label}/threads.get_state(interrupted)", lambda: client.threads.get_state(t))
        await rec.call(
            f"{label}/threads.get_state(interrupted, subgraphs)",
            lambda: client.threads.get_state(t, subgraphs=True),
        )
        await rec.call(f"{label}/threads.get_history", lambda: client.threads.get_history(t, limit=50))
        await rec.call(f"{label}/runs.wait(command.resume)", lambda: client.runs.wait(t, "nested", command={"resume": "yes"}))
        await rec.call(f"{label}/threads.get_state(final, subgraphs)", lambda: client.threads.get_state(t, subgraphs=True))

    # Two branches of one superstep, one waiting: the finished one's write survives the resume.
    label = "fork/resume"
    thread_id = await new_thread(label)
    if thread_id is not None:
        t = thread_id
        await rec.call(f"{label}/runs.wait", lambda: client.runs.wait(t, "fork", input={"topic": "tea"}))
        await rec.call(f"{label}/threads.get_state(interrupted)", lambda: client.threads.get_state(t))
        await rec.call(f"{label}/runs.wait(command.resume)", lambda: client.runs.wait(t, "fork", command={"resume": "yes"}))
        await rec.call(f"{label}/threads.get_history", lambda: client.threads.get_history(t, limit=50))

    # Time travel: a run from a past checkpoint (what a chat UI's "regenerate" sends).
    label = "linear6/from-checkpoint"
    thread_id = await new_thread(label)
    if thread_id is not None:
        t = thread_id
        await rec.call(f"{label}/runs.wait", lambda: client.runs.wait(t, "linear6", input=INPUTS["linear6"]))
        past = await client.threads.get_history(t, limit=50)
        at_n4 = next((s["checkpoint"] for s in past if s["next"] == ["n4"]), None)
        if at_n4 is not None:
            await rec.call(
                f"{label}/runs.wait(checkpoint)",
                lambda: client.runs.wait(t, "linear6", input=None, checkpoint=at_n4),
            )
            await rec.call(
                f"{label}/runs.wait(checkpoint_id)",
                lambda: client.runs.wait(t, "linear6", input=None, checkpoint_id=at_n4["checkpoint_id"]),
            )
            await rec.call(f"{label}/threads.get_state", lambda: client.threads.get_state(t))
            await rec.call(f"{label}/threads.get_history", lambda: client.threads.get_history(t, limit=50))
            # An edit of the past: a branch whose values differ from the first branch's.
            await rec.call(
                f"{label}/threads.update_state(checkpoint_id)",
                lambda: client.threads.update_state(
                    t, {"path": ["edited"]}, checkpoint_id=at_n4["checkpoint_id"]
                ),
            )
            await rec.call(f"{label}/threads.get_state(edited)", lambda: client.threads.get_state(t))
            await rec.call(
                f"{label}/runs.wait(edited)", lambda: client.runs.wait(t, "linear6", input=None)
            )

    # A thread's stream (threads.join_stream): the events of the runs that start while it is open,
    # each run's `metadata` first and `run_done` last.
    label = "linear6/thread-stream"
    thread_id = await new_thread(label)
    if thread_id is not None:
        t = thread_id

        async def thread_stream() -> list[list[Any]]:
            events: list[list[Any]] = []

            async def listen() -> None:
                async for part in await client.threads.join_stream(t):
                    events.append([part.event, part.data])
                    if part.event == "metadata" and (part.data or {}).get("status") == "run_done":
                        return

            listening = asyncio.create_task(listen())
            # The official server gives no sign that a thread stream listens: give it time.
            await asyncio.sleep(0.5)
            run = await client.runs.create(
                t, "linear6", input=INPUTS["linear6"], stream_mode=["values", "updates"]
            )
            await client.runs.join(t, run["run_id"])
            await asyncio.wait_for(listening, 10)
            return events

        await rec.call(f"{label}/threads.join_stream", thread_stream)

    # The store: a graph's memories, across threads, and the SDK's store calls on them.
    label = "memory/store"
    for note in ("tea", "coffee"):
        thread_id = await new_thread(f"{label}/{note}")
        if thread_id is not None:
            await rec.call(
                f"{label}/runs.wait({note})",
                lambda t=thread_id, n=note: client.runs.wait(
                    t, "memory", input={"user": "ana", "note": n}
                ),
            )

    async def searched() -> list:
        found = await client.store.search_items(["memories", "ana"], limit=50)
        return sorted(found["items"], key=lambda item: item["key"])

    await rec.call(f"{label}/store.search_items", searched)
    await rec.call(f"{label}/store.get_item", lambda: client.store.get_item(["memories", "ana"], "tea"))
    await rec.call(
        f"{label}/store.get_item(missing)", lambda: client.store.get_item(["memories", "ana"], "nope")
    )
    await rec.call(
        f"{label}/store.put_item",
        lambda: client.store.put_item(["memories", "ana"], "juice", {"note": "juice"}),
    )
    await rec.call(
        f"{label}/store.list_namespaces", lambda: client.store.list_namespaces(prefix=["memories"])
    )
    await rec.call(
        f"{label}/store.delete_item", lambda: client.store.delete_item(["memories", "ana"], "juice")
    )
    await rec.call(f"{label}/store.search_items(after delete)", searched)

    # runs.cancel_many: a finished run named by id (matched, left as it was), a status when nothing
    # is in flight, and a status with ids (refused).
    label = "linear6/cancel_many"
    thread_id = await new_thread(label)
    if thread_id is not None:
        await client.runs.wait(thread_id, "linear6", input=INPUTS["linear6"])
        runs = await client.runs.list(thread_id)
        ids = [r["run_id"] for r in runs]
        await rec.call(
            f"{label}/runs.cancel_many(finished)",
            lambda: client.runs.cancel_many(thread_id=thread_id, run_ids=ids),
        )
        await rec.call(
            f"{label}/runs.list(after)",
            lambda: client.runs.list(thread_id),
        )
        await rec.call(f"{label}/runs.cancel_many(pending)", lambda: client.runs.cancel_many(status="pending"))
        await rec.call(
            f"{label}/runs.cancel_many(status and ids)",
            lambda: client.runs.cancel_many(thread_id=thread_id, run_ids=ids, status="all"),
        )

    # Assistants the client creates (configured instances of a graph), as apps create them.
    label = "assistants/configured"

    async def created() -> dict:
        made = await client.assistants.create(
            "linear6", config={"configurable": {"tone": "terse"}}, metadata={"team": "a"}, name="terse"
        )
        norm.name(made["assistant_id"], "<assistant terse>")
        return made

    made = await rec.call(f"{label}/create", created)
    if made is not None:
        mine = made["assistant_id"]
        await rec.call(
            f"{label}/update",
            lambda: client.assistants.update(mine, metadata={"stage": "beta"}, name="terser"),
        )
        await rec.call(f"{label}/get", lambda: client.assistants.get(mine))
        await rec.call(f"{label}/get_versions", lambda: client.assistants.get_versions(mine))
        await rec.call(f"{label}/set_latest", lambda: client.assistants.set_latest(mine, 1))
        await rec.call(f"{label}/search(metadata)", lambda: client.assistants.search(metadata={"team": "a"}))
        await rec.call(f"{label}/count(graph_id)", lambda: client.assistants.count(graph_id="linear6"))
        thread_id = await new_thread(label)
        if thread_id is not None:
            await rec.call(
                f"{label}/runs.wait",
                lambda t=thread_id: client.runs.wait(t, mine, input=INPUTS["linear6"]),
            )
        await rec.call(f"{label}/delete", lambda: client.assistants.delete(mine))
        await rec.call(f"{label}/get(deleted)", lambda: client.assistants.get(mine))

    # Parent state with subgraphs (completed: no pending subgraph tasks).
    label = "parent/wait"
    if f"{label}/threads.create" in rec.raw and "thread_id" in (rec.raw[f"{label}/threads.create"] or {}):
        t = rec.raw[f"{label}/threads.create"]["thread_id"]
        await rec.call(f"{label}/threads.get_state(subgraphs)", lambda: client.threads.get_state(t, subgraphs=True))

    # What threads' checkpoints occupy (`GET /threads/{id}/storage`, no SDK method yet).
    for label in ("approval/resume", "mapreduce/wait", "parent/wait", "linear6/wait"):
        created = rec.raw.get(f"{label}/threads.create") or {}
        if "thread_id" in created:
            t = created["thread_id"]
            await rec.call(f"{label}/threads.storage", lambda t=t: client.http.get(f"/threads/{t}/storage"))
    empty = await new_thread("storage/empty")
    if empty is not None:
        await rec.call("storage/empty/threads.storage", lambda: client.http.get(f"/threads/{empty}/storage"))

    # A2A with the official A2A client (a2a_calls.py), on the same assistants.
    from a2a_calls import a2a_calls

    await rec.call("a2a", lambda: a2a_calls(url, headers, aid, rec))

    # The thread-centric stream protocol through the SDK's own classes (thread_stream.py).
    from thread_stream import thread_stream_calls

    await rec.call("thread_stream", lambda: thread_stream_calls(url, headers, rec))

    return {key: norm.normalize(value) for key, value in rec.raw.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:2024")
    parser.add_argument("--header", action="append", default=[], help="'Name: value', repeatable")
    parser.add_argument("--out", required=True, help="output JSON file")
    args = parser.parse_args()
    headers = {}
    for header in args.header:
        name, sep, value = header.partition(":")
        if not sep:
            parser.error(f"bad --header {header!r}, expected 'Name: value'")
        headers[name.strip()] = value.strip()
    answers = asyncio.run(run(args.url.rstrip("/"), headers))
    with open(args.out, "w") as f:
        json.dump(answers, f, indent=1, sort_keys=False, ensure_ascii=False)
        f.write("\n")
    errors = sum(1 for v in answers.values() if isinstance(v, dict) and set(v) == {"error"})
    print(f"wrote {len(answers)} answers ({errors} errors) to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
