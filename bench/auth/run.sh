#!/usr/bin/env bash
# Custom auth (auth.path) side by side: the same trivial auth.py served by the official in-memory
# server (`langgraph dev`) and by mostrador, 16 callers creating and reading threads through the
# official SDK (drive.py); and mostrador without handlers (a JWT per request) for what the
# handlers add. REPS reps, the order rotating. Results: target/bench-auth/results.jsonl.
#
#   cargo build --release -p mostrador-tests --bin mostrador-e2e
#   bench/auth/run.sh                      # REPS=3 SECONDS=20 by default
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=$(cd "${PYTHON_GRAPHS_VENV:-target/python-graphs-venv}" && pwd)
bin=$(realpath "${MOSTRADOR_BIN:-target/release/mostrador-e2e}")
reps=${REPS:-3}
seconds=${SECONDS_PER_RUN:-20}
out=$(pwd)/target/bench-auth
mkdir -p "$out/logs"
python=$(cd "$(dirname "$venv/bin/python")" && pwd)/python
project=$(pwd)/bench/auth
secret=bench-auth-secret
database=mostrador_bench_auth
pids=()
trap 'for pid in "${pids[@]}"; do kill -- -"$pid" 2>/dev/null || true; done' EXIT

wait_ok() {
    for _ in $(seq 1 240); do
        curl -fs "http://127.0.0.1:$1/ok" >/dev/null && return 0
        sleep 0.5
    done
    echo "the server on :$1 did not start" >&2
    return 1
}

fresh_database() {
    psql -q -h 127.0.0.1 -U postgres -c "drop database if exists $database with (force)" >/dev/null
    psql -q -h 127.0.0.1 -U postgres -c "create database $database" >/dev/null
}

serve() {  # name, port, folder, command...
    local name=$1 port=$2 folder=$3
    shift 3
    (cd "$folder" && exec setsid "$@") >"$out/logs/$name.log" 2>&1 &
    pids+=($!)
    wait_ok "$port"
}

stop() {
    kill -- -"${pids[-1]}" 2>/dev/null || true
    wait "${pids[-1]}" 2>/dev/null || true
    unset 'pids[-1]'
}

drive() {  # server, port, token-of: throughput at 16 callers, then latency at one
    "$python" "$project/drive.py" --url "http://127.0.0.1:$2" --server "$1" --token-of "$3" \
        --seconds "$seconds" --session "${pids[-1]}" | tee -a "$out/results.jsonl"
    "$python" "$project/drive.py" --url "http://127.0.0.1:$2" --server "$1" --token-of "$3" \
        --seconds "$((seconds / 2))" --callers 1 | tee -a "$out/results.jsonl"
}

official() {
    local dir port=8391
    dir=$(mktemp -d)
    cp bench/auth/auth.py bench/auth/graph.py bench/auth/langgraph.json "$dir/"
    serve official $port "$dir" "$venv/bin/langgraph" dev --no-browser --no-reload --port $port \
        --n-jobs-per-worker 16 --config langgraph.json
    drive official $port 'user{i}-token'
    stop
    rm -rf "$dir"
}

mostrador_handlers() {
    local port=8392
    fresh_database
    serve mostrador-auth $port . "$bin" dev --database-url "postgres://postgres@127.0.0.1/$database" \
        --listen 127.0.0.1:$port --config "$project/langgraph.json" --python "$python"
    drive mostrador-auth $port 'user{i}-token'
    stop
}

mostrador_jwt() {
    local port=8393 token
    fresh_database
    token=$(MOSTRADOR_JWT_SECRET=$secret "$bin" token --sub bench-user)
    MOSTRADOR_JWT_SECRET=$secret serve mostrador-jwt $port . "$bin" dev \
        --database-url "postgres://postgres@127.0.0.1/$database" --listen 127.0.0.1:$port \
        --config "$project/langgraph-noauth.json" --python "$python" --require-credentials
    drive mostrador-jwt $port "$token"
    stop
}

order=(official mostrador_handlers mostrador_jwt)
for rep in $(seq 1 "$reps"); do
    for i in 0 1 2; do
        "${order[$(((i + rep) % 3))]}"
    done
done
