"""10,000 memories of one user put through the official SDK (16 at a time), then searches with a
query, one at a time, as a memory agent recalls: each search's latency (client side), the first
(nothing read yet) apart, and the server's memory after, as one JSON line.

    python drive.py --url http://127.0.0.1:2024 --server mostrador --items 10000 --searches 200
"""

import argparse
import asyncio
import json
import os
import random
import statistics
import time

from langgraph_sdk import get_client

VOCABULARY = [f"w{i}" for i in range(300)]


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(8))


def rss_mib(session_id: int | None) -> float:
    """The resident memory of the server's processes (its session's: api, workers, helpers)."""
    kib = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                session = int(f.read().rsplit(")", 1)[1].split()[3])
            if session != session_id:
                continue
            with open(f"/proc/{pid}/status") as f:
                kib += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration, IndexError, ValueError):
            continue
    return round(kib / 1024, 1)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--session", type=int)
    args = parser.parse_args()
    client = get_client(url=args.url, api_key=None)
    rng = random.Random(7)
    texts = [text(rng) for _ in range(args.items)]
    started = time.perf_counter()
    queue = iter(enumerate(texts))

    async def putter() -> None:
        for i, memory in queue:
            await client.store.put_item(["memories", "u1"], f"m{i}", {"text": memory})

    await asyncio.gather(*(putter() for _ in range(16)))
    put_seconds = time.perf_counter() - started
    latencies = []
    top = []
    for i in range(args.searches + 1):
        query = " ".join(rng.choice(VOCABULARY) for _ in range(3))
        started = time.perf_counter()
        found = await client.store.search_items(["memories", "u1"], query=query, limit=10)
        latencies.append(time.perf_counter() - started)
        top.append(found["items"][0]["score"])
        assert len(found["items"]) == 10 and all(item["score"] is not None for item in found["items"])
    first, rest = latencies[0], sorted(latencies[1:])
    print(json.dumps({
        "server": args.server,
        "items": args.items,
        "dims": 1536,
        "puts_per_s": round(args.items / put_seconds, 1),
        "first_search_ms": round(first * 1000, 1),
        "search_p50_ms": round(statistics.median(rest) * 1000, 2),
        "search_p99_ms": round(rest[int(len(rest) * 0.99) - 1] * 1000, 2),
        "server_rss_mib": rss_mib(args.session),
    }))


if __name__ == "__main__":
    asyncio.run(main())
