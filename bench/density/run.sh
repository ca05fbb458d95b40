#!/usr/bin/env bash
# Density: how many I/O-bound agents one machine holds. RUNS runs submitted at once, each on a new
# thread, of the peers' Python graph `l1` (one node that waits DELAY_MS: a model call's wait), on
#   mostrador  one `api` and one `worker --max-runs RUNS` process (+ WORKER_ARGS), a fresh database;
#              two bursts: the first on a fresh worker and a second one on the same processes
#   lgapi      the official server in memory, `langgraph dev --n-jobs-per-worker RUNS`, a fresh
#              .langgraph_api/; one burst
# one after the other, with the same client (iobound.py beside this file, langgraph-sdk). Each
# burst prints a JSON line: wall time until every run ended, and peak resident memory summed over
# every process of the server (mostrador: api, worker and each Python runner). With both servers,
# a last line gives mostrador ÷ official for wall time and peak memory, against the targets.
#
# usage: MOSTRADOR_BIN=target/release/mostrador bench/density/run.sh [mostrador] [lgapi]
# env:   RUNS=1000 DELAY_MS=5000
#        WORKER_ARGS=""          more `mostrador worker` flags, e.g. "--python-isolation run" or
#                                "--python-processes 4" (the default: shared, one per core)
#        WORKER_POOL_SIZE=64     the worker's --pool-size (its default, max runs + 4, is more than
#                                PostgreSQL's max_connections = 100 here)
#        CREATORS=64             creates in flight at most (joins are not limited)
#        RUNS_PER_CLIENT=10      runs per SDK client (each with as many connections)
#        QUIET_WAIT_S=60         before each burst, wait at most this long for an idle machine
#        PYTHON312               the interpreter for the venvs if they are missing
#        OUT=target/bench-density  where results.jsonl and logs/ go
# Needs PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth); drops and recreates the
# database bench_density_mostrador. Loopback only. Each server runs in process groups of its own
# and is stopped by their ids.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PEERS=${PEERS:-$(cd "$ROOT/../shared/peers" && pwd)}
RUNS=${RUNS:-1000}
DELAY_MS=${DELAY_MS:-5000}
WORKER_POOL_SIZE=${WORKER_POOL_SIZE:-64}
CREATORS=${CREATORS:-64}
RUNS_PER_CLIENT=${RUNS_PER_CLIENT:-10}
QUIET_WAIT_S=${QUIET_WAIT_S:-60}
read -r -a WORKER_EXTRA <<< "${WORKER_ARGS:-}"
OUT=${OUT:-$ROOT/target/bench-density}
PG=postgres://postgres@127.0.0.1:5432
# LANGUAGE=typescript: the same graphs in TypeScript (bench/js/graphs.ts), run by mostrador's
# Node.js runners and by the official JS server (`lgjs`: langgraphjs dev) in place of `lgapi`.
LANGUAGE=${LANGUAGE:-python}
SERVERS=("$@")
if [ ${#SERVERS[@]} -eq 0 ]; then
  if [ "$LANGUAGE" = typescript ]; then SERVERS=(mostrador lgjs); else SERVERS=(mostrador lgapi); fi
fi
for s in "${SERVERS[@]}"; do
  case $s in mostrador | lgapi | lgjs) ;; *) echo "unknown server: $s (mostrador, lgapi, lgjs)" >&2; exit 2 ;; esac
done
API_PORT=18141 WORKER_PORT=18142 LGAPI_PORT=18143

# --- the peers' venvs, where their harness keeps them, from their lock files if missing ------
python312() {  # the first interpreter that runs and is >= 3.11 (the lock files are 3.12's)
  local c
  for c in ${PYTHON312:-} python3.12 "$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12 python3; do
    "$c" -c 'import sys; assert sys.version_info >= (3, 11)' >/dev/null 2>&1 && { echo "$c"; return; }
  done
  echo "no Python >= 3.11 found (set PYTHON312)" >&2; return 1
}
for d in e2e langgraph-api; do
  if [ ! -x "$PEERS/$d/.venv/bin/python" ]; then
    py=$(python312)
    "$py" -m venv "$PEERS/$d/.venv"
    "$PEERS/$d/.venv/bin/pip" install -q -r "$PEERS/$d/requirements.lock.txt"
  fi
done
CLIENT_PY=$PEERS/e2e/.venv/bin/python
GRAPHS_PY=$PEERS/langgraph-api/.venv/bin/python

# --- the project both servers load: the peers' langgraph.json and graphs.py (l1, l6), copied --
# (../shared/peers/langgraph-api/graphs.py is a symlink to ../e2e/graphs.py in the peers' repo,
# but a copy of shared/ may hold it as a file with the link's text; and `langgraph dev` keeps its
# state, .langgraph_api/, in its working directory: ours, not shared/.)
PROJECT=$OUT/project-$LANGUAGE
rm -rf "$PROJECT"
mkdir -p "$OUT/logs" "$PROJECT"
if [ "$LANGUAGE" = typescript ]; then
  # The TypeScript twins, with tests/langgraphjs/project's pinned node_modules.
  JS_MODULES=$ROOT/tests/langgraphjs/project
  if [ ! -d "$JS_MODULES/node_modules/@langchain/langgraph-cli" ]; then
    (cd "$JS_MODULES" && npm ci --no-audit --no-fund --silent --legacy-peer-deps)
  fi
  cp "$ROOT/bench/js/graphs.ts" "$JS_MODULES/package.json" "$PROJECT/"
  ln -s "$JS_MODULES/node_modules" "$PROJECT/node_modules"
  cat > "$PROJECT/langgraph.json" <<'EOF'
{
  "node_version": "20",
  "graphs": {
    "l1": "./graphs.ts:l1",
    "l6": "./graphs.ts:l6"
  }
}
EOF
else
  cp "$PEERS/e2e/graphs.py" "$PROJECT/graphs.py"
  cat > "$PROJECT/langgraph.json" <<'EOF'
{
  "dependencies": ["."],
  "graphs": {
    "l1": "./graphs.py:l1",
    "l6": "./graphs.py:l6"
  }
}
EOF
fi
CONFIG=$PROJECT/langgraph.json
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
LINES=$(mktemp)   # this invocation's lines, for the ratio

# --- process groups ----------------------------------------------------------------------------
GROUPS_UP=()
stop() {
  local g
  for g in "${GROUPS_UP[@]}"; do kill -TERM -- "-$g" 2>/dev/null || true; done
  for _ in $(seq 1 150); do
    local alive=0
    for g in "${GROUPS_UP[@]}"; do kill -0 -- "-$g" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.2
  done
  for g in "${GROUPS_UP[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  GROUPS_UP=()
}
trap 'stop; rm -f "$LINES"' EXIT
ready() {  # url, log: 2 minutes at most, or until a group of the server has ended
  local g
  for _ in $(seq 1 240); do
    curl -fs "$1" >/dev/null 2>&1 && return 0
    for g in "${GROUPS_UP[@]}"; do
      kill -0 -- "-$g" 2>/dev/null || { echo "a server process ended; $2:" >&2; tail -n 20 "$2" >&2; return 1; }
    done
    sleep 0.5
  done
  echo "not ready: $1; $2:" >&2; tail -n 20 "$2" >&2; return 1
}
burst() {  # name, burst, url, [token]; the server's groups are GROUPS_UP
  local args=(--server "$1" --burst "$2" --url "$3" --runs "$RUNS" --delay-ms "$DELAY_MS" --creators "$CREATORS"
    --runs-per-client "$RUNS_PER_CLIENT" --quiet-wait-s "$QUIET_WAIT_S")
  [ -n "${4:-}" ] && args+=(--token "$4")
  local g
  for g in "${GROUPS_UP[@]}"; do args+=(--pgid "$g"); done
  "$CLIENT_PY" "$HERE/iobound.py" "${args[@]}" | tee -a "$LINES" "$OUT/results.jsonl"
}

for s in "${SERVERS[@]}"; do
  case $s in
  mostrador)
    B=${MOSTRADOR_BIN:?set MOSTRADOR_BIN to a release mostrador binary}
    PGOPTIONS=--client-min-messages=warning psql "$PG/postgres" \
      -qc "drop database if exists bench_density_mostrador with (force)" \
      -c "create database bench_density_mostrador"
    db=$PG/bench_density_mostrador
    "$B" migrate --database-url "$db" > "$OUT/logs/$STAMP-mostrador-migrate.log" 2>&1
    # Each in a session (and process group) of its own, with no shell between: the sampler sums
    # the groups, the runners (the worker's children) included.
    setsid "$B" api --database-url "$db" --jwt-secret density-secret --listen "127.0.0.1:$API_PORT" \
      --config "$CONFIG" --policy /dev/null \
      --max-pending-per-caller 1000000 --max-streams-per-caller 1000000 \
      > "$OUT/logs/$STAMP-mostrador-api.log" 2>&1 &
    GROUPS_UP+=($!)
    setsid "$B" worker --database-url "$db" --config "$CONFIG" --python "$GRAPHS_PY" --graphs l1 \
      --max-runs "$RUNS" --pool-size "$WORKER_POOL_SIZE" --listen "127.0.0.1:$WORKER_PORT" \
      "${WORKER_EXTRA[@]}" \
      > "$OUT/logs/$STAMP-mostrador-worker.log" 2>&1 &
    GROUPS_UP+=($!)
    ready "http://127.0.0.1:$API_PORT/ok" "$OUT/logs/$STAMP-mostrador-api.log"
    ready "http://127.0.0.1:$WORKER_PORT/ready" "$OUT/logs/$STAMP-mostrador-worker.log"
    tok=$("$B" token --jwt-secret density-secret --sub bench --role customer --store s1 | tail -n1)
    name="mostrador $LANGUAGE max-runs=$RUNS${WORKER_ARGS:+ $WORKER_ARGS}"
    burst "$name" first "http://127.0.0.1:$API_PORT" "$tok"
    burst "$name" second "http://127.0.0.1:$API_PORT" "$tok" ;;
  lgapi)
    rm -rf "$PROJECT/.langgraph_api"
    (cd "$PROJECT" && LANGGRAPH_CLI_NO_ANALYTICS=1 LANGSMITH_TRACING=false exec setsid \
      "$PEERS/langgraph-api/.venv/bin/langgraph" dev --no-browser --no-reload --host 127.0.0.1 \
      --port "$LGAPI_PORT" --n-jobs-per-worker "$RUNS") > "$OUT/logs/$STAMP-lgapi.log" 2>&1 &
    GROUPS_UP+=($!)
    ready "http://127.0.0.1:$LGAPI_PORT/ok" "$OUT/logs/$STAMP-lgapi.log"
    burst "langgraph-api inmem n-jobs=$RUNS" first "http://127.0.0.1:$LGAPI_PORT" ;;
  lgjs)
    rm -rf "$PROJECT/.langgraph_api"
    (cd "$PROJECT" && LANGSMITH_TRACING=false exec setsid node_modules/.bin/langgraphjs dev \
      --no-browser --no-reload --host 127.0.0.1 --port "$LGAPI_PORT" --n-jobs-per-worker "$RUNS") \
      > "$OUT/logs/$STAMP-lgjs.log" 2>&1 &
    GROUPS_UP+=($!)
    ready "http://127.0.0.1:$LGAPI_PORT/ok" "$OUT/logs/$STAMP-lgjs.log"
    burst "langgraph-api (JS) inmem n-jobs=$RUNS" first "http://127.0.0.1:$LGAPI_PORT" ;;
  esac
  stop
done

# --- mostrador ÷ official --------------------------------------------------------------------
"$CLIENT_PY" - "$LINES" <<'EOF' | tee -a "$OUT/results.jsonl"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
most = [r for r in rows if r["server"].startswith("mostrador")]
off = [r for r in rows if r["server"].startswith("langgraph-api")]
official = off[0]["server"].split(" inmem")[0] if off else ""
if most and off:
    o = off[0]
    wall = {r["burst"]: round(r["wall_s"] / o["wall_s"], 2) for r in most}
    rss = round(max(r["peak_rss_mib"] for r in most) / o["peak_rss_mib"], 2)
    pss = round(max(r["peak_pss_mib"] for r in most) / o["peak_pss_mib"], 2)
    complete = all(r["success"] == r["runs"] for r in most + off)
    print(json.dumps({
        "ratio": f"mostrador / {official}", "runs": o["runs"], "delay_ms": o["delay_ms"],
        "wall": wall, "peak_rss": rss, "peak_pss": pss, "targets": {"wall": 1.2, "peak_rss": 2.0},
        "all_runs_succeeded": complete,
        "met": complete and max(wall.values()) <= 1.2 and rss <= 2.0,
    }))
EOF
