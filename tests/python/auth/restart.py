"""The project's auth handler processes killed under load, twice: every answer meanwhile is the
handlers' own (the owner reads her thread, a stranger gets the 404, a request without a token the
401) or a 503 with `Retry-After`, never an answer the handlers did not give; and the handlers serve
again once started anew.

    python restart.py --url http://127.0.0.1:8123 --server-pid 1234
"""

import argparse
import asyncio
import os
import signal
import sys
import time

import httpx

ALICE = {"Authorization": "Bearer user1-token"}
BOB = {"Authorization": "Bearer user2-token"}


def auth_processes(server: int) -> list[int]:
    """The api's helper processes (`runner.py <langgraph.json> --api`: the auth handlers) under
    `server`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if b"--api" in argv and any(arg.endswith(b"runner.py") for arg in argv) and parent == server:
            found.append(int(pid))
    return found


async def main(url: str, server: int) -> int:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        thread = (await http.post("/threads", json={}, headers=ALICE)).json()["thread_id"]
        wanted = {"alice": 200, "bob": 404, "nobody": 401}
        headers = {"alice": ALICE, "bob": BOB, "nobody": {}}
        seen: dict[str, int] = {}
        wrong: list[str] = []
        stop = time.monotonic() + 6

        async def ask(who: str) -> None:
            while time.monotonic() < stop:
                response = await http.get(f"/threads/{thread}", headers=headers[who])
                status = response.status_code
                seen[f"{who} {status}"] = seen.get(f"{who} {status}", 0) + 1
                if status == 503 and response.headers.get("retry-after"):
                    continue
                if status != wanted[who]:
                    wrong.append(f"{who}: {status} {response.text[:200]}")

        async def kill() -> None:
            for _ in range(2):
                await asyncio.sleep(1)
                pids = auth_processes(server)
                if not pids:
                    wrong.append("no auth handler process found to kill")
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                await asyncio.sleep(1.5)

        await asyncio.gather(*(ask(who) for who in wanted for _ in range(4)), kill())
        # Served again, by new processes.
        deadline = time.monotonic() + 30
        while (await http.get(f"/threads/{thread}", headers=ALICE)).status_code != 200:
            if time.monotonic() > deadline:
                wrong.append("the handlers did not come back within 30 s")
                break
            await asyncio.sleep(0.2)
    print(f"answers while the handlers were killed twice: {dict(sorted(seen.items()))}")
    if not any(key.endswith(" 503") for key in seen):
        wrong.append("no request met the restart: the test proved nothing")
    for line in wrong:
        print(f"WRONG {line}")
    return 1 if wrong else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--server-pid", type=int, required=True)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.url, args.server_pid)))
