//! Enqueueing runs: one at a time (locking the thread, applying its multitask strategy, bounded
//! by the graph's queue limit) or in batches of one statement, waking the claimers.

use std::time::Duration;

use serde_json::Value;
use sqlx::{Acquire, PgConnection, Postgres};
use uuid::Uuid;

use crate::cancel::{CancelOutcome, cancel_in_tx};
use crate::lease::WorkerId;
use crate::listener::RUNS_CHANNEL;
use crate::run::{CancelAction, MultitaskStrategy, NewRun, Run, RunId, RunStatus};
use crate::thread::{NewThread, Thread, ThreadId};
use crate::{Error, Result};

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
    if new.multitask_strategy == MultitaskStrategy::Enqueue {
        // Queued behind whatever the thread has in flight: nothing to read first.
        let run = insert(conn, new, limit).await?;
        return Ok(Enqueued {
            run,
            cancelled: Vec::new(),
        });
    }

    let mut tx = conn.begin().await?;
    // The thread's row lock serializes enqueues on one thread, so two `reject` runs cannot both
    // see an empty thread, and `seq` follows the order of their decisions. The runs in flight are
    // read by the next statement, whose snapshot is taken after the lock is held.
    let thread_graph_id = sqlx::query_scalar!(
        r#"
        select graph_id
        from mostrador.threads
        where thread_id = $1
          and deleted_at is null
        for no key update
        "#,
        new.thread_id.0,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::ThreadNotFound(new.thread_id))?;
    // Checked before any run of the thread is cancelled for it.
    if let Some(thread_graph_id) = thread_graph_id
        && thread_graph_id != new.graph_id
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
    let cancelled = match (new.multitask_strategy, in_flight.first()) {
        (_, None) | (MultitaskStrategy::Enqueue, _) => Vec::new(),
        (MultitaskStrategy::Reject, Some(run_id)) => {
            return Err(Error::Conflict {
                thread_id: new.thread_id,
                run_id: *run_id,
            });
        }
        (MultitaskStrategy::Interrupt, Some(_)) => {
            cancel_in_tx(&mut tx, new.thread_id, &in_flight, CancelAction::Interrupt).await?
        }
        (MultitaskStrategy::Rollback, Some(_)) => {
            cancel_in_tx(&mut tx, new.thread_id, &in_flight, CancelAction::Rollback).await?
        }
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
    for _ in 0..INSERT_TRIES {
        // The thread's row lock serializes this run's insert with the api's state updates (which
        // check under it that no run is in flight) and with other enqueues on the thread. A
        // thread bound while the statement waited for the lock is seen bound (its newest version
        // being what the lock returns); the counts are the statement's snapshot, as loose as any
        // count of other threads' runs.
        // The thread's first run binds it, and its metadata names the graph and the run's
        // assistant, as the official server's does (clients list a graph's threads by them); what
        // the metadata says already stays.
        // A caller's run queues behind the runs of callers with fewer runs waiting: it comes after
        // as many priority levels as the caller has runs pending, so one caller's backlog never
        // stands before another caller's next run.
        // N.B. A delayed run wakes nobody now: the claimers' poll finds it when it is due.
        let run = sqlx::query_as!(
            Run,
            r#"
            with thread as (
                select graph_id, owner
                from mostrador.threads
                where thread_id = $2
                  and deleted_at is null
                for no key update
            ),
            seen as materialized (
                select
                    (
                        select count(*)
                        from (
                            select 1
                            from mostrador.runs
                            where status = 'pending'
                              and graph_id = $3
                              and (available_at > now()) = $15
                            limit $16
                        ) p
                    ) as graph_pending,
                    (
                        select count(*)
                        from (
                            select 1
                            from mostrador.runs
                            where status = 'pending'
                              and owner = (select owner from thread)
                            limit $17
                        ) p
                    ) as caller_pending
            ),
            inserted as (
                insert into mostrador.runs (
                    run_id, thread_id, graph_id, input, command, config, metadata,
                    multitask_strategy, priority, available_at, max_attempts, trace_id, stream_mode,
                    owner, webhook
                )
                select
                    $1, $2, $3, $4, $5, $6, $7, $8,
                    least($9::int + seen.caller_pending, 2147483647)::int,
                    now() + make_interval(secs => $10), $11,
                    -- Every run has a trace: its creator's, or one of its own.
                    coalesce($12, replace(gen_random_uuid()::text, '-', '')), $13, thread.owner,
                    $14
                from thread, seen
                where (thread.graph_id is null or thread.graph_id = $3)
                  and (not $18 or (seen.graph_pending < $16 and seen.caller_pending < $17))
                returning
                    run_id, thread_id, graph_id, status, input, command, config, metadata,
                    multitask_strategy, priority, available_at, attempt, max_attempts,
                    drain_count, lease_owner, cancel_action, error, trace_id, stream_mode,
                    created_at, updated_at, started_at, finished_at,
                    case when not $15 then pg_notify($19, graph_id)::text end as woken
            ),
            bound as (
                update mostrador.threads t
                set graph_id = $3,
                    metadata = jsonb_strip_nulls(jsonb_build_object(
                        'graph_id', $3::text,
                        'assistant_id', $7::jsonb -> 'assistant_id'
                    )) || t.metadata,
                    updated_at = now()
                from thread
                where t.thread_id = $2
                  and thread.graph_id is null
                  and exists (select 1 from inserted)
            )
            select
                run_id as "run_id!: RunId",
                thread_id as "thread_id!: ThreadId",
                graph_id as "graph_id!",
                status as "status!: RunStatus",
                input,
                command,
                config as "config!",
                metadata as "metadata!",
                multitask_strategy as "multitask_strategy!: MultitaskStrategy",
                priority as "priority!",
                available_at as "available_at!",
                attempt as "attempt!",
                max_attempts as "max_attempts!",
                drain_count as "drain_count!",
                lease_owner as "lease_owner: WorkerId",
                cancel_action as "cancel_action: CancelAction",
                error,
                trace_id,
                stream_mode as "stream_mode!",
                created_at as "created_at!",
                updated_at as "updated_at!",
                started_at,
                finished_at
            from inserted
            "#,
            Uuid::now_v7(),
            new.thread_id.0,
            new.graph_id,
            new.input,
            new.command,
            new.config,
            new.metadata,
            new.multitask_strategy as MultitaskStrategy,
            new.priority,
            new.after.as_secs_f64(),
            new.max_attempts,
            new.trace_id,
            &new.stream_mode_names(),
            new.webhook,
            delayed,
            limit.map_or(0, |limit| limit.max_pending),
            limit.map_or(0, |limit| limit.max_pending_per_caller),
            limit.is_some(),
            RUNS_CHANNEL,
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
        from mostrador.threads t
        where thread_id = $1
          and deleted_at is null
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

/// Enqueues many runs with one insert statement and one NOTIFY per graph, for batch schedulers.
/// Runs queue behind whatever their threads have in flight (the `enqueue` strategy), whatever
/// their `multitask_strategy` says. `limit` bounds the graphs' queues and the delays; the callers'
/// shares are [`enqueue`]'s, for runs callers ask for one by one.
///
/// # Errors
///
/// [`Error::ThreadNotFound`] or [`Error::GraphMismatch`] for the first run whose thread is
/// missing or of another graph, [`Error::Backpressure`] when the batch would take any graph over
/// `limit`, [`Error::Invalid`]. On any error nothing was written.
pub async fn enqueue_batch<'a>(
    db: impl Acquire<'a, Database = Postgres>,
    news: &[NewRun],
    limit: Option<QueueLimit>,
) -> Result<Vec<RunId>> {
    let n = news.len();
    let mut run_ids = Vec::with_capacity(n);
    let mut thread_ids = Vec::with_capacity(n);
    let mut graph_ids = Vec::with_capacity(n);
    let mut inputs = Vec::with_capacity(n);
    let mut commands = Vec::with_capacity(n);
    let mut configs = Vec::with_capacity(n);
    let mut metadatas = Vec::with_capacity(n);
    let mut strategies = Vec::with_capacity(n);
    let mut priorities = Vec::with_capacity(n);
    let mut afters = Vec::with_capacity(n);
    let mut max_attempts = Vec::with_capacity(n);
    let mut trace_ids = Vec::with_capacity(n);
    let mut stream_modes = Vec::with_capacity(n);
    let mut webhooks = Vec::with_capacity(n);
    for new in news {
        new.validate()?;
        run_ids.push(Uuid::now_v7());
        thread_ids.push(new.thread_id.0);
        graph_ids.push(new.graph_id.clone());
        inputs.push(new.input.clone());
        commands.push(new.command.clone());
        configs.push(new.config.clone());
        metadatas.push(new.metadata.clone());
        strategies.push(new.multitask_strategy);
        priorities.push(new.priority);
        afters.push(new.after.as_secs_f64());
        max_attempts.push(new.max_attempts);
        trace_ids.push(new.trace_id.clone());
        // One text per run (unnest flattens arrays of arrays); mode names hold no comma.
        stream_modes.push(new.stream_mode_names().join(","));
        webhooks.push(new.webhook.clone());
    }

    let mut tx = db.begin().await?;
    if let Some(limit) = limit {
        for new in news {
            limit.check_delay(new)?;
        }
        // Due and delayed runs count against budgets of their own, per graph.
        let mut per_graph: Vec<(&str, bool, i64)> = Vec::new();
        for new in news {
            let delayed = !new.after.is_zero();
            match per_graph
                .iter_mut()
                .find(|(g, d, _)| *g == new.graph_id && *d == delayed)
            {
                Some((_, _, count)) => *count += 1,
                None => per_graph.push((&new.graph_id, delayed, 1)),
            }
        }
        for (graph_id, delayed, count) in per_graph {
            check_limit(&mut tx, graph_id, delayed, count, limit).await?;
        }
    }

    // The join drops runs whose thread is missing, deleted or of another graph; the count tells.
    // `order by ord` keeps `seq` in input order, so runs of one thread run in the order given.
    let inserted = sqlx::query_scalar!(
        r#"
        with input as (
            select *
            from unnest(
                $1::uuid[], $2::uuid[], $3::text[], $4::jsonb[], $5::jsonb[], $6::jsonb[],
                $7::jsonb[], $8::mostrador.multitask_strategy[], $9::int[], $10::float8[],
                $11::int[], $12::text[], $13::text[], $14::text[]
            ) with ordinality as i(
                run_id, thread_id, graph_id, input, command, config, metadata,
                multitask_strategy, priority, after_secs, max_attempts, trace_id, stream_mode,
                webhook, ord
            )
        ),
        inserted as (
            insert into mostrador.runs (
                run_id, thread_id, graph_id, input, command, config, metadata, multitask_strategy,
                priority, available_at, max_attempts, trace_id, stream_mode, owner, webhook
            )
            select
                i.run_id, i.thread_id, i.graph_id, i.input, i.command, i.config, i.metadata,
                i.multitask_strategy, i.priority, now() + make_interval(secs => i.after_secs),
                i.max_attempts, coalesce(i.trace_id, replace(gen_random_uuid()::text, '-', '')),
                string_to_array(i.stream_mode, ','), t.owner, i.webhook
            from input i
            -- N.B. `offset 0` keeps this a primary-key lookup per run. Flattened into a join, the
            -- generic plan of this prepared statement may probe threads by graph_id instead
            -- (measured: 30 times slower with 20,000 threads of one graph).
            cross join lateral (
                select t.graph_id, t.owner
                from mostrador.threads t
                where t.thread_id = i.thread_id
                  and t.deleted_at is null
                offset 0
            ) t
            where t.graph_id = i.graph_id
            order by i.ord
            returning 1
        )
        select count(*) as "n!"
        from inserted
        "#,
        &run_ids,
        &thread_ids,
        &graph_ids,
        &inputs as &[Option<Value>],
        &commands as &[Option<Value>],
        &configs,
        &metadatas,
        &strategies as &[MultitaskStrategy],
        &priorities,
        &afters,
        &max_attempts,
        &trace_ids as &[Option<String>],
        &stream_modes,
        &webhooks as &[Option<String>],
    )
    .fetch_one(&mut *tx)
    .await?;

    if inserted != n as i64 {
        // Find the first offender to name it; the transaction rolls back on return.
        for new in news {
            let thread_graph_id = sqlx::query_scalar!(
                r#"
                select graph_id
                from mostrador.threads
                where thread_id = $1
                  and deleted_at is null
                "#,
                new.thread_id.0
            )
            .fetch_optional(&mut *tx)
            .await?;
            match thread_graph_id {
                None => return Err(Error::ThreadNotFound(new.thread_id)),
                Some(None) => {
                    return Err(Error::Invalid {
                        field: "runs",
                        reason: format!(
                            "thread {} has no graph yet: a batch only enqueues on threads created \
                             with a graph or bound by a run",
                            new.thread_id
                        ),
                    });
                }
                Some(Some(thread_graph_id)) if thread_graph_id != new.graph_id => {
                    return Err(Error::GraphMismatch {
                        thread_id: new.thread_id,
                        thread_graph_id,
                        graph_id: new.graph_id.clone(),
                    });
                }
                Some(Some(_)) => {}
            }
        }
        // Every thread checks out now although one did not during the insert: it changed in
        // between. Nothing was written; the caller may retry.
        return Err(Error::Invalid {
            field: "runs",
            reason: "a thread changed while the batch was enqueued; retry".into(),
        });
    }
    let mut woken: Vec<&str> = news
        .iter()
        .filter(|new| new.after.is_zero())
        .map(|new| new.graph_id.as_str())
        .collect();
    woken.sort_unstable();
    woken.dedup();
    notify_queued(&mut tx, &woken).await?;
    tx.commit().await?;
    Ok(run_ids.into_iter().map(RunId).collect())
}

/// Wakes the claimers of these graphs when the transaction commits.
async fn notify_queued(conn: &mut PgConnection, graph_ids: &[&str]) -> Result {
    if graph_ids.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "select pg_notify($1, graph_id) from unnest($2::text[]) as graph_id",
        RUNS_CHANNEL,
        graph_ids as &[&str],
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(())
}

/// Fails with [`Error::Backpressure`] when `adding` more pending runs would take `graph_id` over
/// its limit. Runs due now and runs delayed to later (`delayed`) have a budget each, so a flood
/// of delayed runs never holds up the runs due now. Counts at most `max_pending` rows, so the
/// check costs the limit, not the backlog.
async fn check_limit(
    conn: &mut PgConnection,
    graph_id: &str,
    delayed: bool,
    adding: i64,
    limit: QueueLimit,
) -> Result {
    let pending = sqlx::query_scalar!(
        r#"
        select count(*) as "n!"
        from (
            select 1
            from mostrador.runs
            where status = 'pending'
              and graph_id = $1
              and (available_at > now()) = $3
            limit $2
        ) p
        "#,
        graph_id,
        limit.max_pending,
        delayed,
    )
    .fetch_one(&mut *conn)
    .await?;
    within_limit(graph_id, pending, adding, limit)
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
