#!/usr/bin/env bash
# The long haul: real processes for an hour under random faults, and what it cost.
#
# A PostgreSQL cluster of its own (initdb, as the postgres user) behind PgBouncer (Debian's, session
# mode: the pooler a managed database puts in front), one api and three workers of the release
# build connected through the pooler, clients creating runs through the api and streaming a fifth
# of them (reconnecting with Last-Event-ID after every cut, as the SDKs do). Every 15 to 45 s one
# fault, at random: SIGKILL or SIGTERM of a worker (then started again under its name), a restart
# of PostgreSQL, a restart of PgBouncer. One worker (`steady`) and the api are never stopped, so
# their memory at the start and the end compares. tests/e2e/chaos.rs is the client and the judge:
# runs lost, finished supersteps repeated, streams that missed or repeated an event, pickup, memory.
#
#   bench/chaos/run.sh                     # an hour
#   CHAOS_SECONDS=300 bench/chaos/run.sh   # five minutes
#
# env: CHAOS_SECONDS (3600), CHAOS_SEED (the faults' order; default: the clock), PORT (15440:
# PostgreSQL; PgBouncer on PORT+1). Runs as root (the cluster runs as postgres). Prints one JSON
# line of results (also in target/chaos/results.jsonl) and fails if a run was lost, a finished
# superstep ran twice or a stream was wrong.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
work=/tmp/mostrador-chaos
PORT=${PORT:-15440}
POOLER_PORT=$((PORT + 1))
export CHAOS_SECONDS=${CHAOS_SECONDS:-3600}

command -v pgbouncer >/dev/null || apt-get install -y -qq pgbouncer >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq pgbouncer >/dev/null; }
initdb=$(readlink -f "$(command -v initdb)")
bin=$(dirname "$initdb")

stop() {
    [ -f "$work/pgbouncer.pid" ] && kill "$(cat "$work/pgbouncer.pid")" 2>/dev/null || true
    runuser -u postgres -- "$bin/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true
}
trap stop EXIT
stop
rm -rf "$work"
mkdir -p "$work"
chown postgres "$work"
runuser -u postgres -- "$initdb" -D "$work/pg" -U postgres --auth trust >/dev/null
cat >>"$work/pg/postgresql.conf" <<EOF
port = $PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$work'
max_connections = 200
EOF
runuser -u postgres -- "$bin/pg_ctl" -D "$work/pg" -l "$work/pg.log" -w start >/dev/null
psql -h 127.0.0.1 -p "$PORT" -U postgres -qc "create database chaos"

cat >"$work/pgbouncer.ini" <<EOF
[databases]
chaos = host=127.0.0.1 port=$PORT dbname=chaos user=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $POOLER_PORT
auth_type = trust
auth_file = $work/userlist.txt
pool_mode = session
# sqlx sets it at connection start; PgBouncer refuses parameters it does not know of.
ignore_startup_parameters = extra_float_digits
max_client_conn = 400
default_pool_size = 150
logfile = $work/pgbouncer.log
pidfile = $work/pgbouncer.pid
unix_socket_dir =
EOF
echo '"postgres" ""' >"$work/userlist.txt"
chown -R postgres "$work"
runuser -u postgres -- pgbouncer -d "$work/pgbouncer.ini"

SQLX_OFFLINE=true cargo build --release --locked -p mostrador-tests --bin mostrador-e2e
export MOSTRADOR_E2E_BIN=$root/target/release/mostrador-e2e
export CHAOS_DIRECT_URL=postgres://postgres@127.0.0.1:$PORT/chaos
export CHAOS_DATABASE_URL=postgres://postgres@127.0.0.1:$POOLER_PORT/chaos
export CHAOS_PGDATA=$work/pg CHAOS_PG_BIN=$bin CHAOS_PGBOUNCER_INI=$work/pgbouncer.ini
"$MOSTRADOR_E2E_BIN" migrate --database-url "$CHAOS_DIRECT_URL" 2>/dev/null
mkdir -p target/chaos
status=0
SQLX_OFFLINE=true cargo nextest run -p mostrador-tests --locked --run-ignored only \
    -E 'test(chaos_loses_nothing_for_an_hour)' --no-capture >target/chaos/last.log 2>&1 || status=$?
grep -E '^fault ' target/chaos/last.log | tail -n 20 || true
grep '"kind":"chaos"' target/chaos/last.log | tee -a target/chaos/results.jsonl || true
[ $status -eq 0 ] || { tail -n 60 target/chaos/last.log; exit $status; }
