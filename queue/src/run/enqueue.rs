//! Enqueueing runs: one at a time (locking the thread, applying its multitask strategy, bounded
//! by the graph's queue limit) or in batches of one statement ([`batch`]), waking the claimers.

use std::time::Duration;

use sqlx::{Acquire, PgConnection, Postgres};

use crate::listener::RUNS_CHANNEL;
use crate::run::cancel::{CancelOutcome, cancel_in_tx};
use crate::run::lease::WorkerId;
use crate::run::{CancelAction, MultitaskStrategy, NewRun, Run, RunCommand, RunId, RunStatus};
use crate::thread::{NewThread, Thread, ThreadId};
use crate::{Error, Result};

mod batch;

pub use batch::enqueue_batch;

/// The bounds a caller's runs are enqueued under: a per-graph bound on pending runs, for those due
/// now and, apart, for those delayed to later (over it, [`Error::Backpressure`]); each caller's
/// share of pending runs, all graphs together (over it, [`Error::CallerShare`]); and how far
/// ahead a run may be delayed (past it, [`Error::Invalid`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimit {
    pub max_pending: i64,
    /// Pending runs of one owner (a thread's owner: the caller), due now or delayed.
    pub max_pending_per_caller: i64,
    /// The furthest a run may be delayed (`after_seconds`).
    pub horizon: Duration,
    /// What the caller is told to wait before trying again.
    pub retry_after: Duration,
}

/// [`QueueLimit::max_pending_per_caller`] unless configured.
pub const MAX_PENDING_PER_CALLER_DEFAULT: i64 = 1_000;
/// [`QueueLimit::horizon`] unless configured: a year.
pub const HORIZON_DEFAULT: Duration = Duration::from_secs(366 * 24 * 3600);

impl QueueLimit {
    /// `max_pending` per graph; the other bounds at their defaults, a second's retry.
    pub fn new(max_pending: i64) -> Self {
        Self {
            max_pending,
            max_pending_per_caller: MAX_PENDING_PER_CALLER_DEFAULT,
            horizon: HORIZON_DEFAULT,
            retry_after: Duration::from_secs(1),
        }
    }

    /// [`Error::Invalid`] for a run delayed past the horizon.
    fn check_delay(&self, new: &NewRun) -> Result {
        if new.after > self.horizon {
            return Err(Error::Invalid {
                field: "after_seconds",
                reason: format!("must be at most {} seconds", self.horizon.as_secs()),
            });
        }
        Ok(())
    }
}

/// The result of [`enqueue`].
#[derive(Debug, Clone)]
pub struct Enqueued {
    pub run: Run,
    /// Runs in flight that the `interrupt` or `rollback` strategy cancelled.
    pub cancelled: Vec<(RunId, CancelOutcome)>,
}

/// Enqueues one run. With the `enqueue` strategy it is one statement, a transaction of its own:
/// lock the thread, check the queue's limits, insert, bind the thread to the graph by its first
/// run, NOTIFY the claimers. With another strategy, in one transaction: lock the thread, read its
/// runs in flight, refuse or cancel them, then that statement.
///
/// Pass a pool, a connection or an open transaction (the enqueue then commits with it).
///
/// # Errors
///
/// [`Error::ThreadNotFound`], [`Error::GraphMismatch`], [`Error::Conflict`] (`reject`),
/// [`Error::Backpressure`], [`Error::CallerShare`], [`Error::Invalid`]. On any error nothing was
/// written.
pub async fn enqueue<'a>(
    db: impl Acquire<'a, Database = Postgres>,
    new: &NewRun,
    limit: Option<QueueLimit>,
) -> Result<Enqueued> {
    let mut conn = db.acquire().await?;
    enqueue_on(&mut conn, new, limit).await
}

/// [`enqueue`] on a connection (or in a transaction, as a savepoint of it).
pub(crate) async fn enqueue_on(
    conn: &mut PgConnection,
    new: &NewRun,
    limit: Option<QueueLimit>,
) -> Result<Enqueued> {
    new.validate()?;
    if let Some(limit) = limit {
        limit.check_delay(new)?;
    }
    // What the strategy does to the runs the thread has in flight: none refuses the run.
    let action = match new.multitask_strategy {
        MultitaskStrategy::Enqueue => {
            // Queued behind whatever the thread has in flight: nothing to read first.
            let run = insert(conn, new, limit).await?;
            return Ok(Enqueued {
                run,
                cancelled: Vec::new(),
            });
        }
        MultitaskStrategy::Reject => None,
        MultitaskStrategy::Interrupt => Some(CancelAction::Interrupt),
        MultitaskStrategy::Rollback => Some(CancelAction::Rollback),
    };

    let mut tx = conn.begin().await?;
    // The thread's row lock serializes enqueues on one thread, so two `reject` runs cannot both
    // see an empty thread, and `seq` follows the order of their decisions. The runs in flight are
    // read by the next statement, whose snapshot is taken after the lock is held.
    let thread_graph_id = sqlx::query_scalar!(
        r#"
        -- By its id alone, then checked (see `crate::db`).
        with locked as materialized (
            select graph_id, deleted_at
            from mostrador.threads
            where thread_id = $1
            for no key update
        )
        select graph_id
        from locked
        where deleted_at is null
        "#,
        new.thread_id.0,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::ThreadNotFound(new.thread_id))?;
    // Checked before any run of the thread is cancelled for it.
    if let Some(thread_graph_id) = thread_graph_id
        && thread_graph_id != new.graph_id
        && !new.rebinds
    {
        return Err(Error::GraphMismatch {
            thread_id: new.thread_id,
            thread_graph_id,
            graph_id: new.graph_id.clone(),
        });
    }
    let in_flight: Vec<RunId> = sqlx::query_scalar!(
        r#"
        select run_id as "run_id!"
        from mostrador.runs
        where thread_id = $1
          and status in ('pending', 'running')
        order by seq
        "#,
        new.thread_id.0,
    )
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(RunId)
    .collect();
    let cancelled = match (action, in_flight.first()) {
        (_, None) => Vec::new(),
        (None, Some(run_id)) => {
            return Err(Error::Conflict {
                thread_id: new.thread_id,
                run_id: *run_id,
            });
        }
        (Some(action), Some(_)) => cancel_in_tx(&mut tx, new.thread_id, &in_flight, action).await?,
    };
    let run = insert(&mut tx, new, limit).await?;
    tx.commit().await?;
    Ok(Enqueued { run, cancelled })
}

/// How often [`insert`] tries again when its checks refused a run and a look after finds nothing
/// to refuse it for (what it counted changed in between).
const INSERT_TRIES: u32 = 3;

/// Inserts the run behind whatever its thread has in flight, in one statement, refused when its
/// thread is missing or of another graph, or when a bound of `limit` is reached.
async fn insert(conn: &mut PgConnection, new: &NewRun, limit: Option<QueueLimit>) -> Result<Run> {
    let delayed = !new.after.is_zero();
    let (run_id, trace_id) = new.id_and_trace();
    let config = new.config.to_value();
    let command = new.command.as_ref().map(RunCommand::to_value);
    for _ in 0..INSERT_TRIES {
        // The thread's row lock serializes this run's insert with the api's state updates (which
        // check under it that no run is in flight) and with other enqueues on the thread. A
        // thread bound while the statement waited for the lock is seen bound (its newest version
        // being what the lock returns); the counts are the statement's snapshot, as loose as any
        // count of other threads' runs.
        // The thread's first run binds it, and its metadata names the graph and the run's
        // assistant, as the official server's does (clients list a graph's threads by them); what
        // the metadata says already stays, but when a run of another graph rebinds it.
        // A caller's run queues behind the runs of callers with fewer runs waiting: it comes after
        // as many priority levels as the caller has runs pending, so one caller's backlog never
        // stands before another caller's next run.
        // N.B. A delayed run wakes nobody now: the claimers' poll finds it when it is due.
        let run = sqlx::query_file_as!(
            Run,
            "queries/enqueue_run.sql",
            run_id,
            new.thread_id.0,
            new.graph_id,
            new.input,
            command,
            config,
            new.metadata,
            new.multitask_strategy as MultitaskStrategy,
            new.priority,
            new.after.as_secs_f64(),
            new.max_attempts,
            trace_id,
            &new.stream_mode_names() as &[&str],
            new.webhook,
            delayed,
            limit.map_or(0, |limit| limit.max_pending),
            limit.map_or(0, |limit| limit.max_pending_per_caller),
            limit.is_some(),
            RUNS_CHANNEL,
            new.streamed,
            new.rebinds,
        )
        .fetch_optional(&mut *conn)
        .await?;
        if let Some(run) = run {
            return Ok(run);
        }
        refusal(&mut *conn, new, limit).await?;
    }
    // What was counted kept changing: the queue is busy, try again.
    let limit = limit.unwrap_or_else(|| QueueLimit::new(0));
    Err(Error::Backpressure {
        graph_id: new.graph_id.clone(),
        pending: limit.max_pending,
        limit: limit.max_pending,
        retry_after: limit.retry_after,
    })
}

/// Why [`insert`] refused `new`, looked at again: the error, or `Ok` when nothing refuses it now.
async fn refusal(conn: &mut PgConnection, new: &NewRun, limit: Option<QueueLimit>) -> Result {
    let seen = sqlx::query!(
        r#"
        select
            graph_id,
            owner,
            (
                select count(*)
                from (
                    select 1
                    from mostrador.runs
                    where status = 'pending'
                      and graph_id = $2
                      and (available_at > now()) = $3
                    limit $4
                ) p
            ) as "graph_pending!",
            (
                select count(*)
                from (
                    select 1
                    from mostrador.runs r
                    where r.status = 'pending'
                      and r.owner = t.owner
                    limit $5
                ) p
            ) as "caller_pending!"
        -- By its id alone (see `crate::db`).
        from (select * from mostrador.threads where thread_id = $1 offset 0) t
        where deleted_at is null
        "#,
        new.thread_id.0,
        new.graph_id,
        !new.after.is_zero(),
        limit.map_or(0, |limit| limit.max_pending),
        limit.map_or(0, |limit| limit.max_pending_per_caller),
    )
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(Error::ThreadNotFound(new.thread_id))?;
    if let Some(thread_graph_id) = seen.graph_id
        && thread_graph_id != new.graph_id
        && !new.rebinds
    {
        return Err(Error::GraphMismatch {
            thread_id: new.thread_id,
            thread_graph_id,
            graph_id: new.graph_id.clone(),
        });
    }
    if let Some(limit) = limit {
        within_limit(&new.graph_id, seen.graph_pending, 1, limit)?;
        within_share(&seen.owner, seen.caller_pending, limit)?;
    }
    Ok(())
}

/// Creates each run's thread, with the id the run names, and enqueues the run on it: all in one
/// transaction, all or nothing. `None` when one of the ids is a thread's already (anyone's):
/// nothing was written.
///
/// # Errors
///
/// As [`crate::thread::create_with_id`] and [`enqueue`]; on any error nothing was written.
pub async fn enqueue_on_new_threads<'a>(
    db: impl Acquire<'a, Database = Postgres>,
    runs: &[(NewThread, NewRun)],
    limit: Option<QueueLimit>,
) -> Result<Option<Vec<(Thread, Enqueued)>>> {
    let mut tx = db.begin().await?;
    let mut enqueued = Vec::with_capacity(runs.len());
    for (new_thread, new_run) in runs {
        let Some(thread) =
            crate::thread::create_with_id(&mut *tx, new_run.thread_id.0, new_thread).await?
        else {
            return Ok(None);
        };
        let run = enqueue_on(&mut tx, new_run, limit).await?;
        enqueued.push((thread, run));
    }
    tx.commit().await?;
    Ok(Some(enqueued))
}

/// Fails with [`Error::Backpressure`] when `adding` runs to the graph's `pending` would pass its
/// bound.
fn within_limit(graph_id: &str, pending: i64, adding: i64, limit: QueueLimit) -> Result {
    if pending + adding > limit.max_pending {
        return Err(Error::Backpressure {
            graph_id: graph_id.to_owned(),
            pending,
            limit: limit.max_pending,
            retry_after: limit.retry_after,
        });
    }
    Ok(())
}

/// Fails with [`Error::CallerShare`] when `owner` has their share of pending runs already (due
/// or delayed, every graph), counted at most up to the share through the index of pending runs
/// by owner.
fn within_share(owner: &str, pending: i64, limit: QueueLimit) -> Result {
    if pending >= limit.max_pending_per_caller {
        return Err(Error::CallerShare {
            owner: owner.to_owned(),
            pending,
            limit: limit.max_pending_per_caller,
            retry_after: limit.retry_after,
        });
    }
    Ok(())
}
