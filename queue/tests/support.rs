//! What the tests share: threads, runs and workers in one line each, and time moved with SQL.

use std::future::Future;
use std::time::Duration;

use mostrador_queue::run::{self, NewRun, Run};
use mostrador_queue::thread::{self, NewThread, Thread};
use mostrador_queue::{ClaimedRun, RunId, WorkerLease, claim};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

pub const GRAPH: &str = "tienda";

/// Generous bound on any single wait in a test; reaching it is a failure, not a pass.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub fn graphs() -> Vec<String> {
    vec![GRAPH.to_owned()]
}

pub async fn new_thread(pool: &PgPool) -> Thread {
    thread::create(pool, &NewThread::new(GRAPH, "ana").tenant("madrid-centro"))
        .await
        .expect("create thread")
}

pub async fn enqueue(pool: &PgPool, new: NewRun) -> Run {
    run::enqueue(pool, &new, None).await.expect("enqueue").run
}

/// A run on a thread of its own.
pub async fn new_run(pool: &PgPool) -> Run {
    let thread = new_thread(pool).await;
    enqueue(pool, NewRun::new(thread.thread_id, GRAPH)).await
}

/// `n` runs, each on a thread of its own, enqueued in one batch.
pub async fn new_runs(pool: &PgPool, n: usize) -> Vec<RunId> {
    let threads = thread::create_many(pool, &vec![NewThread::new(GRAPH, "ana"); n])
        .await
        .expect("create threads");
    let news: Vec<NewRun> = threads
        .iter()
        .map(|t| NewRun::new(t.thread_id, GRAPH))
        .collect();
    run::enqueue_batch(pool, &news, None)
        .await
        .expect("enqueue")
}

pub async fn new_worker(pool: &PgPool) -> WorkerLease {
    let worker = WorkerLease::new("test-worker", graphs(), Duration::from_secs(30));
    worker.register(pool).await.expect("register worker");
    worker
}

pub async fn claim_one(pool: &PgPool, worker: &WorkerLease) -> Option<ClaimedRun> {
    let mut claimed = claim(pool, worker.worker_id, &graphs(), 1)
        .await
        .expect("claim");
    claimed.pop()
}

/// Ends the worker's lease an hour ago, as if it had stopped heartbeating.
pub async fn expire(pool: &PgPool, worker: &WorkerLease) {
    sqlx::query(
        "update mostrador.workers set expires_at = now() - interval '1 hour' where worker_id = $1",
    )
    .bind(worker.worker_id.0)
    .execute(pool)
    .await
    .expect("expire worker");
}

/// Makes every pending run due now, as if its backoff had passed.
pub async fn make_due(pool: &PgPool) {
    sqlx::query("update mostrador.runs set available_at = now() where status = 'pending'")
        .execute(pool)
        .await
        .expect("make runs due");
}

pub async fn count_runs(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from mostrador.runs")
        .fetch_one(pool)
        .await
        .expect("count runs")
}

pub async fn event_names(pool: &PgPool, run_id: RunId) -> Vec<String> {
    sqlx::query_scalar("select event from mostrador.run_events where run_id = $1 order by seq")
        .bind(run_id.0)
        .fetch_all(pool)
        .await
        .expect("read events")
}

/// A second pool on the test's database, sized for `n` concurrent clients.
pub async fn wide_pool(pool: &PgPool, n: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(n)
        .connect_with(pool.connect_options().as_ref().clone())
        .await
        .expect("connect wide pool")
}

/// Awaits `future` for at most [`PATIENCE`].
#[track_caller]
pub fn within<F: Future>(future: F) -> impl Future<Output = F::Output> {
    let caller = std::panic::Location::caller();
    async move {
        match tokio::time::timeout(PATIENCE, future).await {
            Ok(output) => output,
            Err(_) => panic!("timed out after {PATIENCE:?} at {caller}"),
        }
    }
}

/// Resolves once another session of this database waits for a lock. A lock wait is visible only
/// in pg_stat_activity: look until it shows (at most 5 s).
pub async fn another_session_waits_for_a_lock(pool: &PgPool) -> bool {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let blocked: bool = sqlx::query_scalar(
                "select exists (select 1 from pg_stat_activity
                 where datname = current_database() and wait_event_type = 'Lock')",
            )
            .fetch_one(pool)
            .await
            .expect("activity");
            if blocked {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .is_ok()
}
