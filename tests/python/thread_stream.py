"""The thread-centric stream protocol (`client.threads.stream`, `langgraph-sdk` 0.4) through the
SDK's own classes: its SSE transport (`ProtocolSseTransport`: commands, filtered streams,
`since`) and its thread stream (`thread.output`, `thread.values`, interrupts and `respond`).

compare.py calls `thread_stream_calls` for each server; each answer is recorded as the client
reads it, events as `(seq, method, namespace, data)` with their `event_id`'s form, and compare.py
masks ids. Timestamps are dropped here.
"""

import asyncio
from typing import Any
from uuid import uuid4

import httpx

ALL = ["values", "updates", "messages", "tools", "custom", "lifecycle", "input", "tasks", "checkpoints"]

INPUTS: dict[str, Any] = {
    "linear6": {"path": ["start"]},
    "parent": {"value": "x"},
    "nested": {"value": "x"},
    "agent": {"messages": [{"role": "user", "content": "What is the weather in Lima?"}]},
    "approval": {"request": "buy"},
    "mapreduce": {"items": ["b", "A", "c"]},
    "custom": {"steps": 3},
    "fork": {"topic": "tea"},
}

RESUME = {"action": "approve", "comment": "ok"}


def id_form(event_id: str) -> str:
    """What an `event_id` is, not its value: a synthesized one keeps its kind and status."""
    if event_id.startswith("synth:"):
        _, _, rest = event_id.partition(":")
        _, _, rest = rest.partition(":")
        kind, _, rest = rest.partition("|")
        if kind == "lc":
            return "synth:lc:" + rest.rpartition("|")[2]
        return "synth:" + kind
    return "stored"


def shown(event: dict) -> dict:
    params = event["params"]
    shown = {
        "seq": event["seq"],
        "method": event["method"],
        "namespace": params["namespace"],
        "data": params["data"],
        "event_id": id_form(event["event_id"]),
    }
    if "node" in params:
        shown["node"] = params["node"]
    return shown


def terminal(event: dict) -> bool:
    """The root's end of a run: completed or failed, or interrupted."""
    return (
        event["method"] == "lifecycle"
        and not event["params"]["namespace"]
        and event["params"]["data"].get("event") in ("completed", "failed", "interrupted")
    )


async def read(transport: Any, params: dict, ends: int = 1, timeout: float = 30) -> list[dict]:
    """A stream's events until `ends` runs have ended at the root (or it goes quiet)."""
    handle = transport.open_event_stream(params)
    events: list[dict] = []
    try:
        await asyncio.wait_for(handle.ready, timeout)

        async def collect() -> None:
            left = ends
            async for event in handle.events:
                events.append(shown(event))
                if terminal(event):
                    left -= 1
                    if left == 0:
                        return

        try:
            await asyncio.wait_for(collect(), timeout)
        except asyncio.TimeoutError:
            events.append({"timeout": True})
    finally:
        await handle.close()
    return events


async def thread_stream_calls(url: str, headers: dict[str, str], rec: Any) -> None:
    from langgraph_sdk import get_client
    from langgraph_sdk.stream.transport import ProtocolSseTransport

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:

        def transport(thread_id: str) -> Any:
            return ProtocolSseTransport(client=http, thread_id=thread_id)

        async def command(thread_id: str, method: str, params: dict, id: int = 1) -> Any:
            answer = await http.post(
                f"/threads/{thread_id}/commands", json={"id": id, "method": method, "params": params}
            )
            return {"status": answer.status_code, "body": answer.json()}

        # Each graph: a stream opened first, on every channel, then `run.start`.
        for graph in ("linear6", "parent", "agent", "approval", "nested", "mapreduce", "custom", "fork"):
            thread_id = str(uuid4())
            wire = transport(thread_id)
            reading = asyncio.create_task(read(wire, {"channels": ALL}))
            await asyncio.sleep(0.3)
            started = await command(thread_id, "run.start", {"assistant_id": graph, "input": INPUTS[graph]})
            rec.raw[f"thread_stream/{graph}/run.start"] = started
            events = await reading
            rec.raw[f"thread_stream/{graph}/events"] = events
            # Replayed: the same events, the same seqs, for every filter.
            rec.raw[f"thread_stream/{graph}/replay(since=3)"] = await read(wire, {"channels": ALL, "since": 3})
            rec.raw[f"thread_stream/{graph}/replay(lifecycle,input)"] = await read(
                wire, {"channels": ["lifecycle", "input"]}
            )
            rec.raw[f"thread_stream/{graph}/replay(values,root)"] = await read(
                wire, {"channels": ["values", "lifecycle"], "namespaces": [[]], "depth": 0}
            )
            if graph == "parent":
                rec.raw[f"thread_stream/{graph}/replay(child)"] = await read(
                    wire, {"channels": ALL, "namespaces": [["child"]]}, timeout=3
                )
            if graph in ("approval", "nested", "fork"):
                asked = [e for e in events if e.get("method") == "input.requested"]
                interrupt_id = asked[0]["data"]["interrupt_id"] if asked else "none"
                rec.raw[f"thread_stream/{graph}/input.respond(unknown)"] = await command(
                    thread_id, "input.respond", {"interrupt_id": "nope", "namespace": [], "response": 1}, id=2
                )
                reading = asyncio.create_task(read(wire, {"channels": ALL, "since": len(events)}))
                await asyncio.sleep(0.3)
                answer = {"interrupt_id": interrupt_id, "namespace": asked[0]["namespace"] if asked else [], "response": RESUME}
                # The fork's answer in the form that answers several interrupts at once.
                params = {"responses": [answer]} if graph == "fork" else answer
                rec.raw[f"thread_stream/{graph}/input.respond"] = await command(
                    thread_id, "input.respond", params, id=3
                )
                rec.raw[f"thread_stream/{graph}/events(resumed)"] = await reading
            await wire.close()

        # A failing run: its root ends `failed` with the error.
        thread_id = str(uuid4())
        wire = transport(thread_id)
        reading = asyncio.create_task(read(wire, {"channels": ["lifecycle", "input"]}))
        await asyncio.sleep(0.3)
        await command(thread_id, "run.start", {"assistant_id": "approval", "input": {}})
        rec.raw["thread_stream/failed/events"] = await reading
        await wire.close()

        # What the protocol refuses.
        thread_id = str(uuid4())
        for label, body in [
            ("not json", b"{"),
            ("no method", b'{"id": 1}'),
            ("string id", b'{"id": "1", "method": "run.start"}'),
        ]:
            answer = await http.post(
                f"/threads/{thread_id}/commands", content=body, headers={"content-type": "application/json"}
            )
            rec.raw[f"thread_stream/refused/{label}"] = {"status": answer.status_code, "body": answer.json()}
        for label, method, params in [
            ("unknown method", "state.get", {}),
            ("subscribe without channels", "subscription.subscribe", {}),
            ("subscribe bad channel", "subscription.subscribe", {"channels": ["debug"]}),
            ("unsubscribe without id", "subscription.unsubscribe", {}),
            ("unsubscribe unknown", "subscription.unsubscribe", {"subscription_id": "nope"}),
            ("reconnect", "subscription.reconnect", {"channels": ["values"], "since": 0}),
            ("agent tree", "agent.getTree", {}),
            ("no assistant", "run.start", {}),
            ("empty checkpoint", "run.start", {"assistant_id": "linear6", "config": {"configurable": {"checkpoint_id": ""}}}),
            ("bad checkpoint", "run.start", {"assistant_id": "linear6", "config": {"configurable": {"checkpoint_id": "x"}}}),
            ("unknown assistant", "run.start", {"assistant_id": "nope", "input": {}}),
            ("respond without id", "input.respond", {"response": 1}),
            ("respond bad namespace", "input.respond", {"interrupt_id": "a", "namespace": "x"}),
            ("respond empty responses", "input.respond", {"responses": []}),
            ("respond no thread", "input.respond", {"interrupt_id": "a", "namespace": [], "response": 1}),
        ]:
            answer = await command(thread_id, method, params)
            body = answer["body"]
            if isinstance(body.get("message"), str) and "registered graphs" in body["message"]:
                # The official message lists the graphs; only its start is compared.
                body["message"] = body["message"].split("\n")[0]
            rec.raw[f"thread_stream/refused/{label}"] = answer
        # Subscribed by a command alone: a subscription nothing uses, as officially.
        subscribed = await command(thread_id, "subscription.subscribe", {"channels": ["values", "custom:x"]})
        rec.raw["thread_stream/subscription.subscribe"] = subscribed
        for label, body in [
            ("stream not json", b"{"),
            ("stream no channels", b"{}"),
            ("stream bad channels", b'{"channels": ["debug", 3, "custom:", null]}'),
        ]:
            answer = await http.post(
                f"/threads/{thread_id}/stream/events", content=body, headers={"content-type": "application/json"}
            )
            rec.raw[f"thread_stream/refused/{label}"] = {"status": answer.status_code, "body": answer.json()}

    await socket_calls(url, headers, rec)

    # The SDK's own thread stream: a run's output, its states, an interrupt answered.
    client = get_client(url=url, headers=headers)
    async with client.threads.stream(assistant_id="linear6") as thread:
        await thread.run.start(input=INPUTS["linear6"])
        rec.raw["thread_stream/sdk/linear6/output"] = await asyncio.wait_for(thread.output, 30)
    # One projection per thread stream: two read at once race in the SDK (0.4.14), which closes
    # the stream the first opened when the second's answers first, and then waits on it forever
    # (docs/wire-protocol.md).
    async with client.threads.stream(assistant_id="agent") as thread:
        await thread.run.start(input=INPUTS["agent"])

        async def states() -> list:
            return [state async for state in thread.values]

        seen = await asyncio.wait_for(states(), 30)
        rec.raw["thread_stream/sdk/agent/values"] = {"count": len(seen), "last": seen[-1] if seen else None}
    async with client.threads.stream(assistant_id="agent") as thread:
        await thread.run.start(input=INPUTS["agent"])

        async def messages() -> list:
            return [message async for message in thread.messages]

        said = await asyncio.wait_for(messages(), 30)
        finals = [await message for message in said]
        rec.raw["thread_stream/sdk/agent/messages"] = [
            {"content": final.content, "tool_calls": final.tool_calls} for final in finals
        ]
    async with client.threads.stream(assistant_id="approval") as thread:
        await thread.run.start(input=INPUTS["approval"])
        for _ in range(300):
            if thread.interrupted:
                break
            await asyncio.sleep(0.1)
        rec.raw["thread_stream/sdk/approval/interrupted"] = thread.interrupted
        rec.raw["thread_stream/sdk/approval/interrupts"] = [
            {key: value for key, value in interrupt.items() if key != "interrupt_id"} for interrupt in thread.interrupts
        ]
        await thread.run.respond(RESUME)
        rec.raw["thread_stream/sdk/approval/output"] = await asyncio.wait_for(thread.output, 30)
    # The same over the SDK's WebSocket transport, whose handshake carries only the headers the
    # thread stream is given.
    async with client.threads.stream(assistant_id="linear6", transport="websocket", headers=headers) as thread:
        await thread.run.start(input=INPUTS["linear6"])
        rec.raw["thread_stream/sdk/websocket/linear6/output"] = await asyncio.wait_for(thread.output, 30)
    async with client.threads.stream(assistant_id="approval", transport="websocket", headers=headers) as thread:
        await thread.run.start(input=INPUTS["approval"])
        for _ in range(300):
            if thread.interrupted:
                break
            await asyncio.sleep(0.1)
        rec.raw["thread_stream/sdk/websocket/approval/interrupted"] = thread.interrupted
        await thread.run.respond(RESUME)
        rec.raw["thread_stream/sdk/websocket/approval/output"] = await asyncio.wait_for(thread.output, 30)


async def socket_calls(url: str, headers: dict[str, str], rec: Any) -> None:
    """The WebSocket on `/threads/{thread_id}/stream/events`, frame by frame: what it refuses, a
    subscription, a run started over it and its events, an unsubscription."""
    import json

    from websockets.asyncio.client import connect

    thread_id = str(uuid4())
    address = url.replace("http://", "ws://", 1) + f"/threads/{thread_id}/stream/events"
    async with connect(address, additional_headers=headers) as socket:

        async def ask(frame: str) -> dict:
            await socket.send(frame)
            return json.loads(await asyncio.wait_for(socket.recv(), 30))

        for label, frame in [
            ("not json", "not json"),
            ("string id", json.dumps({"id": "1", "method": "run.start"})),
            ("subscribe without channels", json.dumps({"id": 1, "method": "subscription.subscribe", "params": {}})),
            ("unsubscribe unknown", json.dumps({"id": 2, "method": "subscription.unsubscribe", "params": {"subscription_id": "nope"}})),
            ("tree before a run", json.dumps({"id": 3, "method": "agent.getTree", "params": {}})),
        ]:
            rec.raw[f"thread_stream/socket/{label}"] = await ask(frame)
        subscribed = await ask(
            json.dumps({"id": 4, "method": "subscription.subscribe", "params": {"channels": ["lifecycle", "values", "input"]}})
        )
        rec.raw["thread_stream/socket/subscribe"] = subscribed
        started = await ask(
            json.dumps({"id": 5, "method": "run.start", "params": {"assistant_id": "linear6", "input": INPUTS["linear6"]}})
        )
        rec.raw["thread_stream/socket/run.start"] = started
        events = []
        while True:
            frame = json.loads(await asyncio.wait_for(socket.recv(), 30))
            events.append(shown(frame))
            if terminal(frame):
                break
        rec.raw["thread_stream/socket/events"] = events
        subscription = (subscribed.get("result") or {}).get("subscription_id", "none")
        rec.raw["thread_stream/socket/unsubscribe"] = await ask(
            json.dumps({"id": 6, "method": "subscription.unsubscribe", "params": {"subscription_id": subscription}})
        )

