#!/usr/bin/env bash
# Token latency, side by side in one invocation: a local OpenAI-compatible model (fake_model.py)
# streams TOKENS tokens INTERVAL seconds apart, each carrying the time it was sent; the same
# Python graph (graph.py: one langchain-openai node) is served by mostrador (`mostrador dev
# --config --python`), Aegra and, optionally, the official in-memory server (`langgraph dev`);
# the same official SDK client (client.py) streams `messages-tuple` and measures each token's
# latency (received minus sent) and the first token's (after the request creating the run).
# One JSON line per server and concurrency, then mostrador / Aegra against the targets.
#
#   MOSTRADOR_BIN=target/release/mostrador bench/tokens/run.sh      # mostrador aegra lgapi
#   CONCURRENCY=16 bench/tokens/run.sh mostrador aegra
#
# env: CONCURRENCY="1 16" (runs streamed at once; one measurement for each, a list is allowed)
#      RUNS (runs per server and concurrency; default 10 at 1, 32 at 16, else max(10, 2 x C))
#      WARMUP (untimed runs first, as many at once; default: the concurrency)
#      TOKENS=50 INTERVAL=0.02 (the model's tokens and the seconds between them)
#      IDLE_WAIT=60 (seconds each measurement waits, at most, for the CPUs to be idle)
#      MOSTRADOR_BIN=target/release/mostrador (any binary with `dev --config --python`)
#      MOSTRADOR_DB_OPTIONS (PostgreSQL settings for mostrador's every connection, URL-encoded:
#      `-c%20synchronous_commit%3Doff` measures what the durable commit costs a token)
#      PEERS=../shared/peers (the peers' harness, whose venvs are reused)
#      PYTHON312 (the interpreter new venvs are made with: Aegra needs Python 3.12)
#      OUT=target/bench-tokens/results.jsonl (appended to)
# Needs PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth): the databases
# bench_tokens_mostrador and bench_tokens_aegra are dropped and recreated for each measurement.
# Ports 18170 (model), 18171 (mostrador), 18172 (Aegra), 18173 (langgraph dev), loopback only.
# Each server runs in its own process group and is stopped by that group's id.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
absolute() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }  # from the caller's folder
[ -z "${MOSTRADOR_BIN:-}" ] || MOSTRADOR_BIN=$(absolute "$MOSTRADOR_BIN")
[ -z "${PEERS:-}" ] || PEERS=$(absolute "$PEERS")
[ -z "${OUT:-}" ] || OUT=$(absolute "$OUT")
[ -z "${PYTHON312:-}" ] || [[ $PYTHON312 != */* ]] || PYTHON312=$(absolute "$PYTHON312")
cd "$root"
CONCURRENCY=${CONCURRENCY:-1 16}
TOKENS=${TOKENS:-50}
INTERVAL=${INTERVAL:-0.02}
IDLE_WAIT=${IDLE_WAIT:-60}
MOSTRADOR_BIN=${MOSTRADOR_BIN:-$root/target/release/mostrador}
PEERS=${PEERS:-$root/../shared/peers}
PEERS=$(cd "$PEERS" && pwd)
work=$root/target/bench-tokens
OUT=${OUT:-$work/results.jsonl}
PG=postgres://postgres@127.0.0.1:5432
MODEL_PORT=18170
servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(mostrador aegra lgapi)
for s in "${servers[@]}"; do
    case $s in mostrador | aegra | lgapi) ;; *) echo "unknown server: $s (mostrador aegra lgapi)" >&2; exit 2 ;; esac
done
has() { [[ " ${servers[*]} " == *" $1 "* ]]; }
mkdir -p "$work/logs" "$work/run" "$work/peers"

# --- the peers' environments, as their run.sh makes them -------------------------------------
python312=${PYTHON312:-}
if [ -z "$python312" ]; then
    for p in /root/.pyenv/versions/3.12.1/bin/python3.12 "$(command -v python3.12 || true)"; do
        [ -n "$p" ] && "$p" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && { python312=$p; break; }
    done
fi
[ -n "$python312" ] || { echo "no Python 3.12 (set PYTHON312)" >&2; exit 2; }
# The shared copy may hold, where a symlink was meant, a text file whose content is the relative
# path it should point to: such a file is followed and the real one copied into $work/peers/.
real_file() {  # path -> the path of a file with the real content
    local f=$1 target n=0
    while [ ! -L "$f" ] && [ "$(wc -c <"$f")" -lt 512 ] && [ "$(wc -l <"$f")" -le 1 ]; do
        target=$(tr -d '\n' <"$f")
        [[ $target =~ ^[A-Za-z0-9._/-]+$ ]] && [ -f "$(dirname "$f")/$target" ] || break
        f=$(dirname "$f")/$target
        n=$((n + 1))
        [ $n -lt 8 ] || break
    done
    if [ "$f" = "$1" ]; then
        echo "$f"
    else
        local copy
        copy=$work/peers/$(basename "$(dirname "$1")")-$(basename "$1")
        cp "$f" "$copy"
        echo "$copy"
    fi
}
peer_venv() {  # peer folder, a module the venv must import, a program it must have
    local dir=$PEERS/$1
    if ! "$dir/.venv/bin/python" -c "import $2" 2>/dev/null || [ ! -x "$dir/.venv/bin/$3" ]; then
        [ -x "$dir/.venv/bin/python" ] || "$python312" -m venv "$dir/.venv"
        "$dir/.venv/bin/pip" install -q -r "$(real_file "$dir/requirements.lock.txt")"
    fi
}
with_openai() {  # venv: the graph's model client, beside the venv's own langchain-core
    "$1/bin/python" -c 'import langchain_openai' 2>/dev/null ||
        "$1/bin/pip" install -q "langchain-openai==1.*" \
            "langchain-core==$("$1/bin/python" -c 'import langchain_core; print(langchain_core.__version__)')"
}
peer_venv e2e langgraph_sdk python            # the client
client_py=$PEERS/e2e/.venv/bin/python
if has mostrador || has lgapi; then          # mostrador's runners and langgraph dev
    peer_venv langgraph-api langgraph_api langgraph
    with_openai "$PEERS/langgraph-api/.venv"
fi
if has aegra; then
    peer_venv aegra langgraph.checkpoint.postgres aegra
    with_openai "$PEERS/aegra/.venv"
fi
graphs_py=$PEERS/langgraph-api/.venv/bin/python
if has mostrador; then
    [ -x "$MOSTRADOR_BIN" ] || { echo "no mostrador binary at $MOSTRADOR_BIN (set MOSTRADOR_BIN)" >&2; exit 2; }
fi

# Every server runs from one working folder holding the same graph and configurations.
cp "$here/graph.py" "$here/langgraph.json" "$here/aegra.json" "$work/run/"
export OPENAI_BASE_URL=http://127.0.0.1:$MODEL_PORT/v1 OPENAI_API_KEY=x TOKENS INTERVAL
export LANGSMITH_TRACING=false LANGCHAIN_TRACING_V2=false LANGGRAPH_CLI_NO_ANALYTICS=1

# --- processes ---------------------------------------------------------------------------------
group="" model="" this_time=""
stop() {
    if [ -n "$group" ]; then
        kill -TERM -- "-$group" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 -- "-$group" 2>/dev/null || break; sleep 0.1; done
        kill -KILL -- "-$group" 2>/dev/null || true
        group=""
    fi
}
finish() {
    stop
    if [ -n "$model" ]; then kill -TERM -- "-$model" 2>/dev/null || true; model=""; fi
    [ -z "$this_time" ] || rm -f "$this_time"
}
trap finish EXIT
trap 'exit 130' INT TERM
until_ok() {  # curl arguments
    for _ in $(seq 240); do
        curl -fs -o /dev/null "$@" && return 0
        kill -0 -- "-$group" 2>/dev/null || { echo "the server stopped: $*" >&2; return 1; }
        sleep 0.5
    done
    echo "not ready: $*" >&2
    return 1
}
port_free() {
    if curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$1/"; then
        echo "port $1 is in use: stop what listens there first" >&2
        return 1
    fi
}
fresh_db() {
    psql -q "$PG/postgres" -c "drop database if exists $1 with (force)" -c "create database $1" 2>&1 |
        grep -v NOTICE || true
}

port_free $MODEL_PORT
(exec setsid "$client_py" "$here/fake_model.py" $MODEL_PORT) >"$work/logs/model.log" 2>&1 &
model=$!
for _ in $(seq 100); do curl -fs -o /dev/null "$OPENAI_BASE_URL/models" && break; sleep 0.1; done
curl -fs -o /dev/null "$OPENAI_BASE_URL/models" || { echo "the model did not start" >&2; exit 1; }

this_time=$(mktemp --suffix=.jsonl "$work/invocation.XXXXXX")
failed=0
measure() {  # server name, version, url, api key, concurrency, runs
    if ! "$client_py" "$here/client.py" measure --server "$1" --version "$2" --url "$3" \
        --api-key "$4" --concurrency "$5" --runs "$6" --warmup "${WARMUP:-$5}" --tokens "$TOKENS" \
        --idle-wait "$IDLE_WAIT" | tee -a "$this_time" "$OUT"; then
        echo "$1 at concurrency $5: some runs failed (see the line above and $work/logs/)" >&2
        failed=1
    fi
}

serve_mostrador() {  # concurrency, runs
    local port=18171 log=$work/logs/mostrador-c$1.log key=""
    port_free $port
    fresh_db bench_tokens_mostrador
    (cd "$work/run" && exec setsid "$MOSTRADOR_BIN" dev --config "$work/run/langgraph.json" \
        --python "$graphs_py" --database-url "$PG/bench_tokens_mostrador${MOSTRADOR_DB_OPTIONS:+?options=$MOSTRADOR_DB_OPTIONS}" \
        --listen "127.0.0.1:$port") >"$log" 2>&1 &
    group=$!
    until_ok "http://127.0.0.1:$port/ok"
    for _ in $(seq 100); do
        key=$(grep -oE 'api key: mostrador_[A-Za-z0-9_-]+' "$log" | head -n1 | cut -d' ' -f3) || true
        [ -n "$key" ] && break
        sleep 0.1
    done
    [ -n "$key" ] || { echo "no API key in $log" >&2; return 1; }
    # Ready once a runner has loaded the Python graph and described it.
    until_ok -H "x-api-key: $key" "http://127.0.0.1:$port/assistants/chat/graph"
    measure mostrador "mostrador $(git rev-parse --short HEAD 2>/dev/null || echo '?') ($(basename "$MOSTRADOR_BIN") dev)" \
        "http://127.0.0.1:$port" "$key" "$1" "$2"
    stop
}

serve_aegra() {
    local port=18172
    port_free $port
    fresh_db bench_tokens_aegra
    (cd "$work/run" && DATABASE_URL=$PG/bench_tokens_aegra exec setsid "$PEERS/aegra/.venv/bin/aegra" \
        serve --host 127.0.0.1 --port "$port" --config "$work/run/aegra.json") \
        >"$work/logs/aegra-c$1.log" 2>&1 &
    group=$!
    until_ok "http://127.0.0.1:$port/health"
    measure aegra "$("$PEERS/aegra/.venv/bin/python" -c 'import importlib.metadata as m; print("aegra-api", m.version("aegra-api"), "langgraph", m.version("langgraph"), "langchain-openai", m.version("langchain-openai"))')" \
        "http://127.0.0.1:$port" "" "$1" "$2"
    stop
}

serve_lgapi() {
    local port=18173
    port_free $port
    rm -rf "$work/run/.langgraph_api"
    # langgraph dev takes one run at a time unless told otherwise.
    (cd "$work/run" && exec setsid "$PEERS/langgraph-api/.venv/bin/langgraph" dev --no-browser \
        --no-reload --host 127.0.0.1 --port "$port" --n-jobs-per-worker "$1" \
        --config "$work/run/langgraph.json") >"$work/logs/lgapi-c$1.log" 2>&1 &
    group=$!
    until_ok "http://127.0.0.1:$port/ok"
    measure langgraph-dev "$("$graphs_py" -c 'import importlib.metadata as m; print("langgraph-api", m.version("langgraph-api"), "inmem", m.version("langgraph-runtime-inmem"), "langgraph", m.version("langgraph"))') --n-jobs-per-worker $1" \
        "http://127.0.0.1:$port" "" "$1" "$2"
    stop
}

for c in ${CONCURRENCY//,/ }; do
    case $c in 1) runs=10 ;; 16) runs=32 ;; *) runs=$((2 * c > 10 ? 2 * c : 10)) ;; esac
    runs=${RUNS:-$runs}
    for s in "${servers[@]}"; do
        echo "=== $s, concurrency $c, $runs runs ($(date -Is); load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
        "serve_$s" "$c" "$runs"
    done
done
"$client_py" "$here/client.py" ratio "$this_time" | tee -a "$OUT"
exit $failed
