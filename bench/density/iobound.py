"""One burst of I/O-bound runs against a server, through the official langgraph-sdk: RUNS runs
submitted at once, each on a new thread, each a one-node graph that waits DELAY ms (`delay_ms` of
the peers' graphs.py: a model call's wait). Prints one JSON line: the wall time until every run
has ended, the runs that succeeded, and the peak resident memory summed over every process of the
server, sampled every SAMPLE ms.

Our copy of ../shared/peers/e2e/iobound.py, changed where it would not measure what we need:

* The server's processes are the process groups given with --pgid (repeatable) *and* every
  process descending from their leaders or sharing their session, so a runner that a worker
  starts is counted even if some day it is put in a group of its own. (Today the runners inherit
  the worker's group: neither tokio's Command nor setpriv changes it. `procs_at_peak` and
  `procs_max` in the output count what was summed, to check it.)
* One read of /proc/PID/stat per process per sample (its rss and CPU times), not two files: with
  a thousand runner processes the sampler's own CPU matters on two cores.
* The runs are spread over SDK clients of RUNS_PER_CLIENT (10) runs each, each client with as
  many connections as runs. One SDK client (httpx: 100 connections at most) would hold every
  join past the hundredth, and the creates behind them: a thousand runs would go in waves of a
  hundred, the client's limit and not the server's. One client widened to a thousand
  connections spends about a CPU minute on its own pool (httpcore's bookkeeping grows with
  connections times waiting requests), and the client becomes what is measured; 20 clients of
  50 still spend twice the CPU of 50 clients of 10.
* Before the burst it waits (QUIET_WAIT_S at most) until the machine's CPUs are less than 10 %
  busy over 2 s, as the peers' bench.py does, and records how busy they were.
* It also reports CPU seconds during the burst: the server's processes (exited ones up to their
  last sample), PostgreSQL's, the client's, and the machine's, so a busy machine shows.

usage: iobound.py --url URL [--token T] --pgid PGID [--pgid PGID2] --server NAME
                  [--graph l1] [--runs N] [--delay-ms D] [--creators 64] [--sample-ms 100]
                  [--runs-per-client 10] [--quiet-wait-s 60] [--burst first]
"""
import argparse
import asyncio
import json
import os
import resource
import time

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


def read_procs() -> dict[int, tuple]:
    """Every process: pid -> (ppid, pgid, sid, comm, rss bytes, cpu ticks)."""
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        head, _, tail = raw.rpartition(b")")
        fields = tail.split()
        try:
            comm = head.split(b"(", 1)[1].decode(errors="replace")
            # stat fields 4..6: ppid, pgrp, session; 14, 15: utime, stime; 24: rss (pages)
            procs[int(name)] = (
                int(fields[1]), int(fields[2]), int(fields[3]), comm,
                int(fields[21]) * PAGE, int(fields[11]) + int(fields[12]),
            )
        except (IndexError, ValueError):
            continue
    return procs


def members(procs: dict[int, tuple], roots: set[int]) -> list[int]:
    """The processes of the server: in one of the groups or sessions, or below their leaders."""
    memo: dict[int, bool] = {}

    def inside(pid: int) -> bool:
        path = []
        found = False
        while pid in procs and pid not in memo:
            ppid, pgid, sid = procs[pid][:3]
            path.append(pid)
            if pid in roots or pgid in roots or sid in roots:
                found = True
                break
            pid = ppid
        else:
            found = memo.get(pid, False)
        for p in path:
            memo[p] = found
        return found

    return [pid for pid in procs if inside(pid)]


def machine_busy_ticks() -> int:
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    return sum(cpu) - cpu[3] - cpu[4]  # all but idle and iowait


def pss(pid: int) -> int:
    """A process's proportional set size in bytes (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Sampler:
    """Peak summed RSS of the server's processes, and CPU ticks per process as last seen."""

    def __init__(self, roots: set[int]) -> None:
        self.roots = roots
        self.me = os.getpid()
        self.peak = 0
        self.peak_pss = 0
        self.peak_procs = 0
        self.max_procs = 0
        self.server_cpu: dict[int, tuple[int, int]] = {}  # pid -> (first seen, last seen)
        self.pg_cpu: dict[int, tuple[int, int]] = {}
        self.idle = self.sample(first=True)

    def sample(self, first: bool = False) -> int:
        procs = read_procs()
        mine = members(procs, self.roots)
        rss = sum(procs[p][4] for p in mine)
        if rss > self.peak:
            self.peak, self.peak_procs = rss, len(mine)
        # Proportional: a page shared by processes (a fork's, copy-on-write) counted once in all,
        # as the kernel and a pod's memory limit count it; RSS counts it in each.
        self.peak_pss = max(self.peak_pss, sum(pss(p) for p in mine))
        self.max_procs = max(self.max_procs, len(mine))
        for table, pids in (
            (self.server_cpu, mine),
            (self.pg_cpu, [p for p, v in procs.items() if v[3] == "postgres"]),
        ):
            for pid in pids:
                ticks = procs[pid][5]
                start = table[pid][0] if pid in table else (ticks if first else 0)
                table[pid] = (start, ticks)
        return rss

    @staticmethod
    def spent(table: dict[int, tuple[int, int]]) -> float:
        return sum(last - first for first, last in table.values()) / TICK


def mib(n: float) -> float:
    return round(n / 2**20, 1)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token")
    ap.add_argument("--graph", default="l1")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--delay-ms", type=int, default=5000)
    ap.add_argument("--pgid", type=int, action="append", required=True)
    ap.add_argument("--server", required=True)
    ap.add_argument("--burst", default="first")
    ap.add_argument("--creators", type=int, default=64, help="creates in flight at most")
    ap.add_argument("--sample-ms", type=int, default=100)
    ap.add_argument("--runs-per-client", type=int, default=10)
    ap.add_argument("--quiet-wait-s", type=float, default=60,
                    help="wait at most this long for the machine to be < 10%% busy over 2 s")
    a = ap.parse_args()

    headers = {"Authorization": f"Bearer {a.token}"} if a.token else None
    per = max(1, min(a.runs_per_client, a.runs))

    def new_client() -> LangGraphClient:
        # The SDK's own client (its headers, the timeout), on a pool of `per` connections.
        sdk = get_client(url=a.url, headers=headers, timeout=600).http.client
        return LangGraphClient(httpx.AsyncClient(
            base_url=sdk.base_url, headers=sdk.headers, timeout=sdk.timeout,
            transport=httpx.AsyncHTTPTransport(
                retries=5, limits=httpx.Limits(max_connections=per, max_keepalive_connections=per),
                verify=False),  # loopback http: no certificates to load per client
        ))

    clients = [new_client() for _ in range(-(-a.runs // per))]

    sampler = Sampler(set(a.pgid))
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            sampler.sample()
            try:
                await asyncio.wait_for(stop.wait(), a.sample_ms / 1000)
            except asyncio.TimeoutError:
                pass

    creators = asyncio.Semaphore(a.creators)

    async def one(i: int) -> str:
        client = clients[i // per]
        async with creators:
            thread = await client.threads.create()
            run = await client.runs.create(
                thread["thread_id"], a.graph, input={"delay_ms": a.delay_ms}
            )
        await client.runs.join(thread["thread_id"], run["run_id"])
        got = await client.runs.get(thread["thread_id"], run["run_id"])
        return got["status"]

    deadline = time.monotonic() + a.quiet_wait_s
    while True:
        t, b = time.monotonic(), machine_busy_ticks()
        await asyncio.sleep(2)
        busy_pct = 100 * (machine_busy_ticks() - b) / TICK / (time.monotonic() - t) / os.cpu_count()
        if busy_pct < 10 or time.monotonic() > deadline:
            break
    load = os.getloadavg()[0]
    busy0, me0 = machine_busy_ticks(), resource.getrusage(resource.RUSAGE_SELF)
    sampling = asyncio.create_task(sample())
    t0 = time.perf_counter()
    statuses = await asyncio.gather(*(one(i) for i in range(a.runs)), return_exceptions=True)
    wall = time.perf_counter() - t0
    stop.set()
    await sampling
    sampler.sample()
    busy = (machine_busy_ticks() - busy0) / TICK
    me1 = resource.getrusage(resource.RUSAGE_SELF)
    client_cpu = me1.ru_utime + me1.ru_stime - me0.ru_utime - me0.ru_stime
    server_cpu, pg_cpu = Sampler.spent(sampler.server_cpu), Sampler.spent(sampler.pg_cpu)
    ok = sum(1 for s in statuses if s == "success")
    errors = sorted({repr(s)[:160] for s in statuses if s != "success"})[:5]
    print(json.dumps({
        "server": a.server, "burst": a.burst, "runs": a.runs, "delay_ms": a.delay_ms,
        "success": ok, "wall_s": round(wall, 2), "ideal_s": a.delay_ms / 1000,
        "idle_rss_mib": mib(sampler.idle), "peak_rss_mib": mib(sampler.peak),
        "peak_pss_mib": mib(sampler.peak_pss),
        "procs_at_peak": sampler.peak_procs, "procs_max": sampler.max_procs,
        "server_cpu_s": round(server_cpu, 2), "postgres_cpu_s": round(pg_cpu, 2),
        "client_cpu_s": round(client_cpu, 2), "clients": len(clients),
        "outside_cpu_s": round(max(0.0, busy - server_cpu - pg_cpu - client_cpu), 2),
        "busy_pct_before": round(busy_pct, 1), "loadavg_1m_before": round(load, 2),
        "errors": errors,
    }), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
