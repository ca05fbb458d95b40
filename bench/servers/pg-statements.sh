#!/usr/bin/env bash
# Where PostgreSQL's time goes in mostrador's runs, by statement: pg_stat_statements over the
# throughput measurement of drive.py (RUNS runs of `bench_linear_6`, sync, 16 concurrent callers
# through the official SDK, plus 16 warm-up runs) against `mostrador-e2e dev` (release build) on a
# fresh database. Prints one line per statement: calls and milliseconds of execution per run (a
# transaction's COMMIT included: that is where a synchronous commit waits for the WAL), and the
# mean per call; then drive.py's own line (runs/s, CPU per run).
#
# pg_stat_statements must be loaded at server start:
#   psql -c "alter system set shared_preload_libraries = 'pg_stat_statements'" && pg_ctlcluster 15 main restart
# (and `alter system reset shared_preload_libraries` and a restart to undo it).
#
#   cargo build --release -p mostrador-tests --bin mostrador-e2e
#   bench/servers/pg-statements.sh [RUNS]      # RUNS: 400; BIN=path/to/mostrador-e2e for another build
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-400}
export PGHOST=127.0.0.1 PGUSER=postgres
db=bench_statements
bin=${BIN:-target/release/mostrador-e2e}
python=${SDK_PYTHON:-target/sdk-venv/bin/python}
[ -x "$python" ] || { python3 -m venv target/sdk-venv && target/sdk-venv/bin/pip install -q "langgraph-sdk==0.4.*"; }
psql -qX -d postgres -c "create extension if not exists pg_stat_statements" >/dev/null
psql -qX -d postgres -c "drop database if exists $db with (force)" -c "create database $db" >/dev/null
port=18129
export MOSTRADOR_JWT_SECRET=pg-statements-secret
setsid "$bin" dev --database-url "postgres://postgres@127.0.0.1:5432/$db" --listen "127.0.0.1:$port" \
    >target/pg-statements.log 2>&1 &
dev=$!
trap 'kill -TERM -- "-$dev" 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break; sleep 0.1; done
token=$("$bin" token --sub bench --role manager --store s1)
psql -qX -d postgres -c "select pg_stat_statements_reset()" >/dev/null
"$python" bench/servers/drive.py --server mostrador --url "http://127.0.0.1:$port" --token "$token" \
    --graph 'bench_linear_6:6:log:{"delay_ms":0}' --label rust --workloads throughput \
    --runs "$runs" --server-pgid "$dev" --database "$db" --idle-wait-s 20
total=$((runs + 16))
psql -X -d postgres -v total="$total" -v db="$db" <<'SQL'
select round((calls::numeric / :total), 2) as calls_per_run,
       round((total_exec_time / :total)::numeric, 3) as ms_per_run,
       round(mean_exec_time::numeric, 3) as ms_per_call,
       left(regexp_replace(query, '\s+', ' ', 'g'), 110) as statement
from pg_stat_statements
where dbid = (select oid from pg_database where datname = :'db')
order by total_exec_time desc
limit 25;
select round((sum(total_exec_time) / :total)::numeric, 3) as ms_per_run_all,
       round((sum(calls)::numeric / :total), 1) as statements_per_run
from pg_stat_statements
where dbid = (select oid from pg_database where datname = :'db');
SQL
