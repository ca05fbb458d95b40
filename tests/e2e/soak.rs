//! A bounded soak: three worker processes, a thousand runs, a rolling restart (SIGTERM) and a
//! crash (SIGKILL) along the way.

use std::time::Duration;

use mostrador_queue::run::{NewRun, enqueue_batch};
use mostrador_queue::thread::{NewThread, create_many};
use serde_json::json;
use sqlx::PgPool;

use crate::support::{Db, Worker};

const RUNS: i64 = 1_000;
const GRAPH: &str = "e2e_linear_5";
/// N.B. The lease is long enough for the heartbeats of live workers to survive a stall of the
/// whole machine (the parallel suite shares two cores): with 2 s (a heartbeat every 667 ms), the
/// three live workers once lost every lease at the same instant, and a run whose last superstep
/// had finished ran it again elsewhere, which the test rightly reports. The kill's runs wait one
/// lease longer to be swept.
pub(crate) const WORKER_ARGS: &[&str] = &[
    "--lease",
    "5s",
    "--max-runs",
    "16",
    "--drain-timeout",
    "10s",
    "--grace-period",
    "15s",
];

/// Waits until `done` runs have succeeded; returns the count of those that ended otherwise.
async fn until_succeeded(db: &Db, done: i64) -> i64 {
    let within = Duration::from_secs(240);
    let waited = tokio::time::timeout(within, async {
        // A progress gauge over a thousand runs, not one event to wait for: sample it.
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            let (succeeded, failed): (i64, i64) = sqlx::query_as(
                "select count(*) filter (where status = 'success'),
                        count(*) filter (where status in ('error', 'timeout', 'interrupted'))
                 from mostrador.runs",
            )
            .fetch_one(&db.pool)
            .await
            .expect("progress");
            if succeeded >= done || failed > 0 {
                return failed;
            }
        }
    })
    .await;
    waited.unwrap_or_else(|_| panic!("{done} runs did not succeed within {within:?}"))
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn soak_every_run_succeeds_through_sigterm_and_sigkill(pool: PgPool) {
    let db = Db::new(pool).await;
    let mut a = Worker::start(&db, "a", WORKER_ARGS);
    let mut b = Worker::start(&db, "b", WORKER_ARGS);
    let _c = Worker::start(&db, "c", WORKER_ARGS);

    let news: Vec<NewThread> = (0..RUNS).map(|_| NewThread::new(GRAPH, "ana")).collect();
    let threads = create_many(&db.pool, &news).await.expect("threads");
    let runs: Vec<NewRun> = threads
        .iter()
        .map(|thread| NewRun {
            input: Some(json!({"delay_ms": 10})),
            ..NewRun::new(thread.thread_id, GRAPH)
        })
        .collect();
    enqueue_batch(&db.pool, &runs, None).await.expect("enqueue");

    assert_eq!(until_succeeded(&db, RUNS / 4).await, 0);
    let killed = b.pid;
    b.kill().await;
    let _b2 = Worker::start(&db, "b2", WORKER_ARGS);

    assert_eq!(until_succeeded(&db, RUNS / 2).await, 0);
    // A is told to stop while it holds runs (on a loaded machine it may hold none at a given
    // instant, and then has nothing to hand back).
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let held: i64 = sqlx::query_scalar(
                "select count(*) from mostrador.runs r
                 join mostrador.workers w on w.worker_id = r.lease_owner
                 where w.name = 'a' and r.status = 'running'",
            )
            .fetch_one(&db.pool)
            .await
            .expect("held");
            if held > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .expect("a holds runs within 30 s");
    a.terminate();
    let exit = a.exit(Duration::from_secs(15)).await;
    assert!(exit.success(), "A drains and exits 0: {exit}\n{}", a.log());
    let _a2 = Worker::start(&db, "a2", WORKER_ARGS);

    assert_eq!(
        until_succeeded(&db, RUNS).await,
        0,
        "every run ends success"
    );

    let (drained, retried): (i64, i64) = sqlx::query_as(
        "select sum(drain_count)::bigint, sum(attempt - drain_count - 1)::bigint from mostrador.runs",
    )
    .fetch_one(&db.pool)
    .await
    .expect("stats");
    assert!(drained > 0, "the SIGTERM handed runs back");
    assert!(retried > 0, "the SIGKILL left runs to sweep");

    // Only the tasks the SIGKILL interrupted ran again: every start but a node's last is the
    // killed worker's.
    let repeated: Vec<(uuid::Uuid, String, Vec<i32>)> = sqlx::query_as(
        "select thread_id, node, array_agg(pid order by id)
         from e2e_executions where phase = 'start'
         group by thread_id, node having count(*) > 1",
    )
    .fetch_all(&db.pool)
    .await
    .expect("repeats");
    let killed = i32::try_from(killed).expect("pid");
    for (thread_id, node, pids) in &repeated {
        assert!(
            pids[..pids.len() - 1].iter().all(|pid| *pid == killed),
            "{node} of {thread_id} ran again though its worker was not killed: {pids:?}"
        );
    }
    let supersteps: i64 =
        sqlx::query_scalar("select count(distinct (thread_id, node)) from e2e_executions")
            .fetch_one(&db.pool)
            .await
            .expect("supersteps");
    assert_eq!(supersteps, RUNS * 5, "every superstep of every run ran");

    // Every run's events are numbered 1..n without a gap, and end with `end`.
    let gapped: Vec<(uuid::Uuid, i64, i64)> = sqlx::query_as(
        "select r.run_id, count(e.seq), coalesce(max(e.seq), 0)
         from mostrador.runs r left join mostrador.run_events e using (run_id)
         group by r.run_id
         having count(e.seq) <> coalesce(max(e.seq), 0)
             or count(e.seq) = 0
             or bool_or(e.seq = 1) is not true
             or (array_agg(e.event order by e.seq desc))[1] <> 'end'",
    )
    .fetch_all(&db.pool)
    .await
    .expect("event gaps");
    assert!(
        gapped.is_empty(),
        "runs with gaps in their events: {gapped:?}"
    );
    eprintln!(
        "{RUNS} runs: {drained} handed back by the drain, {retried} retried after the kill, \
         {} supersteps ran twice",
        repeated.len()
    );
}
