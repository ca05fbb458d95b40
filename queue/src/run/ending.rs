//! The one way out of a claim: an [`Ending`] (success, a pause for a resume, a cancel, a timeout,
//! a failure, a drain's release, a rollback), resolved into an [`End`] and written by
//! [`end_many`], alone through [`ClaimedRun::end`] or batched by the worker's publisher with other
//! runs' endings, events and described states ([`write`], one statement).
//!
//! Every ending is conditional on `(run_id, attempt, status = running)`. When that matches
//! nothing, the run was swept, released or finished behind the caller's back, maybe claimed again
//! under a newer attempt: the ending's lease is reported lost and nothing was written for it.
//!
//! Lock order: a statement that changes a thread's row and its runs' rows locks the thread
//! first. Deleting a thread, and enqueueing with `interrupt` or `rollback`, lock the thread and
//! then change its runs; a completion or failure that locked its run and then waited for the
//! thread would deadlock with them (Postgres would abort one after `deadlock_timeout`). The lease
//! sweep (`lease::sweep`) takes threads before runs too, skipping those held.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sqlx::{Acquire, PgConnection, PgExecutor, Postgres};
use uuid::Uuid;

use crate::Result;
use crate::listener::RUNS_CHANNEL;
use crate::run::cancel::delete_runs;
use crate::run::claim::{ClaimedRun, Lease};
use crate::run::event::{EventColumns, NewEvent, append_runs};
use crate::run::{RunId, RunStatus};
use crate::state::checkpoint::{FinalCheckpoint, write_final};
use crate::state::saver::Described;
use crate::thread::{ThreadId, ThreadStatus};

/// The first delay before a retryable failure is tried again; it doubles with each attempt used.
pub const RETRY_BACKOFF_BASE: Duration = Duration::from_secs(2);
/// The longest delay between retries.
pub const RETRY_BACKOFF_CAP: Duration = Duration::from_secs(600);
/// How long a run the database failed waits before it is tried again ([`Ending::Postponed`]):
/// about the `Retry-After` the api gives clients meanwhile.
pub const DATABASE_RETRY: Duration = Duration::from_secs(5);

/// Every way a claimed run leaves its holder.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// The graph finished: the run ends `success`, its thread rests `idle`.
    Success,
    /// The graph interrupted itself (a breakpoint, `interrupt()`): the run ends `success`, its
    /// thread rests `interrupted` until a run resumes it.
    Paused,
    /// A user cancelled it with the `interrupt` action: the run ends `interrupted`, its thread
    /// rests `idle`.
    Cancelled,
    /// It ran out of time: the run ends `timeout`, its thread rests `error`.
    TimedOut,
    /// It failed with `error` (`{"error": kind, "message": …}`). A `retryable` failure with
    /// attempts left puts the run back to `pending`, due after [`retry_backoff`] of the attempts
    /// used; otherwise the run ends `error` with an `error` event, and its thread rests `error`.
    Failed { error: Value, retryable: bool },
    /// This worker is draining: the run is `pending` again, due at once at its old place in the
    /// queue, **without using up an attempt**, with a `drained` event; another worker resumes it
    /// from its checkpoint.
    Released { reason: String },
    /// The database failed under it (out of disk, unreachable, failing over: an error
    /// [`crate::is_transient`] calls transient): the run is `pending` again, due after
    /// [`DATABASE_RETRY`], **without using up an attempt**, with a `drained` event naming why;
    /// its next attempt resumes from its checkpoint. However long the database is down, no run
    /// fails for it: the ones it holds wait for it, as the api's clients do.
    Postponed { reason: String },
    /// A `rollback` cancel: the run, its events and the checkpoints it made are deleted, as if it
    /// had never been created. Subscribers get a marker without `seq`, re-read, and find it gone.
    RolledBack,
}

/// Where a run is once its ending is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// It ended with this status (`success`, `interrupted`, `timeout` or `error`).
    Ended(RunStatus),
    /// A retryable failure put it back to `pending`, due after a backoff.
    Retrying,
    /// A drain put it back to `pending`, its attempt not used up.
    Released,
    /// It was deleted.
    RolledBack,
}

/// A claimed run's [`Ending`], resolved into what [`end_many`] writes: fenced by the claim's
/// lease, so once one ending of a claim is written, any other finds the lease lost.
#[derive(Debug, Clone, PartialEq)]
pub struct End {
    lease: Lease,
    thread_id: ThreadId,
    after: After,
    /// The thread's resting status; none while the run is pending again.
    thread_status: Option<ThreadStatus>,
    /// The retry's backoff.
    delay: Option<Duration>,
    /// Recorded on the run, and, when it ends `error`, its `error` event's data.
    error: Option<Value>,
    /// A drain's: its `drained` event says why.
    reason: Option<String>,
    /// The run's final checkpoint, written in the ending's transaction (not for a rollback).
    checkpoint: Option<Arc<FinalCheckpoint>>,
}

impl End {
    pub fn lease(&self) -> Lease {
        self.lease
    }

    pub fn after(&self) -> After {
        self.after
    }

    /// The ending with the run's final checkpoint, held by its checkpointer
    /// ([`crate::state::checkpoint::PgCheckpointer::holding_final`]): written before it, in its
    /// transaction, fenced by the same lease. A rollback drops it with the run's checkpoints.
    pub fn with_checkpoint(self, checkpoint: Option<Arc<FinalCheckpoint>>) -> Self {
        Self { checkpoint, ..self }
    }

    /// The same run's ending as [`Ending::Postponed`] (its final checkpoint kept): what a worker
    /// writes in place of another ending that the database failed to take.
    pub fn postponed(self, reason: String) -> Self {
        Self {
            after: After::Released,
            thread_status: None,
            delay: Some(DATABASE_RETRY),
            error: None,
            reason: Some(reason),
            ..self
        }
    }

    /// Whether its write is one statement: neither a rollback nor a final checkpoint to write
    /// before it.
    pub fn writes_alone(&self) -> bool {
        self.after != After::RolledBack && self.checkpoint.is_none()
    }
}

/// Writes many claimed runs' endings: one statement for every ending but rollbacks (each run's
/// status, its events, its thread's resting status and `last_activity_at`), then one per
/// rollback. Claimers are woken for a released run, and for threads that have a run queued
/// behind one that ended. Its statements commit together: in the caller's transaction, or in
/// one of their own.
///
/// Returns the leases that were lost; those runs were left untouched.
pub async fn end_many(conn: &mut PgConnection, ends: &[End]) -> Result<Vec<Lease>> {
    if ends.iter().all(End::writes_alone) {
        return write(conn, &[], &[], ends).await;
    }
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let lost = write(&mut tx, &[], &[], ends).await?;
    tx.commit().await?;
    Ok(lost)
}

/// Writes held runs' described states, events and endings as [`end_many`] does, in the same
/// statement, in that order: a run's last events and its ending commit together, and a client
/// that sees an event reads a state at least as new. An ending that carries its run's final
/// checkpoint has it written first (its threads locked before, in the statements' lock order).
/// Without rollbacks or final checkpoints the whole write is that one statement, a transaction
/// of its own; with them, run it in a transaction.
///
/// Returns the leases that were lost; nothing was written for those runs.
pub async fn write(
    conn: &mut PgConnection,
    described: &[(Lease, &[Described])],
    appends: &[(Lease, &[NewEvent])],
    ends: &[End],
) -> Result<Vec<Lease>> {
    let (rollbacks, updates): (Vec<&End>, Vec<&End>) =
        ends.iter().partition(|end| end.after == After::RolledBack);
    if updates.iter().any(|end| end.checkpoint.is_some()) {
        // Threads first (see the lock order above): a checkpoint's fence locks its run, and the
        // ending's statement then locks the run's thread.
        let thread_ids: Vec<Uuid> = updates.iter().map(|end| end.thread_id.0).collect();
        sqlx::query_file!("queries/lock_threads.sql", &thread_ids)
            .fetch_all(&mut *conn)
            .await?;
        let finals: Vec<(Lease, &FinalCheckpoint)> = updates
            .iter()
            .filter_map(|end| Some((end.lease, end.checkpoint.as_deref()?)))
            .collect();
        write_final(&mut *conn, &finals).await?;
    }
    let mut done: Vec<RunId> = if described.is_empty() && appends.is_empty() && updates.is_empty() {
        Vec::new()
    } else {
        write_runs(&mut *conn, described, appends, &updates)
            .await?
            .into_iter()
            .map(|(run_id, _)| run_id)
            .collect()
    };
    for end in rollbacks {
        let deleted = delete_runs(
            &mut *conn,
            end.thread_id,
            &[end.lease.run_id.0],
            RunStatus::Running,
            Some(end.lease.attempt),
        )
        .await?;
        if !deleted.is_empty() {
            sqlx::query!(
                r#"
                select pg_notify($2, graph_id)
                from mostrador.runs
                where thread_id = $1
                  and status = 'pending'
                limit 1
                "#,
                end.thread_id.0,
                RUNS_CHANNEL,
            )
            .fetch_optional(&mut *conn)
            .await?;
        }
        done.extend(deleted);
    }
    let leases = described
        .iter()
        .map(|(lease, _)| *lease)
        .chain(appends.iter().map(|(lease, _)| *lease))
        .chain(ends.iter().map(End::lease));
    Ok(lost_leases(leases, &done))
}

/// The one statement of [`write`]: runs' described states and events, and every ending that
/// leaves its run in the table. Returns each run written, with the `seq` of its last event (none
/// for a run that only described states). Events alone go through a statement of their own
/// ([`crate::run::event::append_runs`]), which spares PostgreSQL the rest of this one.
pub(crate) async fn write_runs(
    executor: impl PgExecutor<'_>,
    described: &[(Lease, &[Described])],
    appends: &[(Lease, &[NewEvent])],
    ends: &[&End],
) -> Result<Vec<(RunId, Option<i64>)>> {
    if described.is_empty() && ends.is_empty() {
        let written = append_runs(executor, appends).await?;
        return Ok(written
            .into_iter()
            .map(|(run_id, last_seq)| (run_id, Some(last_seq)))
            .collect());
    }
    let mut described_runs = Vec::new();
    let mut described_attempts = Vec::new();
    let mut checkpoint_ids = Vec::new();
    let mut snapshots = Vec::new();
    for (lease, states) in described {
        for state in *states {
            described_runs.push(lease.run_id.0);
            described_attempts.push(lease.attempt);
            checkpoint_ids.push(state.checkpoint_id);
            snapshots.push(&state.snapshot);
        }
    }
    let events = EventColumns::of(appends);
    let mut run_ids = Vec::with_capacity(ends.len());
    let mut attempts = Vec::with_capacity(ends.len());
    let mut statuses = Vec::with_capacity(ends.len());
    let mut thread_statuses = Vec::with_capacity(ends.len());
    let mut delays = Vec::with_capacity(ends.len());
    let mut released = Vec::with_capacity(ends.len());
    let mut errors = Vec::with_capacity(ends.len());
    let mut reasons = Vec::with_capacity(ends.len());
    for end in ends {
        run_ids.push(end.lease.run_id.0);
        attempts.push(end.lease.attempt);
        statuses.push(match end.after {
            After::Ended(status) => status,
            After::Retrying | After::Released | After::RolledBack => RunStatus::Pending,
        });
        thread_statuses.push(end.thread_status);
        delays.push(end.delay.map(|delay| delay.as_secs_f64()));
        released.push(end.after == After::Released);
        errors.push(end.error.clone());
        reasons.push(end.reason.clone());
    }

    // N.B. Bumping `runs.event_seq` both hands out each run's next `seq` numbers and fences the
    // write: the update takes the run's row lock, so a concurrent sweep or release either commits
    // first (and the fence matches nothing) or waits for this one.
    // N.B. A run enqueued on the thread after this statement's snapshot is not seen as queued,
    // so no wake-up is sent for it here; its own enqueue notified, and the claimers' poll covers
    // the window in which that wake-up found the thread still busy.
    let written = sqlx::query_file!(
        "queries/end_runs.sql",
        &events.run_ids,
        &events.attempts,
        &events.names as &[&str],
        &events.datas as &[&Value],
        &run_ids,
        &attempts,
        &statuses as &[RunStatus],
        &thread_statuses as &[Option<ThreadStatus>],
        &delays as &[Option<f64>],
        &released,
        &errors as &[Option<Value>],
        &reasons as &[Option<String>],
        RUNS_CHANNEL,
        &described_runs,
        &described_attempts,
        &checkpoint_ids,
        &snapshots as &[&Value],
    )
    .fetch_all(executor)
    .await?;
    Ok(written
        .into_iter()
        .map(|row| (row.run_id, row.last_seq))
        .collect())
}

/// The leases among `leases` whose run is not in `done`.
pub(crate) fn lost_leases(leases: impl Iterator<Item = Lease>, done: &[RunId]) -> Vec<Lease> {
    let mut lost = Vec::new();
    for lease in leases {
        if !done.contains(&lease.run_id) && !lost.contains(&lease) {
            lost.push(lease);
        }
    }
    lost
}

impl ClaimedRun {
    /// What `ending` writes for this run, to be written by [`end_many`] with others.
    pub fn ending(&self, ending: Ending) -> End {
        let end = |after, thread_status| End {
            lease: self.lease(),
            thread_id: self.thread_id,
            after,
            thread_status,
            delay: None,
            error: None,
            reason: None,
            checkpoint: None,
        };
        let ended = |status, thread_status| end(After::Ended(status), Some(thread_status));
        match ending {
            Ending::Success => ended(RunStatus::Success, ThreadStatus::Idle),
            Ending::Paused => ended(RunStatus::Success, ThreadStatus::Interrupted),
            Ending::Cancelled => ended(RunStatus::Interrupted, ThreadStatus::Idle),
            Ending::TimedOut => ended(RunStatus::Timeout, ThreadStatus::Error),
            Ending::Failed { error, retryable }
                if retryable && self.attempts_used() < self.max_attempts =>
            {
                End {
                    delay: Some(retry_backoff(self.attempts_used())),
                    error: Some(error),
                    ..end(After::Retrying, None)
                }
            }
            Ending::Failed { error, .. } => End {
                error: Some(error),
                ..ended(RunStatus::Error, ThreadStatus::Error)
            },
            Ending::Released { reason } => End {
                reason: Some(reason),
                ..end(After::Released, None)
            },
            Ending::Postponed { reason } => End {
                reason: Some(reason),
                delay: Some(DATABASE_RETRY),
                ..end(After::Released, None)
            },
            Ending::RolledBack => end(After::RolledBack, None),
        }
    }

    /// Ends the run, alone: the claim is over whatever the answer.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the run was swept, released or ended behind this claim; nothing
    /// was written.
    pub async fn end(
        self,
        conn: impl Acquire<'_, Database = Postgres>,
        ending: Ending,
    ) -> Result<After> {
        let end = self.ending(ending);
        let mut conn = conn.acquire().await?;
        let lost = end_many(&mut conn, std::slice::from_ref(&end)).await?;
        if lost.is_empty() {
            Ok(end.after)
        } else {
            Err(end.lease.lost())
        }
    }
}

/// The delay before a run is tried again after a retryable failure, given the attempts it has
/// used: [`RETRY_BACKOFF_BASE`] doubled per attempt after the first, at most
/// [`RETRY_BACKOFF_CAP`].
pub fn retry_backoff(attempts_used: i32) -> Duration {
    let exponent = attempts_used.saturating_sub(1).clamp(0, 30) as u32;
    RETRY_BACKOFF_BASE
        .saturating_mul(1 << exponent)
        .min(RETRY_BACKOFF_CAP)
}
