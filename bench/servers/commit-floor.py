"""The floor under a run's PostgreSQL CPU: what one durable one-row commit costs PostgreSQL on
this machine, at a given rate, counted as drive.py counts a run's (every process of the cluster,
from /proc).

pgbench's CLIENTS connections insert one row into a table with one index, each insert its own
transaction (synchronous commit, as every write of a run is), for SECONDS, at most RATE commits a
second (unthrottled without one). A run that needs N commits cannot cost PostgreSQL less than N
times this, however lean its statements are.

    target/bench-servers/graphs-venv/bin/python bench/servers/commit-floor.py [RATE]

env: CLIENTS=16 SECONDS=10. Needs PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth) and
pgbench; the database bench_commit_floor is dropped and recreated.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

from drive import HZ, cpu_sample

DB = "bench_commit_floor"


def psql(database: str, *commands: str) -> None:
    args = ["psql", "-qX", "-h", "127.0.0.1", "-U", "postgres", "-d", database]
    for command in commands:
        args += ["-c", command]
    subprocess.run(args, check=True, capture_output=True)


def main() -> None:
    rate = sys.argv[1] if len(sys.argv) > 1 else None
    clients = os.environ.get("CLIENTS", "16")
    seconds = int(os.environ.get("SECONDS", "10"))
    psql("postgres", f"drop database if exists {DB} with (force)", f"create database {DB}")
    psql(DB, "create table t (id bigserial primary key, v int)")
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as script:
        script.write("insert into t (v) values (1);\n")
        script.flush()
        command = ["pgbench", "-h", "127.0.0.1", "-U", "postgres", "-n", "-M", "prepared",
                   "-c", clients, "-j", "2", "-T", str(seconds), "-f", script.name, DB]
        if rate:
            command[1:1] = ["-R", rate]
        # The backends exit before the second sample: their CPU is the postmaster's children's.
        before = cpu_sample(0, None)
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        after = cpu_sample(0, None)
    commits = int(re.search(r"transactions actually processed: (\d+)", out).group(1))
    pg_s = (after["pg"] - before["pg"]) / HZ
    print(json.dumps({
        "rate": int(rate) if rate else None,
        "clients": int(clients),
        "commits_per_s": round(commits / seconds),
        "pg_cpu_ms_per_commit": round(1000 * pg_s / commits, 3),
    }))


if __name__ == "__main__":
    main()
