#!/usr/bin/env bash
# One throughput measurement of the Rust six-node graph through the official SDK: a fresh
# database, `mostrador-e2e dev` (api and worker in one process), drive.py's throughput workload
# (RUNS runs of `bench_linear_6`, sync, CONCURRENCY callers), then the server stopped. Prints
# drive.py's JSON line; the server's peak resident memory goes to stderr. Alternate two builds
# (or two environments) by calling it in a loop:
#
#   for i in 1 2 3; do bench/servers/rust-throughput.sh /tmp/old/mostrador-e2e 800
#                      bench/servers/rust-throughput.sh /tmp/new/mostrador-e2e 800; done
#   TOKIO_WORKER_THREADS=1 bench/servers/rust-throughput.sh target/release/mostrador-e2e 800
#
# env: CONCURRENCY=16 IDLE_WAIT=30 (seconds drive.py waits, at most, for the machine to be idle)
# Needs PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth); the database
# bench_rust_throughput is dropped and recreated. The client runs in target/bench-servers/graphs-venv
# (made by bench/servers/run.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/mostrador-e2e}
runs=${2:-800}
db=bench_rust_throughput
port=18151
py=target/bench-servers/graphs-venv/bin/python
export PGHOST=127.0.0.1 PGUSER=postgres
psql -qX -d postgres -c "drop database if exists $db with (force)" -c "create database $db" >/dev/null
MOSTRADOR_JWT_SECRET=mostrador-dev-secret setsid "$bin" dev --database-url "postgres://postgres@127.0.0.1:5432/$db" \
    --listen "127.0.0.1:$port" >"target/bench-servers/rust-throughput.log" 2>&1 &
group=$!
stop() {
    grep -h VmHWM "/proc/$group/status" >&2 || true
    kill -INT -- "-$group" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 -- "-$group" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$group" 2>/dev/null || true
}
trap stop EXIT
token=$("$bin" token --jwt-secret mostrador-dev-secret --sub bench --role manager --store s1)
for _ in $(seq 240); do
    curl -fs -o /dev/null -H "Authorization: Bearer $token" \
        "http://127.0.0.1:$port/assistants/bench_linear_6/graph" && break
    sleep 0.5
done
"$py" bench/servers/drive.py --server mostrador --url "http://127.0.0.1:$port" --token "$token" \
    --database "$db" --server-pgid "$group" --runs "$runs" --concurrency "${CONCURRENCY:-16}" \
    --idle-wait-s "${IDLE_WAIT:-30}" --workloads throughput \
    --graph 'bench_linear_6:6:log:{"delay_ms":0}' --label rust
