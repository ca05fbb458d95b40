"""A2A (`/a2a/{assistant_id}`) through the official A2A client (PyPI `a2a-sdk` 0.3), as another
agent reaches a LangGraph server: the agent card, a message sent and streamed to the tool-calling
agent, a data message that waits for a decision, its resume and its cancel, a task read and a
finished one refused a cancel; then what the protocol refuses, sent as raw JSON-RPC.

compare.py calls `a2a_calls` for each server with the same assistants; each answer is recorded as
the client reads it (`model_dump`), and compare.py masks ids and times.
"""

from typing import Any
from uuid import uuid4

import httpx


def dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True, by_alias=True)
    if isinstance(value, (list, tuple)):
        return [dump(item) for item in value]
    return value


def masked_card(card: dict[str, Any]) -> dict[str, Any]:
    """The card, without the server's own version."""
    return {key: value for key, value in card.items() if key != "version"}


async def a2a_calls(url: str, headers: dict[str, str], aid: dict[str, str], rec: Any) -> None:
    from a2a.client import ClientConfig, ClientFactory
    from a2a.client.errors import A2AClientJSONRPCError
    from a2a.types import DataPart, Message, Part, Role, TaskIdParams, TaskQueryParams, TextPart

    async with httpx.AsyncClient(headers=headers, timeout=60) as http:

        async def connect(graph: str, streaming: bool) -> Any:
            config = ClientConfig(httpx_client=http, streaming=streaming)
            return await ClientFactory.connect(f"{url}/a2a/{aid[graph]}", client_config=config)

        def message(*parts: Any, task: Any = None) -> Message:
            return Message(
                role=Role.user,
                message_id=str(uuid4()),
                parts=[Part(root=part) for part in parts],
                task_id=task.id if task else None,
                context_id=task.context_id if task else None,
            )

        async def send(client: Any, msg: Message) -> list[Any]:
            """Every event the client yields: a task (with its last update) or a message."""
            events = []
            async for event in client.send_message(msg):
                if isinstance(event, tuple):
                    task, update = event
                    events.append({"task": dump(task), "update": dump(update)})
                else:
                    events.append({"message": dump(event)})
            return events

        async def raw(body: Any, path: str | None = None, accept: str = "application/json") -> Any:
            response = await http.post(
                path or f"{url}/a2a/{aid['agent']}",
                content=body if isinstance(body, bytes) else None,
                json=None if isinstance(body, bytes) else body,
                headers={"Accept": accept},
            )
            return {"status": response.status_code, "body": response.json() if response.content else None}

        async def dumped(call: Any) -> Any:
            return dump(await call)

        async def error_of(call: Any) -> Any:
            try:
                return {"answered": dump(await call)}
            except A2AClientJSONRPCError as err:
                return {"code": err.error.code, "message": err.error.message}

        async def card() -> Any:
            response = await http.get(f"{url}/a2a/{aid['agent']}/.well-known/agent-card.json")
            response.raise_for_status()
            return masked_card(response.json())

        await rec.call("a2a/card", card)

        async def got(path: str) -> Any:
            response = await http.get(f"{url}{path}")
            body = response.json()
            return {"status": response.status_code, "body": masked_card(body) if response.is_success else body}

        await rec.call("a2a/card(root)", lambda: got(f"/.well-known/agent-card.json?assistant_id={aid['agent']}"))
        await rec.call("a2a/card(root, no assistant)", lambda: got("/.well-known/agent-card.json"))
        await rec.call("a2a/card(graph id)", lambda: got("/a2a/agent/.well-known/agent-card.json"))

        agent = await connect("agent", streaming=False)
        sent = await rec.call(
            "a2a/agent/message/send",
            lambda: send(agent, message(TextPart(text="What is the weather in Paris?"))),
        )
        task_id = sent[-1]["task"]["id"] if sent and "task" in sent[-1] else None
        if task_id:
            await rec.call(
                "a2a/agent/tasks/get", lambda: dumped(agent.get_task(TaskQueryParams(id=task_id)))
            )
            await rec.call(
                "a2a/agent/tasks/cancel(completed)",
                lambda: error_of(agent.cancel_task(TaskIdParams(id=task_id))),
            )
        await rec.call(
            "a2a/agent/tasks/get(unknown)",
            lambda: error_of(agent.get_task(TaskQueryParams(id=f"{uuid4()}:{uuid4()}"))),
        )

        streaming = await connect("agent", streaming=True)
        await rec.call(
            "a2a/agent/message/stream",
            lambda: send(streaming, message(TextPart(text="What is the weather in Lima?"))),
        )

        streaming_approval = await connect("approval", streaming=True)
        await rec.call(
            "a2a/approval/message/stream",
            lambda: send(streaming_approval, message(DataPart(data={"request": "deploy v4"}))),
        )

        approval = await connect("approval", streaming=False)
        waits = await rec.call(
            "a2a/approval/message/send",
            lambda: send(approval, message(DataPart(data={"request": "deploy v2"}))),
        )
        waiting = waits[-1]["task"] if waits and "task" in waits[-1] else None
        if waiting:
            task = await approval.get_task(TaskQueryParams(id=waiting["id"]))
            rec.raw["a2a/approval/tasks/get(waiting)"] = dump(task)
            await rec.call(
                "a2a/approval/message/send(resume)",
                lambda: send(
                    approval,
                    message(DataPart(data={"resume": {"action": "approve", "comment": "ok"}}), task=task),
                ),
            )
            await rec.call(
                "a2a/approval/tasks/get(resumed)",
                lambda: dumped(approval.get_task(TaskQueryParams(id=waiting["id"]))),
            )
            # ListTasks (v1 only): the conversation's one task, its resume folded in.
            await rec.call(
                "a2a/approval/ListTasks(context)",
                lambda: raw({
                    "jsonrpc": "2.0", "id": "l", "method": "ListTasks",
                    "params": {"contextId": waiting["contextId"], "historyLength": 0},
                }, path=f"{url}/a2a/{aid['approval']}"),
            )
        again = await rec.call(
            "a2a/approval/message/send(to cancel)",
            lambda: send(approval, message(DataPart(data={"request": "deploy v3"}))),
        )
        to_cancel = again[-1]["task"]["id"] if again and "task" in again[-1] else None
        if to_cancel:
            await rec.call(
                "a2a/approval/tasks/cancel(waiting)",
                lambda: dumped(approval.cancel_task(TaskIdParams(id=to_cancel))),
            )
            await rec.call(
                "a2a/approval/tasks/get(canceled)",
                lambda: dumped(approval.get_task(TaskQueryParams(id=to_cancel))),
            )
        await rec.call(
            "a2a/approval/message/send(text to a graph without messages)",
            lambda: error_of(send(approval, message(TextPart(text="hello")))),
        )

        await rec.call("a2a/raw/invalid json", lambda: raw(b"{not json"))
        await rec.call("a2a/raw/not an object", lambda: raw([1, 2]))
        await rec.call("a2a/raw/no jsonrpc", lambda: raw({"id": 1, "method": "tasks/get"}))
        await rec.call(
            "a2a/raw/unknown method",
            lambda: raw({"jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe", "params": {}}),
        )
        await rec.call(
            "a2a/raw/no id",
            lambda: raw({"jsonrpc": "2.0", "method": "tasks/get", "params": {"id": "x"}}),
        )
        await rec.call(
            "a2a/raw/a response",
            lambda: raw({"jsonrpc": "2.0", "id": 7, "result": {}}),
        )
        await rec.call(
            "a2a/raw/assistant id not a uuid",
            lambda: raw(
                {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}},
                path=f"{url}/a2a/agent",
            ),
        )
        await rec.call(
            "a2a/raw/send without a message",
            lambda: raw({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}),
        )
        await rec.call(
            "a2a/raw/send without parts",
            lambda: raw({
                "jsonrpc": "2.0", "id": 1, "method": "message/send",
                "params": {"message": {"role": "user", "messageId": "m", "parts": []}},
            }),
        )
        await rec.call(
            "a2a/raw/historyLength too long",
            lambda: raw({
                "jsonrpc": "2.0", "id": 1, "method": "message/send",
                "params": {
                    "message": {"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "x"}]},
                    "configuration": {"historyLength": 11},
                },
            }),
        )
        await rec.call(
            "a2a/raw/stream without text/event-stream",
            lambda: raw({
                "jsonrpc": "2.0", "id": 1, "method": "message/stream",
                "params": {"message": {"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "x"}]}},
            }),
        )
        await rec.call(
            "a2a/raw/v1 send",
            lambda: raw({
                "jsonrpc": "2.0", "id": "v1", "method": "SendMessage",
                "params": {"message": {"role": "ROLE_USER", "messageId": "m1",
                                       "parts": [{"text": "What is the weather in Oslo?"}]},
                           "configuration": {"historyLength": 1}},
            }),
        )
