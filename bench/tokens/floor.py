"""The floor under a token's trip through PostgreSQL: what one hop from a process to PostgreSQL
and on to a listening process costs on this machine, at a token's pace and back to back.

A streamed token leaves mostrador's runner for its worker, which writes it; PostgreSQL notifies
the api, which sends it to the client. Aegra runs the graph inside its HTTP server: no hop. This
measures the cheapest hop a Postgres-only live path could take, whatever it carries:

* `select 1`: a round trip, nothing written;
* `notify, commit asynchronous`: a transaction that only notifies, committed without waiting for
  the WAL flush (what a live path that gives up durability before visibility could send), timed
  from the statement until a second connection, listening, is told;
* `append, durable`: mostrador's own statement appending one event (`queue/queries/append_events.sql`,
  fenced, numbered, notifying), committed as mostrador commits it, on a run made for it.

Each is timed PACE seconds apart (a token's pace: 20 ms; an idle backend wakes for each) and back
to back (PACE=0), N times after a warm-up. One JSON line per measurement.

    ../shared/peers/aegra/.venv/bin/python bench/tokens/floor.py   # any Python with asyncpg

env: DATABASE (postgres://postgres@127.0.0.1:5432/bench_tokens_floor, dropped and made again),
     N=300, PACE="0.02 0"; the append needs mostrador's schema: MOSTRADOR_BIN
     (target/release/mostrador) migrates the database.
"""

import asyncio
import json
import os
import pathlib
import statistics
import subprocess
import time
import uuid

import asyncpg

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATABASE = os.environ.get("DATABASE", "postgres://postgres@127.0.0.1:5432/bench_tokens_floor")
N = int(os.environ.get("N", "300"))
PACES = [float(p) for p in os.environ.get("PACE", "0.02 0").split()]
MOSTRADOR_BIN = os.environ.get("MOSTRADOR_BIN", str(ROOT / "target/release/mostrador"))
# A token's `messages-tuple` event as mostrador stores it (its size matters to the notification).
TOKEN = [
    {"id": "lc_run--x", "type": "AIMessageChunk", "content": "@1796647473.344187;", "tool_calls": [],
     "tool_call_chunks": [], "additional_kwargs": {}, "response_metadata": {"model_provider": "openai"},
     "invalid_tool_calls": [], "name": None, "chunk_position": None, "usage_metadata": None},
    {"graph_id": "chat", "langgraph_node": "chat", "langgraph_step": 1, "langgraph_triggers": ["start:chat"],
     "ls_provider": "openai", "ls_model_name": "m", "ls_model_type": "chat", "tags": [], "x" * 400: "y"},
]


def append_sql() -> str:
    text = (ROOT / "queue/queries/append_events.sql").read_text()
    lines = [line for line in text.splitlines() if not line.strip().startswith("--")]
    return "\n".join(lines).replace('"run_id!: RunId"', "run_id").replace('"last_seq!"', "last_seq")


async def fresh_database() -> None:
    base, name = DATABASE.rsplit("/", 1)
    admin = await asyncpg.connect(base + "/postgres")
    await admin.execute(f'drop database if exists "{name}" with (force)')
    await admin.execute(f'create database "{name}"')
    await admin.close()
    subprocess.run([MOSTRADOR_BIN, "migrate", "--database-url", DATABASE], check=True,
                   stdout=subprocess.DEVNULL)


async def a_running_run(conn: asyncpg.Connection) -> uuid.UUID:
    """A run held by attempt 1, as a claim leaves it, on a thread of its own."""
    run_id, thread_id = uuid.uuid4(), uuid.uuid4()
    await conn.execute("insert into mostrador.threads (thread_id, owner) values ($1, 'bench')", thread_id)
    await conn.execute(
        """insert into mostrador.runs (run_id, thread_id, graph_id, status, attempt)
           values ($1, $2, 'chat', 'running', 1)""", run_id, thread_id)
    return run_id


async def timed(step, pace: float) -> list[float]:
    times = []
    for i in range(N + 20):
        if pace:
            await asyncio.sleep(pace)
        started = time.perf_counter()
        await step()
        if i >= 20:
            times.append((time.perf_counter() - started) * 1000)
    return sorted(times)


def line(what: str, pace: float, times: list[float]) -> None:
    print(json.dumps({"kind": "floor", "what": what, "pace_s": pace, "n": len(times),
                      "p50_ms": round(times[len(times) // 2], 3),
                      "p99_ms": round(times[int(len(times) * 0.99)], 3),
                      "mean_ms": round(statistics.mean(times), 3)}), flush=True)


async def main() -> None:
    await fresh_database()
    sender = await asyncpg.connect(DATABASE)
    listener = await asyncpg.connect(DATABASE)
    told: asyncio.Queue = asyncio.Queue()
    await listener.add_listener("floor", lambda *_: told.put_nowait(None))
    run_id = await a_running_run(sender)
    select_one = await sender.prepare("select 1")
    notify = await sender.prepare("select pg_notify('floor', $1)")
    append = await sender.prepare(append_sql())
    payload = json.dumps({"run_id": str(run_id), "seq": 1, "event": "messages", "data": TOKEN})
    data = json.dumps(TOKEN)

    async def notified() -> None:
        await notify.fetch(payload)
        await told.get()

    async def appended() -> None:
        await append.fetch([run_id], [1], ["messages"], [data])

    for pace in PACES:
        line("select 1", pace, await timed(select_one.fetch, pace))
        await sender.execute("set synchronous_commit = off")
        line("notify, commit asynchronous, until a listener is told", pace, await timed(notified, pace))
        await sender.execute("reset synchronous_commit")
        line("append one event, durable (mostrador's statement)", pace, await timed(appended, pace))


asyncio.run(main())
