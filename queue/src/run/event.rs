//! The durable event log of a run: append (fenced), read after a `seq`, and follow live.
//!
//! Every insert into `run_events` notifies in its own transaction (a trigger does it, so no
//! statement can forget). `seq` numbers a run's events from 1 without gaps; it is the SSE event id.

use std::collections::VecDeque;

use serde_json::Value;
use sqlx::{Connection, PgExecutor, PgPool};
use uuid::Uuid;

use crate::db::Connections;
use crate::listener::{Listener, RunSignal, RunSubscription};
use crate::run::RunId;
use crate::run::claim::Lease;
use crate::run::ending::{End, lost_leases, write};
use crate::state::saver::Described;
use crate::{Error, Result};

/// How many events [`EventFollower`] reads per query when it catches up.
const READ_PAGE: i64 = 500;

/// An event to append to a run's log.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// The SSE event name: a stream mode (`values`, `updates`, `messages`, …), or `end`.
    pub event: String,
    pub data: Value,
}

impl NewEvent {
    pub fn new(event: impl Into<String>, data: Value) -> Self {
        Self {
            event: event.into(),
            data,
        }
    }
}

/// An event of a run's log.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEvent {
    pub run_id: RunId,
    pub seq: i64,
    pub event: String,
    pub data: Value,
}

/// Appends events to a held run's log; returns the `seq` of the last one.
///
/// # Errors
///
/// [`Error::LeaseLost`]: nothing was appended.
pub async fn append(
    executor: impl PgExecutor<'_>,
    lease: Lease,
    events: &[NewEvent],
) -> Result<i64> {
    let (lost, last_seqs) = append_many(executor, &[(lease, events)]).await?;
    match (lost.is_empty(), last_seqs.first()) {
        (true, Some((_, last_seq))) => Ok(*last_seq),
        (true, None) => Ok(0),
        (false, _) => Err(Error::LeaseLost {
            run_id: lease.run_id,
            attempt: lease.attempt,
        }),
    }
}

/// Appends the events of many held runs with one statement, so a worker flushes all its runs'
/// buffered events in one commit. Runs whose lease was lost get nothing appended.
///
/// Returns the lost leases, and the last `seq` of each run that got events.
pub async fn append_many(
    executor: impl PgExecutor<'_>,
    batches: &[(Lease, &[NewEvent])],
) -> Result<(Vec<Lease>, Vec<(RunId, i64)>)> {
    let last_seqs = append_runs(executor, batches).await?;
    let done: Vec<RunId> = last_seqs.iter().map(|(run_id, _)| *run_id).collect();
    let lost = lost_leases(batches.iter().map(|(lease, _)| *lease), &done);
    Ok((lost, last_seqs))
}

/// The statement of a write that only appends events (most of a publisher's flushes but the
/// last of each run): each held run's `event_seq` moves past its events, which go in with the
/// numbers it handed out. [`crate::run::ending::write_runs`] writes the same for events alone, in a statement that
/// also has described states, endings and their threads to take care of: this one costs
/// PostgreSQL half its time (bench/RESULTS.md).
///
/// Returns each run written with the `seq` of its last event; a run whose lease was lost is not
/// among them, and got nothing.
pub(crate) async fn append_runs(
    executor: impl PgExecutor<'_>,
    batches: &[(Lease, &[NewEvent])],
) -> Result<Vec<(RunId, i64)>> {
    let columns = EventColumns::of(batches);
    // N.B. As in `write_runs`: the run's row lock (`for no key update`, as the update takes it,
    // held until commit) fences the append, its status checked on the locked row, and bumping
    // `event_seq` hands out the numbers.
    let written = sqlx::query_file!(
        "queries/append_events.sql",
        &columns.run_ids,
        &columns.attempts,
        &columns.names as &[&str],
        &columns.datas as &[&Value],
    )
    .fetch_all(executor)
    .await?;
    Ok(written
        .into_iter()
        .map(|row| (row.run_id, row.last_seq))
        .collect())
}

/// Held runs' events as the columns a statement unnests, one row per event in order.
pub(crate) struct EventColumns<'a> {
    pub run_ids: Vec<Uuid>,
    pub attempts: Vec<i32>,
    pub names: Vec<&'a str>,
    pub datas: Vec<&'a Value>,
}

impl<'a> EventColumns<'a> {
    pub fn of(batches: &[(Lease, &'a [NewEvent])]) -> Self {
        let mut columns = Self {
            run_ids: Vec::new(),
            attempts: Vec::new(),
            names: Vec::new(),
            datas: Vec::new(),
        };
        for (lease, events) in batches {
            for event in *events {
                columns.run_ids.push(lease.run_id.0);
                columns.attempts.push(lease.attempt);
                columns.names.push(event.event.as_str());
                columns.datas.push(&event.data);
            }
        }
        columns
    }
}

/// Follows one run's events from a `seq` on: first what the log holds, then live events as they
/// are notified, each exactly once and in order, across listener reconnects and lagging.
///
/// It subscribes before it reads, so nothing committed between the read and the subscription is
/// missed; live events at or below the last delivered `seq` are dropped as duplicates; a gap, a
/// marker notification, a lag or a listener reconnect makes it re-read the log.
#[derive(Debug)]
pub struct EventFollower {
    pool: PgPool,
    subscription: RunSubscription,
    last_seq: i64,
    backlog: VecDeque<RunEvent>,
    /// The last read filled its page: the log may hold more than the backlog.
    more_in_log: bool,
}

impl EventFollower {
    /// Starts following `run_id` after `after_seq` (0 for the whole log; an SSE `Last-Event-ID`
    /// otherwise).
    ///
    /// # Errors
    ///
    /// [`Error::RunNotFound`] when the run does not exist.
    pub async fn start(
        pool: PgPool,
        listener: &Listener,
        run_id: RunId,
        after_seq: i64,
    ) -> Result<Self> {
        let subscription = listener.subscribe_run(run_id);
        let mut follower = Self {
            pool,
            subscription,
            last_seq: after_seq,
            backlog: VecDeque::new(),
            more_in_log: false,
        };
        follower.reread().await?;
        Ok(follower)
    }

    /// Follows a run from its first event without reading its log: `subscription` was made
    /// before the run was enqueued (with the id the caller chose, [`crate::NewRun::run_id`]), so
    /// the log held nothing the subscription will not be told of. Every event the run commits is
    /// notified after the subscription, and one the listener misses (a reconnect, a lag, a
    /// notification too large to carry its event) makes the follower re-read, as [`Self::start`]'s
    /// does.
    pub fn of_new_run(pool: PgPool, subscription: RunSubscription) -> Self {
        Self {
            pool,
            subscription,
            last_seq: 0,
            backlog: VecDeque::new(),
            more_in_log: false,
        }
    }

    /// The `seq` of the last event delivered.
    pub fn last_seq(&self) -> i64 {
        self.last_seq
    }

    /// The next event. Waits for it when the log holds nothing newer. Returns `None` once the
    /// listener has shut down.
    ///
    /// # Errors
    ///
    /// [`Error::RunNotFound`] when the run was deleted (rolled back) while followed.
    pub async fn next(&mut self) -> Result<Option<RunEvent>> {
        loop {
            if let Some(event) = self.backlog.pop_front() {
                self.last_seq = event.seq;
                return Ok(Some(event));
            }
            // Events committed before the subscription will never be notified: read them all.
            if self.more_in_log {
                self.reread().await?;
                continue;
            }
            match self.subscription.recv().await {
                None => return Ok(None),
                Some(RunSignal::Event(event)) if event.seq <= self.last_seq => {}
                Some(RunSignal::Event(event)) if event.seq == self.last_seq + 1 => {
                    self.last_seq = event.seq;
                    return Ok(Some(event));
                }
                Some(RunSignal::Event(_) | RunSignal::Reread) => self.reread().await?,
            }
        }
    }

    /// Reads the log after the last delivered event, and in the same statement whether the run
    /// is still there when the log holds nothing newer (a rolled-back run is deleted with its
    /// events, and a follower that subscribed after the deletion is told of nothing).
    async fn reread(&mut self) -> Result {
        let run_id = self.subscription.run_id();
        // N.B. The page, or else one row without an event that says whether the run exists.
        let rows = sqlx::query!(
            r#"
            with page as (
                select seq, event, data
                from mostrador.run_events
                where run_id = $1
                  and seq > $2
                order by seq
                limit $3
            )
            select seq as "seq?", event as "event?", data as "data?", true as "run_exists!"
            from page
            union all
            select null, null, null, exists (select 1 from mostrador.runs where run_id = $1)
            where not exists (select 1 from page)
            order by 1
            "#,
            run_id.0,
            self.last_seq,
            READ_PAGE,
        )
        .fetch_all(&self.pool)
        .await?;
        if rows.iter().any(|row| !row.run_exists) {
            return Err(Error::RunNotFound(run_id));
        }
        let events: Vec<RunEvent> = rows
            .into_iter()
            .filter_map(|row| {
                Some(RunEvent {
                    run_id,
                    seq: row.seq?,
                    event: row.event?,
                    data: row.data?,
                })
            })
            .collect();
        self.more_in_log = events.len() as i64 == READ_PAGE;
        self.backlog.extend(events);
        Ok(())
    }
}

/// Where a run stands in its thread's queue, for following a thread's runs one after another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuedRun {
    pub run_id: RunId,
    /// Its place in the queue: a thread's runs execute in this order.
    pub queue_seq: i64,
    /// The `seq` of its last event so far.
    pub event_seq: i64,
    /// A state update queued as a run (Python graphs), not one of the thread's runs.
    pub state_update: bool,
}

/// The first run of `thread_id` queued after `after_queue_seq` (0 for its first run).
///
/// # Errors
///
/// The database failed.
pub async fn next_on_thread(
    executor: impl PgExecutor<'_>,
    thread_id: crate::ThreadId,
    after_queue_seq: i64,
) -> Result<Option<QueuedRun>> {
    let next = sqlx::query_as!(
        QueuedRun,
        r#"
        select
            run_id as "run_id: RunId",
            seq as queue_seq,
            event_seq,
            coalesce(command ? 'update_state', false) as "state_update!"
        from mostrador.runs
        where thread_id = $1
          and seq > $2
        order by seq
        limit 1
        "#,
        thread_id.0,
        after_queue_seq,
    )
    .fetch_optional(executor)
    .await?;
    Ok(next)
}

/// The `seq` of a run's latest event (0 before its first).
///
/// # Errors
///
/// [`Error::RunNotFound`]; the database failed.
pub async fn last_seq(executor: impl PgExecutor<'_>, run_id: RunId) -> Result<i64> {
    sqlx::query_scalar!(
        "select event_seq from mostrador.runs where run_id = $1",
        run_id.0
    )
    .fetch_optional(executor)
    .await?
    .ok_or(Error::RunNotFound(run_id))
}

/// What is going on in a thread now: its first run still pending or running, or else the place of
/// its last run in the queue (0 for none), after which new runs come.
///
/// # Errors
///
/// The database failed.
pub async fn now_on_thread(
    executor: impl PgExecutor<'_>,
    thread_id: crate::ThreadId,
) -> Result<std::result::Result<QueuedRun, i64>> {
    let row = sqlx::query!(
        r#"
        select
            run_id as "run_id: RunId",
            seq as queue_seq,
            event_seq,
            coalesce(command ? 'update_state', false) as "state_update!",
            status in ('pending', 'running') as "unfinished!"
        from mostrador.runs
        where thread_id = $1
        order by
            status in ('pending', 'running') desc,
            case when status in ('pending', 'running') then seq end,
            seq desc
        limit 1
        "#,
        thread_id.0,
    )
    .fetch_optional(executor)
    .await?;
    Ok(match row {
        Some(row) if row.unfinished => Ok(QueuedRun {
            run_id: row.run_id,
            queue_seq: row.queue_seq,
            event_seq: row.event_seq,
            state_update: row.state_update,
        }),
        Some(row) => Err(row.queue_seq),
        None => Err(0),
    })
}

/// What a worker's publisher writes at once, in one statement ([`crate::run::ending::write`]; one
/// transaction when a run is rolled back): the described states of Python graphs' checkpoints,
/// the events, then the runs' endings (after which nothing may be appended). Returns the leases
/// found lost. The publisher's writes follow each other on one [`Connections::kept`].
///
/// # Errors
///
/// The database failed: nothing was written.
pub async fn publish(
    connections: &Connections,
    described: &[(Lease, &[Described])],
    appends: &[(Lease, &[NewEvent])],
    ends: &[End],
) -> Result<Vec<Lease>> {
    if appends.is_empty() && ends.is_empty() && described.is_empty() {
        return Ok(Vec::new());
    }
    let mut connection = connections.take().await?;
    // One statement, a transaction of its own, unless a run is rolled back or has its final
    // checkpoint written with its ending.
    let lost = if ends.iter().all(End::writes_alone) {
        write(&mut connection, described, appends, ends).await?
    } else {
        let mut tx = connection.begin().await?;
        let lost = write(&mut tx, described, appends, ends).await?;
        tx.commit().await?;
        lost
    };
    connection.done();
    Ok(lost)
}
