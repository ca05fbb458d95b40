"""Drive a server serving this project (its custom auth in auth.py) with the official SDK as three
users and as strangers without a token, and record every answer with ids and times masked.

    python drive.py --url http://127.0.0.1:2024 --out answers.json

A2A (`/a2a/{assistant_id}`, raw JSON-RPC) is driven too: Alice's task on her own assistant, Bob's
and a stranger's reach into it.

A refused call is recorded as {"error": {"status", "detail"}}: the detail only where the project's
own handler wrote it (the servers word their own 404s differently).
"""

import argparse
import ast
import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
from langgraph_sdk import get_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from compare import Normalizer  # noqa: E402

BOB = {"Authorization": "Bearer user2-token"}

# Details the project's handlers write, which both servers must pass on as they are.
HANDLER_DETAILS = ("Missing token", "Invalid token", "Writers only", "Only Alice deletes threads")


def refusal(exc: Exception) -> dict:
    if not isinstance(exc, httpx.HTTPStatusError):
        return {"error": {"status": None, "detail": f"{type(exc).__name__}"}}
    try:
        detail = exc.response.json().get("detail")
    except Exception:  # noqa: BLE001 - a body that is not JSON
        detail = None
    shown = detail if detail in HANDLER_DETAILS else None
    return {"error": {"status": exc.response.status_code, "detail": shown}}


def view(result: Any) -> Any:
    """What a user reads of an answer: a thread's metadata and status, a run's status, a state's
    values and next nodes (the rest is each server's bookkeeping)."""
    if isinstance(result, list):
        return [view(item) for item in result]
    if isinstance(result, dict) and "thread_id" in result and "metadata" in result:
        return {"metadata": result["metadata"], "status": result.get("status")}
    if isinstance(result, dict) and "run_id" in result:
        return {"status": result.get("status")}
    if isinstance(result, dict) and "checkpoint" in result and "values" in result:
        return {"values": result["values"], "next": result["next"]}
    return result


async def events(stream: Any) -> list:
    """A stream's events, read to its end (a refused stream raises on its first read)."""
    return [part.event async for part in stream]


class Run:
    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: dict[str, Any] = {}
        self.clients = {
            name: get_client(url=url, api_key=None, headers={"Authorization": f"Bearer {token}"})
            for name, token in (("alice", "user1-token"), ("bob", "user2-token"), ("rita", "reader-token"))
        }

    async def record(self, key: str, call: Any) -> Any:
        """`call()`'s answer, recorded; a 503 (a graph not described yet) is asked again, as a
        client does, for up to a minute."""
        for _ in range(120):
            try:
                result = await call()
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code == 503:
                    await asyncio.sleep(0.5)
                    continue
                self.answers[key] = refusal(exc)
                return None
            except Exception as exc:  # noqa: BLE001 - recorded, the sequence goes on
                self.answers[key] = refusal(exc)
                return None
            self.answers[key] = view(result)
            return result
        self.answers[key] = {"error": {"status": 503, "detail": None}}
        return None

    async def raw(self, key: str, method: str, path: str, headers: dict[str, str]) -> None:
        """A request outside the SDK (no token, a malformed one, a thread's stream)."""
        async with httpx.AsyncClient(base_url=self.url) as http:
            body = {} if method != "GET" else None
            response = await http.request(method, path, headers=headers, json=body)
        try:
            detail = response.json().get("detail")
        except Exception:  # noqa: BLE001
            detail = None
        self.answers[key] = {"status": response.status_code,
                             "detail": detail if detail in HANDLER_DETAILS else None}

    async def route(self, key: str, method: str, path: str, token: str | None, body: Any = None) -> None:
        """A request to one of the project's own routes (`http.app`): its status and body."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(base_url=self.url) as http:
            response = await http.request(method, path, headers=headers, json=body)
        try:
            content: Any = response.json()
        except Exception:  # noqa: BLE001 - not JSON: the text (a stream's events)
            content = response.text
        if response.status_code >= 400:
            content = content.get("detail") if isinstance(content, dict) else None
            content = content if content in HANDLER_DETAILS else None
        self.answers[key] = {"status": response.status_code, "body": content,
                             "type": response.headers.get("content-type", "").split(";")[0]}

    async def a2a(self, alice_token: str, bob_token: str) -> None:
        """A2A under the project's handlers: Alice's task, Bob's reach into it, a stranger's card."""
        # Her own assistant: the graphs' own are not hers to see under these handlers.
        mine = await self.record("a2a/alice/assistants.create",
                                 lambda: self.clients["alice"].assistants.create("agent", name="a2a", metadata={"kind": "a2a"}))
        if not mine:
            return
        agent = mine["assistant_id"]

        async def rpc(token: str | None, method: str, params: dict) -> Any:
            headers = {"Accept": "application/json"}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            async with httpx.AsyncClient(base_url=self.url, timeout=60) as http:
                response = await http.post(f"/a2a/{agent}", json=body, headers=headers)
            answer = response.json() if response.content else None
            if response.status_code != 200 or not isinstance(answer, dict):
                detail = answer.get("detail") if isinstance(answer, dict) else None
                return {"status": response.status_code, "detail": detail if detail in HANDLER_DETAILS else None}
            return answer

        def message(**ids: str) -> dict:
            return {"message": {"role": "user", "messageId": str(uuid.uuid4()),
                                "parts": [{"kind": "data", "data": {"asked": []}}], **ids}}

        sent = await rpc(alice_token, "message/send", message())
        task = sent.get("result") or {}
        # The answer is Python's `repr` of the final state: read back (mostrador writes a state's
        # keys in sorted order, the same values; docs/wire-protocol.md).
        self.answers["a2a/alice/message/send"] = {
            "state": (task.get("status") or {}).get("state"),
            "answer": [ast.literal_eval(p["text"]) for a in task.get("artifacts") or []
                       for p in a.get("parts") or [] if p.get("text")],
            "error": sent.get("error"),
        }
        if not task.get("id"):
            return
        task_id, context_id = task["id"], task["contextId"]
        for key, token, method, params in (
            ("a2a/alice/tasks/get", alice_token, "tasks/get", {"id": task_id}),
            ("a2a/bob/tasks/get", bob_token, "tasks/get", {"id": task_id}),
            ("a2a/bob/tasks/cancel", bob_token, "tasks/cancel", {"id": task_id}),
            ("a2a/bob/message/send(her task)", bob_token, "message/send",
             message(taskId=task_id, contextId=context_id)),
            ("a2a/bob/message/send(her conversation)", bob_token, "message/send", message(contextId=context_id)),
            ("a2a/anonymous/tasks/get", None, "tasks/get", {"id": task_id}),
        ):
            answer = await rpc(token, method, params)
            result = answer.get("result") if isinstance(answer, dict) else None
            self.answers[key] = (
                {"state": result["status"]["state"]} if isinstance(result, dict) and "status" in result
                else {"error": answer.get("error")} if isinstance(answer, dict) and "error" in answer
                else answer
            )
        async with httpx.AsyncClient(base_url=self.url) as http:
            card = await http.get(f"/a2a/{agent}/.well-known/agent-card.json")
        self.answers["a2a/anonymous/card"] = {"status": card.status_code}

    async def thread_stream(self) -> None:
        """The thread-centric stream protocol under the project's handlers: Alice's run on her
        thread and its events; Bob's commands and stream on it, a reader's and a stranger's."""
        from thread_stream import read
        from langgraph_sdk.stream.transport import ProtocolSseTransport

        # With metadata: created without, the official handler's stamp is lost (as for assistants).
        thread = await self.record("stream/alice/threads.create",
                                   lambda: self.clients["alice"].threads.create(metadata={"kind": "stream"}))
        if not thread:
            return
        tid = thread["thread_id"]

        async def command(token: str | None, method: str, params: dict, thread_id: str = tid) -> Any:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            async with httpx.AsyncClient(base_url=self.url, timeout=60) as http:
                response = await http.post(
                    f"/threads/{thread_id}/commands", json={"id": 1, "method": method, "params": params}, headers=headers
                )
            answer = response.json()
            if response.status_code != 200:
                detail = answer.get("detail") if isinstance(answer, dict) else None
                return {"status": response.status_code, "detail": detail if detail in HANDLER_DETAILS else None}
            # The run's id is the server's; a refusal's message is the api's status and detail.
            return {key: value for key, value in answer.items() if key not in ("result", "message", "id")}

        async def events(token: str, timeout: float) -> list:
            async with httpx.AsyncClient(base_url=self.url, headers={"Authorization": f"Bearer {token}"}) as http:
                wire = ProtocolSseTransport(client=http, thread_id=tid)
                try:
                    found = await read(wire, {"channels": ["lifecycle", "values"]}, timeout=timeout)
                except httpx.HTTPStatusError as exc:
                    return [{"status": exc.response.status_code}]
                finally:
                    await wire.close()
            # Quiet or ended: nothing read either way (the servers differ on which, see
            # docs/wire-protocol.md).
            return [event for event in found if "timeout" not in event]

        self.answers["stream/alice/run.start"] = await command("user1-token", "run.start",
                                                               {"assistant_id": "agent", "input": {"asked": []}})
        self.answers["stream/alice/events"] = await events("user1-token", 30)
        self.answers["stream/bob/run.start"] = await command("user2-token", "run.start", {"assistant_id": "agent", "input": {}})
        self.answers["stream/bob/input.respond"] = await command(
            "user2-token", "input.respond", {"interrupt_id": "x", "namespace": [], "response": 1})
        self.answers["stream/bob/events"] = await events("user2-token", 2)
        self.answers["stream/rita/run.start"] = await command("reader-token", "run.start", {"assistant_id": "agent"})
        self.answers["stream/anonymous/run.start"] = await command(None, "run.start", {"assistant_id": "agent"})
        async with httpx.AsyncClient(base_url=self.url) as http:
            refused = await http.post(f"/threads/{tid}/stream/events", json={"channels": ["values"]})
        self.answers["stream/anonymous/events"] = {"status": refused.status_code}
        await self.record("stream/alice/threads.get_state", lambda: self.clients["alice"].threads.get_state(tid))

    async def scenarios(self) -> dict[str, Any]:
        alice, bob, rita = self.clients["alice"], self.clients["bob"], self.clients["rita"]
        async with httpx.AsyncClient(base_url=self.url) as http:
            doc = (await http.get("/openapi.json")).json()
        self.answers["openapi/security"] = {
            "schemes": doc.get("components", {}).get("securitySchemes"),
            "default": doc.get("security"),
            "search": doc["paths"]["/threads/search"]["post"].get("security"),
            "create": doc["paths"]["/threads"]["post"].get("security"),
        }
        await self.route("app/hello", "GET", "/hello?x=1", "user1-token")
        await self.route("app/hello/anonymous", "GET", "/hello", None)
        await self.route("app/me/alice", "GET", "/me", "user1-token")
        await self.route("app/me/bob", "GET", "/me", "user2-token")
        await self.route("app/echo", "POST", "/echo", "user1-token", {"a": [1, 2]})
        await self.route("app/echo/get", "GET", "/echo", "user1-token")
        await self.route("app/item", "GET", "/items/7", "user1-token")
        await self.route("app/item/not-int", "GET", "/items/x", "user1-token")
        await self.route("app/count", "GET", "/count", "user1-token")
        async with httpx.AsyncClient(base_url=self.url) as http:
            doc = (await http.get("/openapi.json")).json()
            docs = await http.get("/docs", follow_redirects=True)
        # The app's paths join the server's document; the server's own /docs and /openapi.json
        # stay its own (a FastAPI app has routes of its own at both).
        self.answers["openapi/app-paths"] = {
            path: sorted(doc["paths"].get(path, {})) for path in ("/hello", "/echo", "/items/{item_id}")
        }
        self.answers["openapi/threads-path"] = sorted(doc["paths"].get("/threads", {}))
        self.answers["docs/status"] = docs.status_code
        await self.raw("anonymous/threads.create", "POST", "/threads", {})
        await self.raw("forged/threads.create", "POST", "/threads", {"Authorization": "Bearer forged"})
        await self.raw("anonymous/threads.search", "POST", "/threads/search", {})

        thread = await self.record("alice/threads.create", lambda: alice.threads.create(metadata={"topic": "tea"}))
        tid = thread["thread_id"]
        await self.record("alice/threads.get", lambda: alice.threads.get(tid))
        await self.record("bob/threads.get", lambda: bob.threads.get(tid))
        await self.record("rita/threads.create", lambda: rita.threads.create())
        await self.record("bob/threads.create", lambda: bob.threads.create(metadata={"topic": "coffee"}))
        await self.record("alice/threads.search", lambda: alice.threads.search(metadata={"topic": "tea"}))
        await self.record("bob/threads.search", lambda: bob.threads.search())
        await self.record("bob/threads.search/tea", lambda: bob.threads.search(metadata={"topic": "tea"}))
        await self.record("alice/threads.count", lambda: alice.threads.count())
        await self.record("bob/threads.count", lambda: bob.threads.count())
        await self.record("bob/threads.update", lambda: bob.threads.update(tid, metadata={"topic": "mine"}))
        await self.record("alice/threads.update", lambda: alice.threads.update(tid, metadata={"color": "green"}))

        await self.record("alice/runs.wait", lambda: alice.runs.wait(tid, "agent", input={}))
        await self.record("bob/runs.wait", lambda: bob.runs.wait(tid, "agent", input={}))
        await self.record("rita/runs.wait/stateless", lambda: rita.runs.wait(None, "agent", input={}))
        await self.record("alice/runs.wait/stateless", lambda: alice.runs.wait(None, "agent", input={}))
        await self.record("bob/runs.list", lambda: bob.runs.list(tid))
        runs = await self.record("alice/runs.list", lambda: alice.runs.list(tid))
        if runs:
            run_id = runs[0]["run_id"]
            await self.record("bob/runs.get", lambda: bob.runs.get(tid, run_id))
            await self.record("bob/runs.join", lambda: bob.runs.join(tid, run_id))
            await self.record("alice/runs.join", lambda: alice.runs.join(tid, run_id))
            await self.record("bob/runs.cancel", lambda: bob.runs.cancel(tid, run_id))
            await self.record("bob/runs.join_stream", lambda: events(bob.runs.join_stream(tid, run_id)))
        await self.raw("bob/threads/stream", "GET", f"/threads/{tid}/stream", BOB)
        await self.record("bob/threads.get_state", lambda: bob.threads.get_state(tid))
        await self.record("alice/threads.get_state", lambda: alice.threads.get_state(tid))
        await self.record("bob/threads.get_history", lambda: bob.threads.get_history(tid))
        await self.record("bob/threads.update_state", lambda: bob.threads.update_state(tid, {"asked": []}))
        await self.record("bob/threads.copy", lambda: bob.threads.copy(tid))

        # A run that creates its thread: the thread is its creator's (stamped through the run).
        created = str(uuid.uuid4())
        await self.record("alice/runs.wait/new-thread", lambda: alice.runs.wait(created, "agent", input={}, if_not_exists="create"))
        await self.record("alice/threads.get/new-thread", lambda: alice.threads.get(created))
        await self.record("bob/threads.get/new-thread", lambda: bob.threads.get(created))

        # Assistants, crons and the store, under their handlers.
        await self.record("alice/assistants.search/graphs", lambda: alice.assistants.search(graph_id="agent"))
        mine = await self.record("alice/assistants.create",
                                 lambda: alice.assistants.create("agent", name="tea", metadata={"kind": "tea"}))
        if mine:
            aid = mine["assistant_id"]
            await self.record("alice/assistants.get", lambda: alice.assistants.get(aid))
            await self.record("bob/assistants.get", lambda: bob.assistants.get(aid))
            await self.record("alice/assistants.search", lambda: alice.assistants.search())
            await self.record("bob/assistants.search", lambda: bob.assistants.search())
            await self.record("bob/assistants.update", lambda: bob.assistants.update(aid, name="mine"))
            await self.record("alice/assistants.update",
                              lambda: alice.assistants.update(aid, metadata={"kind": "green tea"}))
            await self.record("bob/runs.wait/assistant", lambda: bob.runs.wait(None, aid, input={}))
            await self.record("bob/assistants.delete", lambda: bob.assistants.delete(aid))
            await self.record("alice/assistants.delete", lambda: alice.assistants.delete(aid))
        cron = await self.record("alice/crons.create",
                                 lambda: alice.crons.create("agent", schedule="0 0 1 1 *", input={},
                                                            metadata={"kind": "yearly"}))
        await self.record("alice/crons.search", lambda: alice.crons.search())
        await self.record("bob/crons.search", lambda: bob.crons.search())
        await self.record("bob/crons.count", lambda: bob.crons.count())
        if cron:
            await self.record("bob/crons.delete", lambda: bob.crons.delete(cron["cron_id"]))
            await self.record("alice/crons.delete", lambda: alice.crons.delete(cron["cron_id"]))
        await self.record("alice/store.put", lambda: alice.store.put_item(["notes"], "tea", {"likes": "green"}))
        await self.record("alice/store.get", lambda: alice.store.get_item(["notes"], "tea"))
        await self.record("bob/store.get", lambda: bob.store.get_item(["notes"], "tea"))
        await self.record("alice/store.search", lambda: alice.store.search_items(["notes"]))
        await self.record("bob/store.search", lambda: bob.store.search_items(["notes"]))
        await self.record("alice/store.namespaces", lambda: alice.store.list_namespaces())
        await self.record("bob/store.delete", lambda: bob.store.delete_item(["notes"], "tea"))
        await self.record("alice/store.get/after-bob", lambda: alice.store.get_item(["notes"], "tea"))

        await self.a2a(alice_token="user1-token", bob_token="user2-token")
        await self.thread_stream()

        await self.record("bob/threads.delete", lambda: bob.threads.delete(tid))
        await self.record("alice/threads.delete", lambda: alice.threads.delete(tid))
        await self.record("alice/threads.get/deleted", lambda: alice.threads.get(tid))
        return self.answers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    answers = asyncio.run(Run(args.url).scenarios())
    Path(args.out).write_text(json.dumps(Normalizer(args.url).normalize(answers), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
