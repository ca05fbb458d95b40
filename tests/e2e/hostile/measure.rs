//! What the soak measures: the steady load's pickups, the runs that overtook it, and the end of
//! the queue's work.

use std::time::Duration;

use sqlx::PgPool;

use super::Steady;

/// The steady load's 99th percentiles.
pub(super) struct Pickup {
    /// From the run's creation (its enqueue transaction's start) to its start.
    pub whole: Duration,
    /// From the run's creation to the api's answer.
    pub enqueue: Duration,
    /// From the api's answer to the run's start: the wait for a worker.
    pub wait: Duration,
}

impl Pickup {
    pub(super) async fn of(pool: &PgPool, runs: &[Steady]) -> Self {
        let ids: Vec<&str> = runs.iter().map(|run| run.run_id.as_str()).collect();
        let answered: Vec<f64> = runs.iter().map(|run| run.answered).collect();
        let rows: Vec<(f64, f64, f64)> = sqlx::query_as(
            "select extract(epoch from r.started_at - r.created_at)::float8,
                    a.answered - extract(epoch from r.created_at)::float8,
                    extract(epoch from r.started_at)::float8 - a.answered
             from unnest($1::uuid[], $2::float8[]) as a(run_id, answered)
             join mostrador.runs r using (run_id)
             where r.started_at is not null",
        )
        .bind(&ids)
        .bind(&answered)
        .fetch_all(pool)
        .await
        .expect("pickups");
        assert!(rows.len() * 10 >= runs.len() * 9, "most runs started");
        let part =
            |of: fn(&(f64, f64, f64)) -> f64| p99(&mut rows.iter().map(of).collect::<Vec<_>>());
        Self {
            whole: part(|row| row.0),
            enqueue: part(|row| row.1),
            wait: part(|row| row.2),
        }
    }
}

/// The 99th percentile of durations in seconds (a negative one counts as none).
fn p99(seconds: &mut [f64]) -> Duration {
    seconds.sort_by(f64::total_cmp);
    let at = ((seconds.len() as f64) * 0.99).ceil() as usize;
    Duration::from_secs_f64(seconds[at.saturating_sub(1).min(seconds.len() - 1)].max(0.0))
}

/// The steady runs that waited, after the api answered for them, while a run of a caller with
/// more runs waiting started: with the queue's order, none. (A run started after the answer was
/// read was claimed by a statement that could see the steady run; one worker claims, one claim at
/// a time.)
pub(super) async fn overtaken(pool: &PgPool, runs: &[Steady]) -> Vec<String> {
    let ids: Vec<&str> = runs.iter().map(|run| run.run_id.as_str()).collect();
    let answered: Vec<f64> = runs.iter().map(|run| run.answered).collect();
    sqlx::query_scalar(
        "select s.run_id::text
         from unnest($1::uuid[], $2::float8[]) as a(run_id, answered)
         join mostrador.runs s using (run_id)
         where exists (
             select 1 from mostrador.runs r
             where r.started_at > to_timestamp(a.answered)
               and r.started_at < s.started_at
               and r.priority > s.priority
         )",
    )
    .bind(&ids)
    .bind(&answered)
    .fetch_all(pool)
    .await
    .expect("overtaken")
}

/// The 99th percentile of the runs' time from creation to start, as the database saw it.
pub(super) async fn p99_since_creation(pool: &PgPool, runs: &[String]) -> Duration {
    let mut seconds: Vec<f64> = sqlx::query_scalar(
        "select extract(epoch from started_at - created_at)::float8
         from mostrador.runs where run_id = any($1::uuid[]) and started_at is not null",
    )
    .bind(runs)
    .fetch_all(pool)
    .await
    .expect("pickups");
    assert!(seconds.len() * 10 >= runs.len() * 9, "most runs started");
    p99(&mut seconds)
}

/// Waits until no run is running or due and pending (delayed runs stay pending).
pub(super) async fn quiescent(pool: &PgPool) {
    let within = Duration::from_secs(120);
    let settled = tokio::time::timeout(within, async {
        loop {
            let busy: i64 = sqlx::query_scalar(
                "select count(*) from mostrador.runs
                 where status = 'running' or (status = 'pending' and available_at <= now())",
            )
            .fetch_one(pool)
            .await
            .expect("count");
            if busy == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(settled.is_ok(), "the queue did not drain within {within:?}");
}

/// The resident memory of a process, in KiB.
pub(super) fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or_default()
}
