#!/usr/bin/env bash
# Python LangGraph graphs served by three servers, side by side in one invocation, driven by the
# same official SDK client (drive.py): mostrador (`mostrador-e2e dev --config --python`: api and
# worker in one process, its Python runners started by the worker), Aegra (Python, Postgres) and
# the official in-memory server (`langgraph dev`), each serving bench/servers/linear.py unchanged.
# mostrador also serves its Rust six-node test graph (`bench_linear_6`) in the same process, for
# reference. REPS reps; the servers' order rotates each rep; every server starts on a fresh
# database (or a fresh in-memory state) for each rep.
#
#   bench/servers/run.sh                    # all three, REPS=3
#   REPS=1 RUNS=100 bench/servers/run.sh mostrador aegra
#
# env: REPS=3 RUNS=400 CONCURRENCY=16 PICKUPS=100 LGAPI_PICKUPS=30 DURABILITY=sync
#      IDLE_WAIT=180 (seconds each measurement waits, at most, for the machine to be idle)
#      MOSTRADOR_BIN=target/release/mostrador-e2e (built if missing:
#        cargo build --release -p mostrador-tests --bin mostrador-e2e)
#      MOSTRADOR_VERSION (for the record; default: this checkout's commit)
#      OUT=target/bench-servers/results.jsonl (appended to)
# Needs PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth): databases
# bench_servers_mostrador and bench_servers_aegra are dropped and recreated. Virtual environments
# (Python 3.12, from the lock files here) live under target/bench-servers/. Each server runs in
# its own process group and is stopped by that group's id.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
REPS=${REPS:-3}
RUNS=${RUNS:-400}
CONCURRENCY=${CONCURRENCY:-16}
PICKUPS=${PICKUPS:-100}
LGAPI_PICKUPS=${LGAPI_PICKUPS:-30}
DURABILITY=${DURABILITY:-sync}
IDLE_WAIT=${IDLE_WAIT:-180}
work=$root/target/bench-servers
OUT=${OUT:-$work/results.jsonl}
MOSTRADOR_BIN=${MOSTRADOR_BIN:-$root/target/release/mostrador-e2e}
MOSTRADOR_VERSION=${MOSTRADOR_VERSION:-$(git rev-parse --short HEAD)}
PG=postgres://postgres@127.0.0.1:5432
servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(mostrador aegra lgapi)
mkdir -p "$work/logs" "$work/run/aegra" "$work/run/lgapi"

# --- environments ----------------------------------------------------------------------------
python312=${PYTHON312:-$(command -v python3.12 || echo /root/.pyenv/versions/3.12.1/bin/python3.12)}
venv() {  # folder, lock file
    if [ ! -x "$1/bin/python" ]; then
        "$python312" -m venv "$1"
        "$1/bin/pip" install -q -r "$2"
    fi
}
# LangGraph, the official server (in memory), the SDK (the client) and LangGraph's Postgres
# saver: the interpreter of mostrador's runners, of `langgraph dev` and of the client.
venv "$work/graphs-venv" "$here/graphs.lock.txt"
venv "$work/aegra-venv" "$here/aegra.lock.txt"
py=$work/graphs-venv/bin/python
if [[ " ${servers[*]} " == *" mostrador "* ]] && [ ! -x "$MOSTRADOR_BIN" ]; then
    cargo build --release -p mostrador-tests --bin mostrador-e2e
fi
# langgraph dev reads graph paths from its working folder: the same file, through a link.
ln -sf "$here/linear.py" "$work/run/lgapi/linear.py"

# --- servers ---------------------------------------------------------------------------------
group=""
stop() {
    if [ -n "$group" ]; then
        kill -TERM -- "-$group" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 -- "-$group" 2>/dev/null || break; sleep 0.1; done
        kill -KILL -- "-$group" 2>/dev/null || true
        group=""
    fi
}
trap stop EXIT
until_ok() {  # curl arguments
    for _ in $(seq 240); do
        curl -fs -o /dev/null "$@" && return 0
        sleep 0.5
    done
    echo "not ready: $*" >&2
    return 1
}
fresh_db() {
    psql -q "$PG/postgres" -c "drop database if exists $1 with (force)" -c "create database $1" 2>&1 |
        grep -v NOTICE || true
}
drive() {
    "$py" "$here/drive.py" --rep "$rep" --server-pgid "$group" --runs "$RUNS" \
        --concurrency "$CONCURRENCY" --durability "$DURABILITY" --idle-wait-s "$IDLE_WAIT" "$@" |
        tee -a "$OUT"
}
python_graph='linear6:6:path:{"path":[]}'

serve_mostrador() {
    fresh_db bench_servers_mostrador
    local port=18143
    MOSTRADOR_JWT_SECRET=mostrador-dev-secret setsid "$MOSTRADOR_BIN" dev --database-url "$PG/bench_servers_mostrador" \
        --listen "127.0.0.1:$port" --config "$here/langgraph.json" --python "$py" \
        >"$work/logs/mostrador-rep$rep.log" 2>&1 &
    group=$!
    local token
    token=$("$MOSTRADOR_BIN" token --jwt-secret mostrador-dev-secret --sub bench --role manager --store s1)
    # Ready once a runner has loaded and described the Python graphs.
    until_ok -H "Authorization: Bearer $token" "http://127.0.0.1:$port/assistants/linear6/graph"
    drive --server mostrador --version "mostrador $MOSTRADOR_VERSION (mostrador-e2e dev, release)" \
        --url "http://127.0.0.1:$port" --token "$token" --database bench_servers_mostrador \
        --pickups "$PICKUPS" \
        --graph "$python_graph" --label python \
        --graph 'bench_linear_6:6:log:{"delay_ms":0}' --label rust
    stop
}

serve_aegra() {
    fresh_db bench_servers_aegra
    local port=18146
    (cd "$work/run/aegra" && DATABASE_URL=$PG/bench_servers_aegra exec setsid \
        "$work/aegra-venv/bin/aegra" serve --host 127.0.0.1 --port "$port" \
        --config "$here/aegra.json") >"$work/logs/aegra-rep$rep.log" 2>&1 &
    group=$!
    until_ok "http://127.0.0.1:$port/health"
    local version
    version=$("$work/aegra-venv/bin/python" -c 'import importlib.metadata as m; print("aegra-api", m.version("aegra-api"), "langgraph", m.version("langgraph"), "langgraph-checkpoint-postgres", m.version("langgraph-checkpoint-postgres"))')
    drive --server aegra --version "$version" --url "http://127.0.0.1:$port" \
        --database bench_servers_aegra --pickups "$PICKUPS" --graph "$python_graph" --label python
    stop
}

serve_lgapi() {
    local port=18144
    rm -rf "$work/run/lgapi/.langgraph_api"
    (cd "$work/run/lgapi" && LANGGRAPH_CLI_NO_ANALYTICS=1 LANGSMITH_TRACING=false exec setsid \
        "$work/graphs-venv/bin/langgraph" dev --no-browser --no-reload --host 127.0.0.1 \
        --port "$port" --n-jobs-per-worker "$CONCURRENCY" --config "$here/langgraph.json") \
        >"$work/logs/lgapi-rep$rep.log" 2>&1 &
    group=$!
    until_ok "http://127.0.0.1:$port/ok"
    local version
    version=$("$py" -c 'import importlib.metadata as m; print("langgraph-api", m.version("langgraph-api"), "inmem", m.version("langgraph-runtime-inmem"), "langgraph", m.version("langgraph"))')
    drive --server langgraph-dev --version "$version (--n-jobs-per-worker $CONCURRENCY)" \
        --url "http://127.0.0.1:$port" --pickups "$LGAPI_PICKUPS" --graph "$python_graph" --label python
    stop
}

n=${#servers[@]}
for rep in $(seq 1 "$REPS"); do
    for i in $(seq 0 $((n - 1))); do
        server=${servers[$(((i + rep - 1) % n))]}
        echo "=== rep $rep: $server ($(date -Is); load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
        "serve_$server"
    done
done
"$py" "$here/summarize.py" "$OUT"
