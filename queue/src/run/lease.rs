//! Workers and their leases: registration, the per-process heartbeat, and the sweeper that gives
//! back the runs of workers that stopped heartbeating.
//!
//! A run's lease is its owner's lease. A heartbeat is one statement per worker process, however
//! many runs it holds: a pod with 1,000 runs parked on slow model calls writes one row, not 1,000.

use std::fmt;
use std::time::Duration;

use sqlx::PgExecutor;
use uuid::Uuid;

use crate::listener::RUNS_CHANNEL;
use crate::run::claim::Lease;
use crate::run::{CancelAction, RunId, RunStatus};
use crate::{Error, Result};

/// A worker process start. Never reused: a restarted process registers a new id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, sqlx::Type)]
#[sqlx(transparent)]
pub struct WorkerId(pub Uuid);

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A registered worker: who it is, what it serves and how long its lease lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerLease {
    pub worker_id: WorkerId,
    /// For people: the pod or host name.
    pub name: String,
    pub graphs: Vec<String>,
    /// How long the worker's runs stay its own without a heartbeat. Heartbeat every third of it.
    pub lease: Duration,
}

/// What a heartbeat learned about the runs the worker believes it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heartbeat {
    /// Runs no longer held under that attempt: stop them at once and write nothing more.
    pub lost: Vec<Lease>,
    /// Held runs that a user asked to cancel (the row is the truth; the control NOTIFY is only
    /// the fast path).
    pub cancels: Vec<(Lease, CancelAction)>,
}

/// What one sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Runs whose lease expired, back to `pending` with their attempt used up.
    pub requeued: Vec<RunId>,
    /// Runs whose lease expired on their last attempt, ended `error`.
    pub errored: Vec<RunId>,
}

impl WorkerLease {
    /// A new worker identity with a fresh id.
    pub fn new(name: impl Into<String>, graphs: Vec<String>, lease: Duration) -> Self {
        Self {
            worker_id: WorkerId(Uuid::now_v7()),
            name: name.into(),
            graphs,
            lease,
        }
    }

    /// Registers the worker (or renews it): its lease starts now.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a lease under one second.
    pub async fn register(&self, executor: impl PgExecutor<'_>) -> Result {
        self.heartbeat(executor, &[]).await.map(drop)
    }

    /// Extends the worker's lease, and reports which of `held` it no longer holds and which a user
    /// asked to cancel. Re-registers a worker whose row was swept away, so a worker that was only
    /// slow carries on with the runs it still holds. `held` is every run the worker holds: a run
    /// the database says it holds beside them, untouched for a whole lease, it disowns, for the
    /// sweep to give back.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a lease under one second.
    pub async fn heartbeat(
        &self,
        executor: impl PgExecutor<'_>,
        held: &[Lease],
    ) -> Result<Heartbeat> {
        if self.lease < Duration::from_secs(1) {
            return Err(Error::Invalid {
                field: "lease",
                reason: "must be at least one second".into(),
            });
        }
        let run_ids: Vec<Uuid> = held.iter().map(|lease| lease.run_id.0).collect();
        let attempts: Vec<i32> = held.iter().map(|lease| lease.attempt).collect();
        let rows = sqlx::query_file!(
            "queries/record_heartbeat.sql",
            self.worker_id.0,
            self.name,
            &self.graphs,
            self.lease.as_secs_f64(),
            &run_ids,
            &attempts,
        )
        .fetch_all(executor)
        .await?;

        let mut heartbeat = Heartbeat::default();
        for row in rows {
            let lease = Lease {
                run_id: row.run_id,
                attempt: row.attempt,
            };
            match (row.held, row.cancel_action) {
                (false, _) => heartbeat.lost.push(lease),
                (true, Some(action)) => heartbeat.cancels.push((lease, action)),
                (true, None) => {}
            }
        }
        Ok(heartbeat)
    }

    /// Records which process this worker is (`<boot id>:<pid>:<start time>`), for the next
    /// incarnation under its name to tell whether it is gone ([`Self::previous_incarnations`]).
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn record_incarnation(
        &self,
        executor: impl PgExecutor<'_>,
        incarnation: &str,
    ) -> Result {
        sqlx::query!(
            "update mostrador.workers set incarnation = $2 where worker_id = $1",
            self.worker_id.0,
            incarnation,
        )
        .execute(executor)
        .await?;
        Ok(())
    }

    /// The other workers of this worker's name whose lease still runs, with the process each said
    /// it was: previous incarnations of this one, if their process is gone.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn previous_incarnations(
        &self,
        executor: impl PgExecutor<'_>,
    ) -> Result<Vec<(WorkerId, Option<String>)>> {
        Ok(sqlx::query!(
            r#"
            select worker_id as "worker_id: WorkerId", incarnation
            from mostrador.workers
            where name = $1 and worker_id <> $2 and expires_at > now()
            "#,
            self.name,
            self.worker_id.0,
        )
        .fetch_all(executor)
        .await?
        .into_iter()
        .map(|row| (row.worker_id, row.incarnation))
        .collect())
    }

    /// Ends the lease of workers known to be gone (a previous incarnation of this one): the next
    /// sweep gives their runs back (fencing keeps them safe should one still write).
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn expire(executor: impl PgExecutor<'_>, workers: &[WorkerId]) -> Result {
        let ids: Vec<Uuid> = workers.iter().map(|worker| worker.0).collect();
        sqlx::query!(
            "update mostrador.workers set expires_at = now() where worker_id = any($1)",
            &ids,
        )
        .execute(executor)
        .await?;
        Ok(())
    }

    /// Removes the worker's row on a clean exit, after it released or finished its runs. Runs it
    /// still holds are swept as soon as the sweeper sees them.
    pub async fn deregister(&self, executor: impl PgExecutor<'_>) -> Result {
        sqlx::query!(
            "delete from mostrador.workers where worker_id = $1",
            self.worker_id.0
        )
        .execute(executor)
        .await?;
        Ok(())
    }
}

/// Gives back the runs of workers whose lease expired (or that are gone): `pending` again with
/// their attempt used up, or `error` (with `error` and `end` events, the thread resting in
/// `error`) when that was their last attempt. Claimers are woken for the requeued runs. Workers
/// expired for ten leases and holding nothing are forgotten.
///
/// Safe to run on every pod at once: runs another sweeper or their holder is touching are skipped,
/// and so are runs whose thread another statement holds (they wait for the next sweep).
pub async fn sweep(executor: impl PgExecutor<'_>) -> Result<Sweep> {
    let rows = sqlx::query_file!("queries/sweep_leases.sql", RUNS_CHANNEL,)
        .fetch_all(executor)
        .await?;

    let mut sweep = Sweep::default();
    for row in rows {
        match row.status {
            RunStatus::Error => sweep.errored.push(row.run_id),
            _ => sweep.requeued.push(row.run_id),
        }
    }
    Ok(sweep)
}

/// A worker whose lease has not expired, and how many runs it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveWorker {
    pub worker_id: WorkerId,
    pub name: String,
    pub graphs: Vec<String>,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub heartbeat_at: chrono::DateTime<chrono::Utc>,
    /// Runs it holds now (status running, leased to it).
    pub running: i64,
}

/// The workers whose lease has not expired, with their runs in flight, oldest start first.
///
/// # Errors
///
/// The database failed.
pub async fn live_workers(executor: impl PgExecutor<'_>) -> Result<Vec<LiveWorker>> {
    let workers = sqlx::query_as!(
        LiveWorker,
        r#"
        select
            w.worker_id as "worker_id: WorkerId",
            w.name,
            w.graphs,
            w.started_at,
            w.heartbeat_at,
            (
                select count(*)
                from mostrador.runs r
                where r.status = 'running'
                  and r.lease_owner = w.worker_id
            ) as "running!"
        from mostrador.workers w
        where w.expires_at > now()
        order by w.started_at, w.worker_id
        "#
    )
    .fetch_all(executor)
    .await?;
    Ok(workers)
}
