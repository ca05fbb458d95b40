"""Drive a server serving this project (its custom auth in auth.py) with the official SDK as three
users and as strangers without a token, and record every answer with ids and times masked.

    python drive.py --url http://127.0.0.1:2024 --out answers.json

A refused call is recorded as {"error": {"status", "detail"}}: the detail only where the project's
own handler wrote it (the servers word their own 404s differently).
"""

import argparse
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


class Run:
    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: dict[str, Any] = {}
        self.clients = {
            name: get_client(url=url, api_key=None, headers={"Authorization": f"Bearer {token}"})
            for name, token in (("alice", "user1-token"), ("bob", "user2-token"), ("rita", "reader-token"))
        }

    async def record(self, key: str, call: Any) -> Any:
        try:
            result = await call
        except Exception as exc:  # noqa: BLE001 - recorded, the sequence goes on
            self.answers[key] = refusal(exc)
            return None
        self.answers[key] = view(result)
        return result

    async def raw(self, key: str, method: str, path: str, headers: dict[str, str]) -> None:
        """A request outside the SDK (no token, a malformed one)."""
        async with httpx.AsyncClient(base_url=self.url) as http:
            response = await http.request(method, path, headers=headers, json={})
        try:
            detail = response.json().get("detail")
        except Exception:  # noqa: BLE001
            detail = None
        self.answers[key] = {"status": response.status_code,
                             "detail": detail if detail in HANDLER_DETAILS else None}

    async def scenarios(self) -> dict[str, Any]:
        alice, bob, rita = self.clients["alice"], self.clients["bob"], self.clients["rita"]
        # Until the graph is described (mostrador's worker describes it once started).
        for _ in range(120):
            try:
                found = await alice.assistants.search(graph_id="agent")
                await alice.assistants.get_schemas(found[0]["assistant_id"])
                break
            except httpx.HTTPStatusError:
                await asyncio.sleep(0.5)
        await self.raw("anonymous/threads.create", "POST", "/threads", {})
        await self.raw("forged/threads.create", "POST", "/threads", {"Authorization": "Bearer forged"})
        await self.raw("anonymous/threads.search", "POST", "/threads/search", {})

        thread = await self.record("alice/threads.create", alice.threads.create(metadata={"topic": "tea"}))
        tid = thread["thread_id"]
        await self.record("alice/threads.get", alice.threads.get(tid))
        await self.record("bob/threads.get", bob.threads.get(tid))
        await self.record("rita/threads.create", rita.threads.create())
        await self.record("bob/threads.create", bob.threads.create(metadata={"topic": "coffee"}))
        await self.record("alice/threads.search", alice.threads.search(metadata={"topic": "tea"}))
        await self.record("bob/threads.search", bob.threads.search())
        await self.record("bob/threads.search/tea", bob.threads.search(metadata={"topic": "tea"}))
        await self.record("alice/threads.count", alice.threads.count())
        await self.record("bob/threads.count", bob.threads.count())
        await self.record("bob/threads.update", bob.threads.update(tid, metadata={"topic": "mine"}))
        await self.record("alice/threads.update", alice.threads.update(tid, metadata={"color": "green"}))

        await self.record("alice/runs.wait", alice.runs.wait(tid, "agent", input={}))
        await self.record("bob/runs.wait", bob.runs.wait(tid, "agent", input={}))
        await self.record("rita/runs.wait/stateless", rita.runs.wait(None, "agent", input={}))
        await self.record("alice/runs.wait/stateless", alice.runs.wait(None, "agent", input={}))
        await self.record("bob/runs.list", bob.runs.list(tid))
        runs = await self.record("alice/runs.list", alice.runs.list(tid))
        if runs:
            run_id = runs[0]["run_id"]
            await self.record("bob/runs.get", bob.runs.get(tid, run_id))
            await self.record("bob/runs.join", bob.runs.join(tid, run_id))
            await self.record("alice/runs.join", alice.runs.join(tid, run_id))
        await self.record("bob/threads.get_state", bob.threads.get_state(tid))
        await self.record("alice/threads.get_state", alice.threads.get_state(tid))
        await self.record("bob/threads.get_history", bob.threads.get_history(tid))
        await self.record("bob/threads.update_state", bob.threads.update_state(tid, {"asked": []}))
        await self.record("bob/threads.copy", bob.threads.copy(tid))

        # A run that creates its thread: the thread is its creator's (stamped through the run).
        created = str(uuid.uuid4())
        await self.record("alice/runs.wait/new-thread",
                          alice.runs.wait(created, "agent", input={}, if_not_exists="create"))
        await self.record("alice/threads.get/new-thread", alice.threads.get(created))
        await self.record("bob/threads.get/new-thread", bob.threads.get(created))

        await self.record("bob/threads.delete", bob.threads.delete(tid))
        await self.record("alice/threads.delete", alice.threads.delete(tid))
        await self.record("alice/threads.get/deleted", alice.threads.get(tid))
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
