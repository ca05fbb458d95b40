//! Claiming runs, and the transitions only the lease holder may make.
//!
//! Every transition here is one statement, conditional on `(run_id, attempt, status = running)`.
//! When that matches nothing, the run was swept, released or finished behind the caller's back,
//! maybe claimed again under a newer attempt: the caller gets [`Error::LeaseLost`] and nothing was
//! written. Each takes any executor, so a caller can commit a transition together with other
//! writes. [`complete_many`] ends many runs in one statement (the worker's publisher batches its
//! runs' completions through it).
//!
//! Lock order: a statement that changes a thread's row and its runs' rows locks the thread
//! first. Deleting a thread, and enqueueing with `interrupt` or `rollback`, lock the thread and
//! then change its runs; a completion or failure that locked its run and then waited for the
//! thread would deadlock with them (Postgres would abort one after `deadlock_timeout`). The lease
//! sweep (`lease::sweep`) takes threads before runs too, skipping those held.

use std::time::Duration;

use serde_json::Value;
use sqlx::PgExecutor;

use crate::cancel::delete_runs;
use crate::lease::WorkerId;
use crate::listener::RUNS_CHANNEL;
use crate::run::{CancelAction, RunId, RunStatus};
use crate::thread::{ThreadId, ThreadStatus};
use crate::{Error, Result};

/// The first delay before a retryable failure is tried again; it doubles with each attempt used.
pub const RETRY_BACKOFF_BASE: Duration = Duration::from_secs(2);
/// The longest delay between retries.
pub const RETRY_BACKOFF_CAP: Duration = Duration::from_secs(600);

/// The fencing token of a claimed run: a transition made under a stale attempt changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    pub run_id: RunId,
    pub attempt: i32,
}

impl Lease {
    fn lost(self) -> Error {
        Error::LeaseLost {
            run_id: self.run_id,
            attempt: self.attempt,
        }
    }
}

/// A run this worker holds. Its methods are the transitions of a claimed run.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedRun {
    pub run_id: RunId,
    pub attempt: i32,
    pub thread_id: ThreadId,
    pub graph_id: String,
    pub input: Option<Value>,
    pub command: Option<Value>,
    pub config: Value,
    pub metadata: Value,
    pub max_attempts: i32,
    pub drain_count: i32,
    /// Set when a cancel reached the run before this claim (e.g. while it was released by a
    /// drain): the holder should end the run that way at once.
    pub cancel_action: Option<CancelAction>,
    pub trace_id: Option<String>,
    /// The stream modes whose events are stored.
    pub stream_mode: Vec<String>,
}

/// How a claimed run ends, other than by failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub lease: Lease,
    /// `Success`, `Timeout` or `Interrupted`. Errors go through [`ClaimedRun::fail`].
    pub status: RunStatus,
    /// The thread's resting status: `Idle`, `Interrupted` (the graph waits for a resume) or
    /// `Error`.
    pub thread_status: ThreadStatus,
}

/// Claims up to `n` runs of `graphs` for `worker_id`, in one statement: pending, due, the oldest
/// unfinished run of their thread, lowest `priority` first, then oldest. Each claimed run becomes
/// `running` with `attempt + 1`; the claim also renews the worker's lease.
///
/// Returns nothing when the worker is not registered (or was swept away after its lease expired).
///
/// Run it on a [`crate::db::claimer`] connection: elsewhere its plan depends on the statistics of
/// `runs`.
pub async fn claim(
    executor: impl PgExecutor<'_>,
    worker_id: WorkerId,
    graphs: &[String],
    n: i64,
) -> Result<Vec<ClaimedRun>> {
    // N.B. The candidate CTE filters exactly on `runs_claim_idx` (`status = 'pending'`) and orders
    // by its columns, so it is an index range scan that stops after `n` usable rows. A run behind
    // another unfinished run of its thread is never a candidate: two claimers therefore never
    // take two runs of one thread, and no claim can trip `runs_one_running_per_thread`. (A running
    // run was its thread's head when claimed, so its `seq` is below every pending run's of that
    // thread, and `e.seq < r.seq` covers it; the probe is one entry of `runs_thread_active_idx`.)
    // SKIP LOCKED passes over rows another claimer is taking; rows it has already taken fail the
    // `status = 'pending'` recheck.
    let claimed = sqlx::query_as!(
        ClaimedRun,
        r#"
        with beat as (
            update mostrador.workers
            set heartbeat_at = now(),
                expires_at = now() + lease
            where worker_id = $1
            returning worker_id
        ),
        candidate as (
            select r.run_id
            from mostrador.runs r
            where r.status = 'pending'
              and r.available_at <= now()
              and r.graph_id = any($2)
              and exists (select 1 from beat)
              and not exists (
                  select 1
                  from mostrador.runs e
                  where e.thread_id = r.thread_id
                    and e.status in ('pending', 'running')
                    and e.seq < r.seq
              )
            order by r.priority, r.available_at, r.seq
            limit $3
            for update of r skip locked
        ),
        claimed as (
            update mostrador.runs r
            set status = 'running',
                attempt = r.attempt + 1,
                lease_owner = $1,
                started_at = coalesce(r.started_at, now()),
                updated_at = now()
            -- N.B. `= any(array(...))` keeps this a primary-key lookup of the claimed rows. As a
            -- join, the generic plan (which cannot see the limit) hashes a sequential scan of
            -- all runs.
            where r.run_id = any(array(select run_id from candidate))
            returning
                r.run_id, r.attempt, r.thread_id, r.graph_id, r.input, r.command, r.config,
                r.metadata, r.max_attempts, r.drain_count, r.cancel_action, r.trace_id,
                r.stream_mode, r.priority, r.available_at, r.seq
        )
        select
            run_id as "run_id: RunId",
            attempt,
            thread_id as "thread_id: ThreadId",
            graph_id,
            input,
            command,
            config,
            metadata,
            max_attempts,
            drain_count,
            cancel_action as "cancel_action: CancelAction",
            trace_id,
            stream_mode
        from claimed
        -- In queue order, as the candidates were chosen.
        order by priority, available_at, seq
        "#,
        worker_id.0,
        graphs,
        n,
    )
    .fetch_all(executor)
    .await?;
    Ok(claimed)
}

/// Completes many claimed runs with one statement: each run's terminal status, its `end` event,
/// and its thread's resting status and `last_activity_at` commit together. Claimers are woken for
/// threads that have a run queued behind.
///
/// Returns the leases that were lost; those runs were left untouched.
///
/// # Errors
///
/// [`Error::Invalid`] for a status that is not `Success`, `Timeout` or `Interrupted`, or a thread
/// status of `Busy`.
pub async fn complete_many(
    executor: impl PgExecutor<'_>,
    completions: &[Completion],
) -> Result<Vec<Lease>> {
    let mut run_ids = Vec::with_capacity(completions.len());
    let mut attempts = Vec::with_capacity(completions.len());
    let mut statuses = Vec::with_capacity(completions.len());
    let mut thread_statuses = Vec::with_capacity(completions.len());
    for completion in completions {
        if !matches!(
            completion.status,
            RunStatus::Success | RunStatus::Timeout | RunStatus::Interrupted
        ) {
            return Err(Error::Invalid {
                field: "status",
                reason: format!(
                    "{:?} is not a completion; errors go through fail",
                    completion.status
                ),
            });
        }
        if completion.thread_status == ThreadStatus::Busy {
            return Err(Error::Invalid {
                field: "thread status",
                reason: "busy is derived from the thread's runs and cannot be set".into(),
            });
        }
        run_ids.push(completion.lease.run_id.0);
        attempts.push(completion.lease.attempt);
        statuses.push(completion.status);
        thread_statuses.push(completion.thread_status);
    }

    // N.B. A run enqueued on the thread after this statement's snapshot is not seen as queued,
    // so no wake-up is sent for it here; its own enqueue notified, and the claimers' poll covers
    // the window in which that wake-up found the thread still busy.
    let completed = sqlx::query!(
        r#"
        with input as (
            select *
            from unnest(
                $1::uuid[], $2::int[], $3::mostrador.run_status[], $4::mostrador.thread_status[]
            ) as i(run_id, attempt, status, thread_status)
        ),
        -- Threads before runs, in one order: the order of the statements that lock a thread, then
        -- change its runs (deleting it, enqueueing with `interrupt` or `rollback`). The other
        -- order deadlocks with them (see the lock order in this module's documentation).
        threads_locked as (
            select t.thread_id
            from mostrador.threads t
            where t.thread_id in (
                select r.thread_id
                from mostrador.runs r
                join input i on i.run_id = r.run_id
            )
            order by t.thread_id
            for no key update of t
        ),
        -- N.B. `for update`, not the plain update's `for no key update`: it must wait for
        -- checkpoint writes in flight, which lock `for key share` (see `checkpoint`).
        locked as (
            select r.run_id
            from mostrador.runs r
            join input i on i.run_id = r.run_id and i.attempt = r.attempt
            where r.status = 'running'
              -- Always true; evaluated once, before any run is locked.
              and (select count(*) from threads_locked) >= 0
            for update of r
        ),
        completed as (
            update mostrador.runs r
            set status = i.status,
                finished_at = now(),
                updated_at = now(),
                event_seq = r.event_seq + 1
            from input i
            where r.run_id = i.run_id
              and r.run_id = any(array(select run_id from locked))
              and r.attempt = i.attempt
              and r.status = 'running'
            returning r.run_id, r.thread_id, r.graph_id, r.status, r.event_seq, i.thread_status
        ),
        ended as (
            insert into mostrador.run_events (run_id, seq, event, data)
            select run_id, event_seq, 'end', jsonb_build_object('status', status)
            from completed
        ),
        rested as (
            update mostrador.threads t
            set status = c.thread_status,
                last_activity_at = now(),
                updated_at = now()
            from completed c
            where t.thread_id = c.thread_id
        )
        select
            c.run_id as "run_id!: RunId",
            case
                when exists (
                    select 1
                    from mostrador.runs q
                    where q.thread_id = c.thread_id
                      and q.status = 'pending'
                ) then pg_notify($5, c.graph_id)::text
            end as "woken"
        from completed c
        "#,
        &run_ids,
        &attempts,
        &statuses as &[RunStatus],
        &thread_statuses as &[ThreadStatus],
        RUNS_CHANNEL,
    )
    .fetch_all(executor)
    .await?;
    let completed: Vec<RunId> = completed.into_iter().map(|row| row.run_id).collect();
    Ok(lost_leases(completions.iter().map(|c| c.lease), &completed))
}

/// The leases among `leases` whose run is not in `done`.
pub(crate) fn lost_leases(leases: impl Iterator<Item = Lease>, done: &[RunId]) -> Vec<Lease> {
    leases
        .filter(|lease| !done.contains(&lease.run_id))
        .collect()
}

impl ClaimedRun {
    pub fn lease(&self) -> Lease {
        Lease {
            run_id: self.run_id,
            attempt: self.attempt,
        }
    }

    /// Attempts used up so far, this one included. Drain releases do not count.
    pub fn attempts_used(&self) -> i32 {
        self.attempt - self.drain_count
    }

    /// Ends the run with `status` (`Success`, `Timeout` or `Interrupted`), appends its `end`
    /// event, and sets the thread's resting status, in one statement.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`]; [`Error::Invalid`] as for [`complete_many`].
    pub async fn complete(
        &self,
        executor: impl PgExecutor<'_>,
        status: RunStatus,
        thread_status: ThreadStatus,
    ) -> Result {
        let lease = self.lease();
        let lost = complete_many(
            executor,
            &[Completion {
                lease,
                status,
                thread_status,
            }],
        )
        .await?;
        if lost.is_empty() {
            Ok(())
        } else {
            Err(lease.lost())
        }
    }

    /// Records a failure. A `retryable` failure with attempts left puts the run back to `pending`,
    /// due after [`retry_backoff`] of the attempts used; otherwise the run ends `error` with an
    /// `error` event (its data is `error`) and an `end` event, and the thread rests in `error`.
    ///
    /// Returns the run's new status (`Pending` or `Error`).
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`].
    pub async fn fail(
        &self,
        executor: impl PgExecutor<'_>,
        error: &Value,
        retryable: bool,
    ) -> Result<RunStatus> {
        let status = sqlx::query_scalar!(
            r#"
            -- Its thread before the run (see the lock order in this module's documentation).
            with thread_locked as (
                select thread_id
                from mostrador.threads
                where thread_id = $7
                for no key update
            ),
            target as (
                select
                    run_id,
                    $3 and attempt - drain_count < max_attempts as retry,
                    least(
                        $4 * power(2, greatest(attempt - drain_count - 1, 0)),
                        $5
                    ) as backoff_secs
                from mostrador.runs
                where run_id = $1
                  and attempt = $2
                  and status = 'running'
                  -- Always true; evaluated once, before the run is locked.
                  and (select count(*) from thread_locked) >= 0
                for update
            ),
            failed as (
                update mostrador.runs r
                set status = case when t.retry then 'pending' else 'error' end::mostrador.run_status,
                    available_at = case
                        when t.retry then now() + make_interval(secs => t.backoff_secs)
                        else r.available_at
                    end,
                    lease_owner = case when t.retry then null else r.lease_owner end,
                    finished_at = case when t.retry then null else now() end,
                    error = $6,
                    updated_at = now(),
                    event_seq = r.event_seq + case when t.retry then 0 else 2 end
                from target t
                where r.run_id = t.run_id
                returning r.run_id, r.thread_id, r.status, r.event_seq
            ),
            ended as (
                insert into mostrador.run_events (run_id, seq, event, data)
                select run_id, event_seq - 1, 'error', $6
                from failed
                where status = 'error'
                union all
                select run_id, event_seq, 'end', '{"status": "error"}'::jsonb
                from failed
                where status = 'error'
            ),
            rested as (
                update mostrador.threads t
                set status = 'error',
                    last_activity_at = now(),
                    updated_at = now()
                from failed f
                where t.thread_id = f.thread_id
                  and f.status = 'error'
            )
            select status as "status!: RunStatus"
            from failed
            "#,
            self.run_id.0,
            self.attempt,
            retryable,
            RETRY_BACKOFF_BASE.as_secs_f64(),
            RETRY_BACKOFF_CAP.as_secs_f64(),
            error,
            self.thread_id.0,
        )
        .fetch_optional(executor)
        .await?;
        status.ok_or(self.lease().lost())
    }

    /// Gives the run back because this worker is draining: `pending` again, due at once and at
    /// its old place in the queue, **without using up an attempt** (`drain_count + 1`), with a
    /// `drained` event; claimers are woken so another worker resumes it from its checkpoint.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`].
    pub async fn release(&self, executor: impl PgExecutor<'_>, reason: &str) -> Result {
        let released = sqlx::query_scalar!(
            r#"
            -- N.B. `for update` waits for checkpoint writes in flight (see `checkpoint`).
            with locked as (
                select run_id
                from mostrador.runs
                where run_id = $1
                  and attempt = $2
                  and status = 'running'
                for update
            ),
            released as (
                update mostrador.runs
                set status = 'pending',
                    lease_owner = null,
                    drain_count = drain_count + 1,
                    updated_at = now(),
                    event_seq = event_seq + 1
                where run_id = (select run_id from locked)
                  and attempt = $2
                  and status = 'running'
                returning run_id, graph_id, attempt, event_seq
            ),
            logged as (
                insert into mostrador.run_events (run_id, seq, event, data)
                select run_id, event_seq, 'drained', jsonb_build_object('reason', $3::text, 'attempt', attempt)
                from released
            )
            select pg_notify($4, graph_id)::text as "woken"
            from released
            "#,
            self.run_id.0,
            self.attempt,
            reason,
            RUNS_CHANNEL,
        )
        .fetch_optional(executor)
        .await?;
        released.map(drop).ok_or(self.lease().lost())
    }

    /// Honours a `rollback` cancel: deletes the run, its events and the checkpoints (with their
    /// writes) it made, as if it had never been created. Subscribers get a marker without `seq`,
    /// re-read, and find the run gone.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`].
    pub async fn roll_back(&self, executor: impl PgExecutor<'_>) -> Result {
        let deleted = delete_runs(
            executor,
            self.thread_id,
            &[self.run_id.0],
            RunStatus::Running,
            Some(self.attempt),
        )
        .await?;
        if deleted.is_empty() {
            Err(self.lease().lost())
        } else {
            Ok(())
        }
    }
}

/// The delay before a run is tried again after a retryable failure, given the attempts it has
/// used: [`RETRY_BACKOFF_BASE`] doubled per attempt after the first, at most
/// [`RETRY_BACKOFF_CAP`]. Computed in SQL by [`ClaimedRun::fail`]; this is its twin for callers
/// that report it.
pub fn retry_backoff(attempts_used: i32) -> Duration {
    let exponent = attempts_used.saturating_sub(1).clamp(0, 30) as u32;
    RETRY_BACKOFF_BASE
        .saturating_mul(1 << exponent)
        .min(RETRY_BACKOFF_CAP)
}
