"""16 callers, each creating a thread and reading it back through the official SDK, for a fixed
time: requests per second, each request's latency (client side) and the CPU the server and
PostgreSQL spent per request, as one JSON line.

    python drive.py --url http://127.0.0.1:2024 --server mostrador --token-of 'user{i}-token' --seconds 20
"""

import argparse
import asyncio
import json
import os
import statistics
import time

from langgraph_sdk import get_client


async def caller(url: str, token: str, until: float, create: list, get: list) -> None:
    client = get_client(url=url, api_key=None, headers={"Authorization": f"Bearer {token}"})
    while time.perf_counter() < until:
        started = time.perf_counter()
        thread = await client.threads.create(metadata={"bench": True})
        created = time.perf_counter()
        await client.threads.get(thread["thread_id"])
        done = time.perf_counter()
        create.append(created - started)
        get.append(done - created)


def cpu_seconds(session_id: int | None) -> float:
    """CPU time of the server (the processes of its session, which `run.sh` starts it in: its
    api, workers, runners, handler processes) and of PostgreSQL (every `postgres` process: the other databases idle)."""
    ticks = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                name, rest = f.read().rsplit(")", 1)
        except OSError:
            continue
        fields = rest.split()
        session, utime, stime = int(fields[3]), int(fields[11]), int(fields[12])
        if session == session_id or name.endswith("(postgres"):
            ticks += utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


def quantiles(samples: list) -> dict:
    ms = sorted(s * 1000 for s in samples)
    return {"p50": round(statistics.median(ms), 2), "p99": round(ms[int(len(ms) * 0.99) - 1], 2)}


async def main(args: argparse.Namespace) -> None:
    # Warm: connections, caches, the handlers' first call.
    await caller(args.url, args.token_of.format(i=0), time.perf_counter() + 1, [], [])
    create: list = []
    get: list = []
    cpu_before = cpu_seconds(args.session)
    started = time.perf_counter()
    until = started + args.seconds
    await asyncio.gather(*(caller(args.url, args.token_of.format(i=i), until, create, get) for i in range(args.callers)))
    elapsed = time.perf_counter() - started
    requests = len(create) + len(get)
    cpu_ms = (cpu_seconds(args.session) - cpu_before) * 1000
    print(json.dumps({
        "server": args.server, "callers": args.callers, "seconds": round(elapsed, 1),
        "requests_per_s": round(requests / elapsed, 1),
        "server_cpu_ms_per_request": round(cpu_ms / requests, 3) if args.session else None,
        "create_ms": quantiles(create), "get_ms": quantiles(get),
    }))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--token-of", required=True, help="a token per caller: '{i}' is its number")
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--session", type=int, help="the server's session, to count its CPU (and PostgreSQL's)")
    asyncio.run(main(parser.parse_args()))
