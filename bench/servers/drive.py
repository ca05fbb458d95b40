"""Drives one server through the official Python SDK (`langgraph-sdk`, async client) and prints
one JSON line per measurement. `bench/servers/run.sh` starts and stops the servers.

Measurements (every run sends `durability` explicitly, `sync` unless told otherwise):

  throughput  RUNS runs from CONCURRENCY concurrent callers, each `threads.create` then
              `runs.wait` on that new thread (after CONCURRENCY untimed warm-up runs). runs/s,
              supersteps/s, per-run latency, and the CPU the server, PostgreSQL and this client
              used per run. Every final state is checked (`KEY == [n1 .. nN]`).
  pickup      on an idle server, PICKUPS runs one after another, GAP_MS apart, each on a thread
              created beforehand (untimed): from just before `runs.stream(stream_mode="values")`
              is sent to the first `values` event (the input's state, before n1 runs).

CPU is read from /proc: the server's process group (for mostrador that includes its Python
runner processes, which it starts in its own group), every PostgreSQL process, this process, and
the rest of the machine (`outside_cpu_pct`: other work sharing the two cores). Other databases
may be busy on the same PostgreSQL, so the backends connected to the server's own database
(`--database`) are also counted apart (`pg_db`: its connections' work, without WAL writer,
checkpointer or other databases).
"""

import argparse
import asyncio
import json
import os
import sys
import time

import langgraph_sdk
from langgraph_sdk import get_client

HZ = os.sysconf("SC_CLK_TCK")
POSTMASTER_PID = "/var/run/postgresql/15-main.pid"


def _stat(pid: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _cpu(fields: list[str], children: bool = False) -> int:
    # After the command: state, ppid, pgrp, ..., utime (12th), stime, cutime, cstime.
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks


def _machine() -> tuple[int, int]:
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:8]]
    return sum(ticks), sum(ticks) - ticks[3] - ticks[4]


def _postmaster() -> int | None:
    try:
        with open(POSTMASTER_PID) as f:
            return int(f.readline())
    except OSError:
        return None


def _backend_of(pid: str, database: str) -> bool:
    """A PostgreSQL backend connected to `database` ("postgres: 15/main: user db host state")."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read().replace(b"\0", b" ").decode(errors="replace").split()
    except OSError:
        return False
    return len(words) > 3 and words[3] == database


def cpu_sample(server_pgid: int, database: str | None) -> dict:
    postmaster = _postmaster()
    server = pg = pg_db = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        fields = _stat(pid)
        if fields is None:
            continue
        if server_pgid and int(fields[2]) == server_pgid:
            # The group leader also counts the children it reaped (runners that exited).
            server += _cpu(fields, children=int(pid) == server_pgid)
        if postmaster is not None and (int(pid) == postmaster or int(fields[1]) == postmaster):
            pg += _cpu(fields, children=int(pid) == postmaster)
            if database and _backend_of(pid, database):
                pg_db += _cpu(fields)
    total, busy = _machine()
    return {
        "total": total,
        "busy": busy,
        "server": server,
        "pg": pg,
        "pg_db": pg_db,
        "client": time.process_time(),
    }


def cpu_used(before: dict, after: dict) -> dict:
    seconds = {k: (after[k] - before[k]) / HZ for k in ("total", "busy", "server", "pg", "pg_db")}
    client = after["client"] - before["client"]
    outside = max(0.0, seconds["busy"] - seconds["server"] - seconds["pg"] - client)
    return {
        "cpu_server_s": round(seconds["server"], 3),
        "cpu_pg_s": round(seconds["pg"], 3),
        "cpu_pg_db_s": round(seconds["pg_db"], 3),
        "cpu_client_s": round(client, 3),
        "cpu_outside_s": round(outside, 3),
        "outside_cpu_pct": round(100 * outside / seconds["total"], 1) if seconds["total"] else 0.0,
    }


async def until_idle(limit_s: float, threshold_pct: float = 10.0) -> float:
    """Waits (at most `limit_s`) until the machine is below `threshold_pct` busy over 2 s."""
    waited = 0.0
    while True:
        total1, busy1 = _machine()
        await asyncio.sleep(2)
        total2, busy2 = _machine()
        busy = 100.0 * (busy2 - busy1) / max(1, total2 - total1)
        if busy < threshold_pct or waited >= limit_s:
            return round(busy, 1)
        waited += 2
        print(f"   machine {busy:.0f}% busy, waiting", file=sys.stderr)


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = (len(values) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


class Commits:
    """Transactions committed in the server's database (pg_stat_database), if it has one."""

    def __init__(self, database: str | None) -> None:
        self.database = database

    async def read(self) -> int | None:
        if not self.database:
            return None
        # A backend reports its counters when idle, at most once a second; what a busy backend
        # had not reported yet goes out after 10 s of idleness (PostgreSQL 15's
        # PGSTAT_IDLE_INTERVAL). Waiting that long counts every commit of the window.
        await asyncio.sleep(11)
        proc = await asyncio.create_subprocess_exec(
            "psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-Atc",
            f"select xact_commit from pg_stat_database where datname = '{self.database}'",
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        return int(out) if out.strip() else None


class Graph:
    def __init__(self, spec: str) -> None:
        # id:steps:key:input-json, e.g. linear6:6:path:{"path":[]}
        graph_id, steps, key, graph_input = spec.split(":", 3)
        self.id = graph_id
        self.steps = int(steps)
        self.key = key
        self.input = json.loads(graph_input)
        self.expected = [f"n{i}" for i in range(1, self.steps + 1)]


async def throughput(client, graph: Graph, args, commits: Commits) -> dict:
    kwargs = {"durability": args.durability}
    wrong: list = []

    async def one() -> float:
        began = time.perf_counter()
        thread = await client.threads.create()
        result = await client.runs.wait(thread["thread_id"], graph.id, input=graph.input, **kwargs)
        took = time.perf_counter() - began
        if not (isinstance(result, dict) and result.get(graph.key) == graph.expected):
            wrong.append(result)
        return took

    async def caller(remaining: list, latencies: list) -> None:
        while remaining:
            remaining.pop()
            latencies.append(await one())

    await asyncio.gather(*(one() for _ in range(args.concurrency)))
    wrong.clear()
    idle = await until_idle(args.idle_wait_s)
    remaining, latencies = list(range(args.runs)), []
    commits_before = await commits.read()
    before = cpu_sample(args.server_pgid, args.database or None)
    began = time.perf_counter()
    await asyncio.gather(*(caller(remaining, latencies) for _ in range(args.concurrency)))
    took = time.perf_counter() - began
    used = cpu_used(before, cpu_sample(args.server_pgid, args.database or None))
    commits_after = await commits.read()
    return {
        "idle_busy_pct": idle,
        "runs": args.runs,
        "concurrency": args.concurrency,
        "steps": graph.steps,
        "seconds": round(took, 3),
        "runs_per_s": round(args.runs / took, 2),
        "supersteps_per_s": round(args.runs * graph.steps / took, 1),
        "run_p50_ms": ms(percentile(latencies, 50)),
        "run_p99_ms": ms(percentile(latencies, 99)),
        "server_cpu_ms_per_run": round(1000 * used["cpu_server_s"] / args.runs, 2),
        "pg_cpu_ms_per_run": round(1000 * used["cpu_pg_s"] / args.runs, 2),
        "pg_db_cpu_ms_per_run": round(1000 * used["cpu_pg_db_s"] / args.runs, 2),
        "commits_per_run": None
        if commits_before is None or commits_after is None
        else round((commits_after - commits_before) / args.runs, 1),
        "wrong_results": len(wrong),
        "wrong_example": str(wrong[0])[:300] if wrong else None,
        **used,
    }


async def pickup(client, graph: Graph, args) -> dict:
    kwargs = {"durability": args.durability}
    warmup = 10
    threads = [(await client.threads.create())["thread_id"] for _ in range(args.pickups + warmup)]

    async def one(thread: str) -> tuple[float | None, float, int]:
        await asyncio.sleep(args.gap_ms / 1000)
        first, values = None, 0
        began = time.perf_counter()
        async for part in client.runs.stream(
            thread, graph.id, input=graph.input, stream_mode="values", **kwargs
        ):
            if part.event == "values":
                values += 1
                if first is None:
                    first = time.perf_counter() - began
        return first, time.perf_counter() - began, values

    for thread in threads[:warmup]:
        await one(thread)
    idle = await until_idle(args.idle_wait_s)
    firsts, ends, bad = [], [], 0
    before = cpu_sample(args.server_pgid, args.database or None)
    for thread in threads[warmup:]:
        first, end, values = await one(thread)
        # The input's state and one per node.
        if first is None or values != graph.steps + 1:
            bad += 1
        if first is not None:
            firsts.append(first)
        ends.append(end)
    used = cpu_used(before, cpu_sample(args.server_pgid, args.database or None))
    return {
        "idle_busy_pct": idle,
        "runs": args.pickups,
        "gap_ms": args.gap_ms,
        "p50_ms": ms(percentile(firsts, 50)),
        "p99_ms": ms(percentile(firsts, 99)),
        "max_ms": ms(max(firsts) if firsts else None),
        "end_p50_ms": ms(percentile(ends, 50)),
        "end_p99_ms": ms(percentile(ends, 99)),
        "bad_runs": bad,
        **used,
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--server", required=True, help="its name in the results")
    ap.add_argument("--version", default="")
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", default="")
    ap.add_argument("--graph", action="append", required=True,
                    help='id:steps:key:input-json, e.g. linear6:6:path:{"path":[]} (repeatable)')
    ap.add_argument("--label", action="append", default=[],
                    help="what each --graph is, for the results (e.g. python, rust)")
    ap.add_argument("--workloads", default="throughput,pickup")
    ap.add_argument("--durability", default="sync")
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--pickups", type=int, default=100)
    ap.add_argument("--gap-ms", type=int, default=50)
    ap.add_argument("--server-pgid", type=int, default=0)
    ap.add_argument("--database", default="", help="the server's database, to count commits")
    ap.add_argument("--idle-wait-s", type=float, default=60)
    ap.add_argument("--rep", type=int, default=1)
    args = ap.parse_args()

    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    client = get_client(url=args.url, headers=headers)
    commits = Commits(args.database or None)
    graphs = [Graph(spec) for spec in args.graph]
    labels = args.label + [""] * (len(graphs) - len(args.label))
    workloads = args.workloads.split(",")
    common = {
        "server": args.server,
        "version": args.version,
        "rep": args.rep,
        "durability": args.durability,
        "sdk": f"langgraph-sdk {langgraph_sdk.__version__}",
    }

    def emit(row: dict) -> None:
        print(json.dumps({**common, **row}), flush=True)

    for graph, label in zip(graphs, labels):
        if "throughput" in workloads:
            row = await throughput(client, graph, args, commits)
            emit({"workload": "throughput", "graph": graph.id, "label": label, **row})
    for graph, label in zip(graphs, labels):
        if "pickup" in workloads:
            row = await pickup(client, graph, args)
            emit({"workload": "pickup", "graph": graph.id, "label": label, **row})


if __name__ == "__main__":
    asyncio.run(main())
