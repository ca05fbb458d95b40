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

use std::time::Duration;

use serde_json::Value;
use sqlx::{Acquire, PgConnection, PgExecutor, Postgres};

use crate::Result;
use crate::cancel::delete_runs;
use crate::claim::{ClaimedRun, Lease};
use crate::event::{EventColumns, NewEvent, append_runs};
use crate::listener::RUNS_CHANNEL;
use crate::run::{RunId, RunStatus};
use crate::saver::Described;
use crate::thread::{ThreadId, ThreadStatus};

/// The first delay before a retryable failure is tried again; it doubles with each attempt used.
pub const RETRY_BACKOFF_BASE: Duration = Duration::from_secs(2);
/// The longest delay between retries.
pub const RETRY_BACKOFF_CAP: Duration = Duration::from_secs(600);

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
}

impl End {
    pub fn lease(&self) -> Lease {
        self.lease
    }

    pub fn after(&self) -> After {
        self.after
    }
}

/// Writes many claimed runs' endings: one statement for every ending but rollbacks (each run's
/// status, its events, its thread's resting status and `last_activity_at`), then one per
/// rollback. Claimers are woken for a released run, and for threads that have a run queued
/// behind one that ended. Run it in a transaction to commit it with other writes; outside one,
/// each statement commits by itself.
///
/// Returns the leases that were lost; those runs were left untouched.
pub async fn end_many(conn: &mut PgConnection, ends: &[End]) -> Result<Vec<Lease>> {
    write(conn, &[], &[], ends).await
}

/// Writes held runs' described states, events and endings as [`end_many`] does, in the same
/// statement, in that order: a run's last events and its ending commit together, and a client
/// that sees an event reads a state at least as new. Without rollbacks the whole write is that
/// one statement, a transaction of its own.
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
/// ([`crate::event::append_runs`]), which spares PostgreSQL the rest of this one.
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
    let written = sqlx::query!(
        r#"
        with events as (
            select *
            from unnest($1::uuid[], $2::int[], $3::text[], $4::jsonb[]) with ordinality
                as e(run_id, attempt, event, data, ord)
        ),
        ends as (
            select *
            from unnest(
                $5::uuid[], $6::int[], $7::mostrador.run_status[], $8::mostrador.thread_status[],
                $9::float8[], $10::bool[], $11::jsonb[], $12::text[]
            ) as i(run_id, attempt, status, thread_status, delay_secs, released, error, reason)
        ),
        -- Each run written: how many events it gets, and its ending if it ends (with `ending`, the
        -- events the ending itself logs: `error` and `end` for an error, `end` for the other
        -- endings, `drained` for a release, none for a retry).
        input as (
            select
                run_id,
                attempt,
                coalesce(c.n, 0) as n,
                i.status,
                i.thread_status,
                i.delay_secs,
                coalesce(i.released, false) as released,
                i.error,
                i.reason,
                case
                    when i.status = 'error' then 2
                    when i.status <> 'pending' or i.released then 1
                    else 0
                end as ending
            from (
                select run_id, attempt, count(*) as n
                from events
                group by run_id, attempt
            ) c
            full join ends i using (run_id, attempt)
        ),
        -- Threads before runs, in one order: the order of the statements that lock a thread, then
        -- change its runs (deleting it, enqueueing with `interrupt` or `rollback`). The other
        -- order deadlocks with them (see the lock order in this module's documentation).
        -- N.B. Runs and threads are found by primary key through arrays, in this statement's
        -- generic plan too (joined, the plan made while `runs` was small scans it whole).
        threads_locked as (
            select t.thread_id
            from mostrador.threads t
            where t.thread_id = any(array(
                select r.thread_id
                from mostrador.runs r
                where r.run_id = any($5::uuid[])
            ))
            order by t.thread_id
            for no key update of t
        ),
        -- The states Python graphs described at their checkpoints, as the api will serve them,
        -- written before the events sent after them. Where a run describes a checkpoint twice,
        -- the last description wins.
        -- N.B. As the checkpoint writes, the fence holds each run's row lock (`for key share`)
        -- for the statement, so no transition out of `running` commits between the check and
        -- the write.
        states as (
            select distinct on (run_id, checkpoint_id) run_id, attempt, checkpoint_id, snapshot
            from unnest($14::uuid[], $15::int[], $16::uuid[], $17::jsonb[]) with ordinality
                as d(run_id, attempt, checkpoint_id, snapshot, ord)
            order by run_id, checkpoint_id, ord desc
        ),
        -- N.B. Each run's status is checked on the row its lock returned, not in the scan (see
        -- `crate::db`).
        described_locked as materialized (
            select r.run_id, r.attempt, r.thread_id, r.status
            from mostrador.runs r
            where r.run_id = any($14::uuid[])
              and (r.run_id, r.attempt) in (select run_id, attempt from states)
              -- Always true; evaluated once, before any run is locked (threads first).
              and (select count(*) from threads_locked) >= 0
            for key share
        ),
        held as (
            select run_id, attempt, thread_id
            from described_locked
            where status = 'running'
        ),
        -- N.B. Each checkpoint by its whole primary key: with the run's thread and the
        -- checkpoint in one relation (`offset 0` keeps it one), the plan cannot probe by the
        -- checkpoint's id alone, reading every thread's entries (as a generic plan made on small
        -- tables did).
        recorded as (
            update mostrador.checkpoints c
            set snapshot = t.snapshot
            from (
                select h.thread_id, d.checkpoint_id, d.snapshot
                from states d
                join held h on h.run_id = d.run_id and h.attempt = d.attempt
                offset 0
            ) t
            where c.thread_id = t.thread_id
              and c.checkpoint_ns = ''
              and c.checkpoint_id = t.checkpoint_id
        ),
        -- N.B. `for update`, not the plain update's `for no key update`: an ending must wait for
        -- checkpoint writes in flight, which lock `for key share` (see `checkpoint`). Events
        -- alone need not.
        ending_locked as materialized (
            select r.run_id, r.status
            from mostrador.runs r
            join ends i on i.run_id = r.run_id and i.attempt = r.attempt
            where r.run_id = any($5::uuid[])
              -- Always true; evaluated once, before any run is locked.
              and (select count(*) from threads_locked) >= 0
            for update of r
        ),
        -- Runs that only get events, locked as the update locks them.
        appending_locked as materialized (
            select r.run_id, r.status
            from mostrador.runs r
            join input i on i.run_id = r.run_id and i.attempt = r.attempt
            where r.run_id = any(array(select run_id from input where status is null))
              -- Always true; evaluated once, before any run is locked.
              and (select count(*) from threads_locked) >= 0
            for no key update of r
        ),
        written as (
            update mostrador.runs r
            set status = coalesce(i.status, r.status),
                finished_at = case
                    when i.status is null then r.finished_at
                    when i.status = 'pending' then null
                    else now()
                end,
                available_at = coalesce(now() + make_interval(secs => i.delay_secs), r.available_at),
                lease_owner = case when i.status = 'pending' then null else r.lease_owner end,
                drain_count = r.drain_count + i.released::int,
                error = coalesce(i.error, r.error),
                updated_at = case when i.status is null then r.updated_at else now() end,
                event_seq = r.event_seq + i.n + i.ending
            from input i
            where r.run_id = any(array(
                    select run_id from ending_locked where status = 'running'
                    union all
                    select run_id from appending_locked where status = 'running'
                ))
              and r.run_id = i.run_id
              and r.attempt = i.attempt
              -- Always true; evaluated once, before any run is updated: a run this statement has
              -- updated can no longer be locked by it, and its state would go unrecorded.
              and (select count(*) from held) >= 0
            returning
                r.run_id, r.thread_id, r.graph_id, r.attempt, r.error, r.event_seq,
                r.event_seq - i.n - i.ending as base, i.status as ended, i.thread_status,
                i.released, i.reason
        ),
        logged as (
            insert into mostrador.run_events (run_id, seq, event, data)
            select
                e.run_id,
                w.base + row_number() over (partition by e.run_id order by e.ord),
                e.event,
                e.data
            from events e
            join written w on w.run_id = e.run_id
            union all
            select run_id, event_seq - 1, 'error', error
            from written
            where ended = 'error'
            union all
            select run_id, event_seq, 'end', jsonb_build_object('status', ended)
            from written
            where ended <> 'pending'
            union all
            select run_id, event_seq, 'drained', jsonb_build_object('reason', reason, 'attempt', attempt)
            from written
            where released
        ),
        rested as (
            update mostrador.threads t
            set status = w.thread_status,
                state_updated_at = now(),
                updated_at = now(),
                -- The retention clock, restarted at most once a minute: unchanged, the thread's
                -- indexes are too, and the update stays on its page (migration 0018).
                last_activity_at = case
                    when t.last_activity_at < now() - interval '1 minute' then now()
                    else t.last_activity_at
                end
            from written w
            where t.thread_id = w.thread_id
              and w.thread_status is not null
        )
        select
            w.run_id as "run_id!: RunId",
            w.event_seq as "last_seq?",
            case
                -- N.B. Probed through `runs_thread_active_idx`, the one index whose predicate
                -- this one implies: as `status = 'pending'`, a generic plan made on a small table
                -- read every pending run's entry of `runs_pending_owner_idx` on every ending. (The
                -- snapshot still sees the ended run running; a thread runs one run at a time.)
                when w.released or (
                    w.ended <> 'pending'
                    and exists (
                        select 1
                        from mostrador.runs q
                        where q.thread_id = w.thread_id
                          and q.status in ('pending', 'running')
                          and q.run_id <> w.run_id
                    )
                ) then pg_notify($13, w.graph_id)::text
            end as "woken"
        from written w
        union all
        -- Runs that only described states.
        select h.run_id, null, null
        from held h
        where not exists (select 1 from written w where w.run_id = h.run_id)
        "#,
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
