"""Plain owners under the default authorization policy (owner-only), through the official SDK:
callers whose tokens name a subject (and perhaps a tenant and roles the policy gives nothing to)
each see their own threads only. Another caller, even one of the same tenant with a role, gets
the answer of a missing thread on every call, and finds nothing in searches. Exits 1 at the first
answer that differs.

    python owners.py --url http://127.0.0.1:8125 --olga TOKEN --luis TOKEN --boss TOKEN
"""

import argparse
import asyncio
import sys

import httpx
from langgraph_sdk import get_client


def check(what: str, got, expected) -> None:
    if got != expected:
        print(f"FAILED {what}\n  expected: {expected!r}\n  got:      {got!r}")
        sys.exit(1)
    print(f"ok     {what}")


async def status_of(call) -> int:
    try:
        await call
    except httpx.HTTPStatusError as err:
        return err.response.status_code
    return 200


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    for who in ("olga", "luis", "boss"):
        parser.add_argument(f"--{who}", required=True, help="a bearer token")
    args = parser.parse_args()

    def client(token: str):
        return get_client(url=args.url, api_key=None, headers={"Authorization": f"Bearer {token}"})

    olga, luis, boss = client(args.olga), client(args.luis), client(args.boss)
    thread = await olga.threads.create(metadata={"owner": "olga"})
    tid = thread["thread_id"]
    result = await olga.runs.wait(tid, "linear6", input={"path": []})
    check("the owner runs a graph on her thread", result, {"path": ["n1", "n2", "n3", "n4", "n5", "n6"]})
    runs = await olga.runs.list(tid)
    check("the owner lists her runs", len(runs), 1)
    check("the owner finds her thread", [t["thread_id"] for t in await olga.threads.search()], [tid])

    for name, other in (("another owner", luis), ("a manager of the same tenant", boss)):
        calls = {
            "threads.get": other.threads.get(tid),
            "threads.get_state": other.threads.get_state(tid),
            "threads.get_history": other.threads.get_history(tid),
            "threads.update": other.threads.update(tid, metadata={"seen": True}),
            "runs.list": other.runs.list(tid),
            "runs.get": other.runs.get(tid, runs[0]["run_id"]),
            "runs.create": other.runs.create(tid, "linear6", input={"path": []}),
            "threads.copy": other.threads.copy(tid),
            "threads.delete": other.threads.delete(tid),
        }
        for call, awaitable in calls.items():
            check(f"{name}: {call} answers as a missing thread", await status_of(awaitable), 404)
        check(f"{name}: threads.search finds nothing of hers", await other.threads.search(), [])
        check(f"{name}: threads.count counts nothing of hers", await other.threads.count(), 0)
        mine = await other.threads.create()
        found = [t["thread_id"] for t in await other.threads.search()]
        check(f"{name}: has threads of their own", found, [mine["thread_id"]])

    metadata = (await olga.threads.get(tid))["metadata"]
    check("the thread is as the owner left it", (metadata["owner"], "seen" in metadata), ("olga", False))
    check("the owner's run is still hers", len(await olga.runs.list(tid)), 1)


if __name__ == "__main__":
    asyncio.run(main())
