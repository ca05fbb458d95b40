#!/usr/bin/env bash
# Semantic search over the store (store.index) side by side: the same project (1,536-dimension
# embeddings, bench/store/embeddings.py) served by the official in-memory server (`langgraph dev`,
# with numpy, which its store uses when it is there) and by mostrador; 10,000 memories of one user
# put through the official SDK, then 50 searches with a query (drive.py). REPS reps, the order
# alternating. Results: target/bench-store/results.jsonl.
#
#   cargo build --release -p mostrador-tests --bin mostrador-e2e
#   bench/store/run.sh                      # REPS=2 ITEMS=10000 SEARCHES=50 by default
set -euo pipefail
cd "$(dirname "$0")/../.."
# The official server's own environment, with numpy (its store's fast path); mostrador's runner
# and helpers do not use it.
venv=target/bench-store-venv
if [ ! -x "$venv/bin/langgraph" ] || ! "$venv/bin/python" -c 'import numpy' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "langgraph==1.2.*" "langchain-core==1.*" "langgraph-sdk==0.4.*" \
        "langgraph-cli[inmem]==0.4.*" numpy
fi
venv=$(cd "$venv" && pwd)
bin=$(realpath "${MOSTRADOR_BIN:-target/release/mostrador-e2e}")
reps=${REPS:-2}
items=${ITEMS:-10000}
searches=${SEARCHES:-50}
out=$(pwd)/target/bench-store
mkdir -p "$out/logs"
python=$venv/bin/python
project=$(pwd)/bench/store
database=mostrador_bench_store
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

drive() {  # server, port
    "$python" "$project/drive.py" --url "http://127.0.0.1:$2" --server "$1" --items "$items" \
        --searches "$searches" --session "${pids[-1]}" | tee -a "$out/results.jsonl"
}

official() {
    local dir port=8394
    dir=$(mktemp -d)
    cp "$project"/{embeddings.py,graph.py,langgraph.json} "$dir/"
    serve official $port "$dir" "$venv/bin/langgraph" dev --no-browser --no-reload --port $port \
        --config langgraph.json
    drive official $port
    stop
    rm -rf "$dir"
}

mostrador() {
    local port=8395
    psql -q -h 127.0.0.1 -U postgres -c "drop database if exists $database with (force)" >/dev/null
    psql -q -h 127.0.0.1 -U postgres -c "create database $database" >/dev/null
    serve mostrador $port . "$bin" dev --database-url "postgres://postgres@127.0.0.1/$database" \
        --listen 127.0.0.1:$port --config "$project/langgraph.json" --python "$python"
    drive mostrador $port
    stop
}

for rep in $(seq 1 "$reps"); do
    if ((rep % 2)); then official; mostrador; else mostrador; official; fi
done
