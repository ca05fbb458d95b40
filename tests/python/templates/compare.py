"""Drive a LangGraph server serving this project (the template-style graphs) with the official
SDK, the way a template's user does, and record its answers with ids and times masked.

    python compare.py --url http://127.0.0.1:2024 [--header 'Authorization: Bearer X'] --out answers.json

Each answer is stored under a key naming the graph and the call; a failing call is stored as
{"error": {"status", "message"}} and the sequence goes on (check.py compares two such files).
"""

import argparse
import ast
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from langgraph_sdk import get_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from compare import Normalizer, Recorder, collect_stream  # noqa: E402

WEATHER = {"messages": [{"role": "user", "content": "What is the weather in Paris?"}]}
HELLO = {"messages": [{"role": "user", "content": "hello there"}]}
LARGE = {"model": "openai/fake-large", "system_prompt": "You are terse and exact."}


def last_message(state: Any) -> Any:
    """A final state's last message, as a user reads the answer."""
    if isinstance(state, dict) and state.get("messages"):
        message = state["messages"][-1]
        return {"type": message.get("type"), "content": message.get("content"),
                "tool_calls": message.get("tool_calls")}
    return state


async def mcp_calls(url: str, headers: dict[str, str], rec: Recorder) -> None:
    """MCP (`/mcp`) through the official MCP client, as an MCP host uses a LangGraph server: the
    assistants as tools, with their input schemas; one called; an unknown one refused."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client
    from mcp.shared.exceptions import McpError

    async with streamablehttp_client(f"{url}/mcp", headers=headers or None) as (read, write, _):
        async with ClientSession(read, write) as session:
            started = await session.initialize()
            rec.raw["mcp/initialize"] = {
                "protocolVersion": started.protocolVersion,
                "capabilities": started.capabilities.model_dump(exclude_none=True),
            }
            listed = await session.list_tools()
            rec.raw["mcp/tools/list"] = sorted(
                (
                    {"name": t.name, "title": t.title, "description": t.description, "inputSchema": t.inputSchema}
                    for t in listed.tools
                ),
                key=lambda tool: tool["name"],
            )
            called = await session.call_tool("prebuilt", {"messages": "What is the weather in Paris?"})
            text = called.content[0].text if called.content else ""
            # The final state as Python's `repr` writes it: read back, its last message compared.
            rec.raw["mcp/tools/call"] = {"isError": called.isError, "content": [c.type for c in called.content]}
            rec.raw["mcp/tools/call/answer"] = last_message(ast.literal_eval(text))
            try:
                await session.call_tool("no_such_tool", {})
                rec.raw["mcp/tools/call/unknown"] = "answered"
            except McpError as err:
                rec.raw["mcp/tools/call/unknown"] = {"code": err.error.code, "message": err.error.message}


async def run(url: str, headers: dict[str, str]) -> dict[str, Any]:
    client = get_client(url=url, headers=headers or None)
    rec = Recorder()
    norm = Normalizer(url)

    async def wait(key: str, assistant: str, payload: Any, **kwargs: Any) -> Any:
        """A run on a new thread, waited for: its answer and the run as the server lists it."""
        thread = await client.threads.create()
        state = await rec.call(
            key, lambda: client.runs.wait(thread["thread_id"], assistant, input=payload, **kwargs)
        )
        rec.raw[f"{key}/answer"] = last_message(state)
        runs = await client.runs.list(thread["thread_id"])
        # What the run was asked (the rest of a run's config is each server's own).
        rec.raw[f"{key}/run"] = {"status": runs[0]["status"]} | {
            k: runs[0]["kwargs"].get(k) for k in ("context", "input", "command")
        }
        return thread

    # The graphs' own assistants, named and described as the project says.
    found = await rec.call(
        "assistants.search", lambda: client.assistants.search(limit=100, metadata={"created_by": "system"})
    )
    ids = {a["graph_id"]: a["assistant_id"] for a in found or ()}
    if isinstance(found, list):
        rec.raw["assistants.search"] = sorted(
            ({k: a.get(k) for k in ("graph_id", "name", "description", "context", "config")} for a in found),
            key=lambda a: a["graph_id"],
        )

    # The ReAct template: no context (the schema's defaults), a context, `configurable` as the
    # context, and an assistant created with a context merged with a run's.
    await wait("agent/wait/default", "agent", WEATHER)
    await wait("agent/wait/context", "agent", WEATHER, context=LARGE)
    await wait("agent/wait/configurable", "agent", HELLO, config={"configurable": {"model": "openai/fake-large"}})
    await wait("agent/wait/unknown-context-key", "agent", HELLO, context={"model": "openai/fake-large", "nope": 1})
    assistant = await rec.call(
        "agent/assistants.create",
        lambda: client.assistants.create("agent", context={"model": "openai/fake-large"}, name="large"),
    )
    if assistant:
        await wait("agent/assistant/wait", assistant["assistant_id"], HELLO)
        await wait("agent/assistant/wait/context", assistant["assistant_id"], HELLO,
                   context={"system_prompt": "Merged prompt here."})
    thread = await client.threads.create()
    if thread:
        await rec.call(
            "agent/stream",
            lambda: collect_stream(
                client.runs.stream(thread["thread_id"], "agent", input=WEATHER, context=LARGE,
                                   stream_mode=["values", "updates", "messages-tuple"])
            ),
        )
        await rec.call("agent/stream/get_state",
                       lambda: client.threads.get_state(thread["thread_id"]))
        await rec.call("agent/stream/history/metadata",
                       lambda: client.threads.get_history(thread["thread_id"], metadata={"source": "input"}))
        await rec.call("agent/stream/history/limit",
                       lambda: client.threads.get_history(thread["thread_id"], limit=2))
        await rec.call(
            "agent/stream/second-turn",
            lambda: client.runs.wait(thread["thread_id"], "agent", input=HELLO, context=LARGE),
        )
    await rec.call(
        "agent/stateless/wait",
        lambda: client.runs.wait(None, "agent", input=HELLO, context=LARGE),
    )
    await rec.call(
        "agent/stateless/stream",
        lambda: collect_stream(client.runs.stream(None, "agent", input=HELLO, stream_mode="updates")),
    )
    await rec.call("agent/schemas", lambda: client.assistants.get_schemas(ids.get("agent", "agent")))

    # The module path (`react_agent.graph:graph`): the same graph.
    await wait("module/wait/context", "module", WEATHER, context=LARGE)

    # The memory template: a memory kept in the store for a user, recalled in another thread.
    await wait("memory/remember", "memory", {"messages": [{"role": "user", "content": "Remember: I like green tea"}]},
               context={"user_id": "u1"})
    await wait("memory/recall", "memory", HELLO, context={"user_id": "u1"})
    await wait("memory/other-user", "memory", HELLO, context={"user_id": "u2"})
    items = await rec.call("memory/store.search_items", lambda: client.store.search_items(["memories", "u1"]))
    if isinstance(items, dict):
        rec.raw["memory/store.search_items"] = sorted(
            (i["value"] for i in items.get("items", [])), key=lambda v: json.dumps(v, sort_keys=True)
        )

    # LangChain's prebuilt agent, its model named "openai:...".
    await wait("prebuilt/wait", "prebuilt", WEATHER)
    await wait("prebuilt/wait/context", "prebuilt", HELLO, context={"city": "Lyon"})

    # An async context-manager factory taking the ServerRuntime.
    await wait("factory/wait/default", "factory", HELLO)
    await wait("factory/wait/context", "factory", HELLO, context={"greeting": "hola"})
    # Request headers into the run's config, as the project's `http.configurable_headers` says.
    tiered = get_client(url=url, headers={**headers, "x-user-tier": "gold", "x-user-secret": "s3cret"})
    thread = await tiered.threads.create()
    answer = await rec.call(
        "factory/wait/headers", lambda: tiered.runs.wait(thread["thread_id"], "factory", input=HELLO)
    )
    rec.raw["factory/wait/headers/answer"] = last_message(answer)
    await rec.call("factory/schemas", lambda: client.assistants.get_schemas(ids.get("factory", "factory")))
    await rec.call("factory/graph", lambda: client.assistants.get_graph(ids.get("factory", "factory")))
    await rec.call("mcp", lambda: mcp_calls(url, headers, rec))
    return {key: norm.normalize(value) for key, value in rec.raw.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    headers = dict(h.split(": ", 1) for h in args.header)
    answers = asyncio.run(run(args.url, headers))
    Path(args.out).write_text(json.dumps(answers, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
