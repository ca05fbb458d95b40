#!/usr/bin/env bash
# TypeScript graphs served by mostrador (Node.js runners) and by the official JS in-memory server
# (`langgraphjs dev`), side by side in one invocation, driven by the same official SDK client as
# the Python graphs' bench (bench/servers/drive.py): throughput (16 callers, threads.create +
# runs.wait per run of the six-node graph) and pickup. REPS reps, the servers' order rotating;
# each starts empty (a fresh database, a fresh in-memory state).
#
#   bench/js/run.sh                        # both, REPS=3
#   REPS=1 RUNS=200 bench/js/run.sh mostrador
#
# env: REPS=3 RUNS=400 CONCURRENCY=16 PICKUPS=100 LGJS_PICKUPS=30 IDLE_WAIT=180
#      MOSTRADOR_BIN=target/release/mostrador-e2e (built if missing)
#      OUT=target/bench-js/results.jsonl (appended to)
# The project (this folder's graph and langgraph.json, tests/langgraphjs/project's pinned
# node_modules) is put together under target/bench-js/project; the client is the Python SDK of
# target/python-graphs-venv (tests/python/run's).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
REPS=${REPS:-3}
RUNS=${RUNS:-400}
CONCURRENCY=${CONCURRENCY:-16}
PICKUPS=${PICKUPS:-100}
LGJS_PICKUPS=${LGJS_PICKUPS:-30}
IDLE_WAIT=${IDLE_WAIT:-180}
work=$root/target/bench-js
OUT=${OUT:-$work/results.jsonl}
MOSTRADOR_BIN=${MOSTRADOR_BIN:-$root/target/release/mostrador-e2e}
MOSTRADOR_VERSION=${MOSTRADOR_VERSION:-$(git rev-parse --short HEAD)}
PG=postgres://postgres@127.0.0.1:5432
servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(mostrador lgjs)
mkdir -p "$work/logs"

tests_project=$root/tests/langgraphjs/project
if [ ! -d "$tests_project/node_modules/@langchain/langgraph-cli" ]; then
    (cd "$tests_project" && npm ci --no-audit --no-fund --silent --legacy-peer-deps)
fi
project=$work/project
rm -rf "$project"
mkdir -p "$project"
cp "$here/graphs.ts" "$here/langgraph.json" "$tests_project/package.json" "$project/"
ln -s "$tests_project/node_modules" "$project/node_modules"
venv=${PYTHON_GRAPHS_VENV:-$root/target/python-graphs-venv}
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "langgraph==1.2.*" "langchain-core==1.*" "langgraph-sdk==0.4.*" \
        "langgraph-cli[inmem]==0.4.*"
fi
py=$venv/bin/python
if [[ " ${servers[*]} " == *" mostrador "* ]] && [ ! -x "$MOSTRADOR_BIN" ]; then
    cargo build --release -p mostrador-tests --bin mostrador-e2e
fi

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
drive() {
    "$py" "$root/bench/servers/drive.py" --rep "$rep" --server-pgid "$group" --runs "$RUNS" \
        --concurrency "$CONCURRENCY" --idle-wait-s "$IDLE_WAIT" "$@" | tee -a "$OUT"
}
graph='linear6:6:path:{"path":[]}'

serve_mostrador() {
    psql -q "$PG/postgres" -c "drop database if exists bench_js_mostrador with (force)" \
        -c "create database bench_js_mostrador" 2>&1 | grep -v NOTICE || true
    local port=18153
    MOSTRADOR_JWT_SECRET=mostrador-dev-secret setsid "$MOSTRADOR_BIN" dev \
        --database-url "$PG/bench_js_mostrador" --listen "127.0.0.1:$port" \
        --config "$project/langgraph.json" >"$work/logs/mostrador-rep$rep.log" 2>&1 &
    group=$!
    local token
    token=$("$MOSTRADOR_BIN" token --jwt-secret mostrador-dev-secret --sub bench --role manager --store s1)
    # Ready once a runner has loaded and described the graphs.
    until_ok -H "Authorization: Bearer $token" "http://127.0.0.1:$port/assistants/linear6/graph"
    drive --server mostrador --version "mostrador $MOSTRADOR_VERSION (mostrador-e2e dev, release; Node $(node --version))" \
        --url "http://127.0.0.1:$port" --token "$token" --database bench_js_mostrador \
        --pickups "$PICKUPS" --graph "$graph" --label typescript
    stop
}

serve_lgjs() {
    local port=18154
    rm -rf "$project/.langgraph_api"
    (cd "$project" && LANGSMITH_TRACING=false exec setsid node_modules/.bin/langgraphjs dev \
        --no-browser --no-reload --host 127.0.0.1 --port "$port" \
        --n-jobs-per-worker "$CONCURRENCY") >"$work/logs/lgjs-rep$rep.log" 2>&1 &
    group=$!
    until_ok "http://127.0.0.1:$port/ok"
    local version
    version=$(cd "$project" && node -p '["@langchain/langgraph-api", "@langchain/langgraph"].map((p) => p + " " + require(p + "/package.json").version).join(", ")')
    drive --server langgraphjs-dev --version "$version (--n-jobs-per-worker $CONCURRENCY)" \
        --url "http://127.0.0.1:$port" --pickups "$LGJS_PICKUPS" --graph "$graph" --label typescript
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
