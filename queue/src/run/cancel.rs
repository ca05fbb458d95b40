//! Cancelling runs: pending runs end at once, running runs are marked and their holder told.

use sqlx::{Acquire, PgConnection, PgExecutor, Postgres};
use uuid::Uuid;

use crate::listener::{CONTROL_CHANNEL, EVENTS_CHANNEL};
use crate::run::lease::WorkerId;
use crate::run::{CancelAction, RunId, RunStatus};
use crate::thread::ThreadId;
use crate::{Error, Result};

/// What [`cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// A pending run ended `interrupted` at once.
    Interrupted,
    /// A pending run was deleted (rollback).
    Deleted,
    /// A running run was marked, and its holder told through the control channel. The holder
    /// ends it.
    Signalled { holder: Option<WorkerId> },
    /// The run had already finished; nothing changed.
    AlreadyFinished(RunStatus),
}

/// Cancels one run of a thread. A pending run ends at once (`interrupt`: status `interrupted`
/// with an `end` event; `rollback`: deleted with its events and checkpoints). A running run gets
/// `cancel_action` set and its holder is told on the control channel; the holder ends it, and
/// also re-reads `cancel_action` on every heartbeat, so a lost notification only delays it.
///
/// # Errors
///
/// [`Error::RunNotFound`] when the run does not exist or belongs to another thread.
pub async fn cancel<'a>(
    db: impl Acquire<'a, Database = Postgres>,
    thread_id: ThreadId,
    run_id: RunId,
    action: CancelAction,
) -> Result<CancelOutcome> {
    let mut tx = db.begin().await?;
    let outcomes = cancel_in_tx(&mut tx, thread_id, &[run_id], action).await?;
    let outcome = match outcomes.first() {
        Some((_, outcome)) => *outcome,
        None => {
            let status = sqlx::query_scalar!(
                r#"
                select status as "status: RunStatus"
                from mostrador.runs
                where run_id = $1
                  and thread_id = $2
                "#,
                run_id.0,
                thread_id.0,
            )
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(Error::RunNotFound(run_id))?;
            CancelOutcome::AlreadyFinished(status)
        }
    };
    tx.commit().await?;
    Ok(outcome)
}

/// Which runs [`cancel_many`] cancels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// These runs of one thread (those that exist; the others are left out).
    Runs {
        thread_id: ThreadId,
        run_ids: Vec<RunId>,
    },
    /// Every run of the owner's live threads in one of these statuses (`pending`, `running`).
    InFlight(Vec<RunStatus>),
}

/// What [`cancel_many`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled {
    /// Runs the selection named that exist, finished ones included.
    pub matched: usize,
    /// Runs it cancelled: pending ones ended or deleted, running ones signalled.
    pub cancelled: usize,
}

/// Cancels many runs in one transaction, each as [`cancel`] describes, of threads `owner` owns
/// (for [`Selection::Runs`], the caller checks the thread first).
///
/// # Errors
///
/// The database failed.
pub async fn cancel_many<'a>(
    db: impl Acquire<'a, Database = Postgres>,
    owner: &str,
    selection: &Selection,
    action: CancelAction,
) -> Result<Cancelled> {
    let mut tx = db.begin().await?;
    let mut cancelled = 0;
    let matched = match selection {
        Selection::Runs { thread_id, run_ids } => {
            let ids: Vec<Uuid> = run_ids.iter().map(|run_id| run_id.0).collect();
            let found = sqlx::query_scalar!(
                r#"
                select r.run_id as "run_id: RunId"
                from mostrador.runs r
                join mostrador.threads t on t.thread_id = r.thread_id
                where r.thread_id = $1
                  and r.run_id = any($2)
                  and t.owner = $3
                "#,
                thread_id.0,
                &ids,
                owner,
            )
            .fetch_all(&mut *tx)
            .await?;
            cancelled += cancel_in_tx(&mut tx, *thread_id, &found, action)
                .await?
                .len();
            found.len()
        }
        Selection::InFlight(statuses) => {
            let by_thread = sqlx::query!(
                r#"
                select
                    r.thread_id as "thread_id: ThreadId",
                    array_agg(r.run_id order by r.run_id) as "run_ids!: Vec<Uuid>"
                from mostrador.runs r
                join mostrador.threads t on t.thread_id = r.thread_id
                where t.owner = $1
                  and t.deleted_at is null
                  and r.status = any($2::text[]::mostrador.run_status[])
                group by r.thread_id
                order by r.thread_id
                "#,
                owner,
                &statuses
                    .iter()
                    .map(|status| status.as_str())
                    .collect::<Vec<_>>() as &[&str],
            )
            .fetch_all(&mut *tx)
            .await?;
            let mut matched = 0;
            for thread in by_thread {
                let run_ids: Vec<RunId> = thread.run_ids.into_iter().map(RunId).collect();
                cancelled += cancel_in_tx(&mut tx, thread.thread_id, &run_ids, action)
                    .await?
                    .len();
                matched += run_ids.len();
            }
            matched
        }
    };
    tx.commit().await?;
    Ok(Cancelled { matched, cancelled })
}

/// Cancels the given runs of a thread, each as [`cancel`] describes; runs already finished are
/// left out of the result. Each statement matches on status, so a run claimed or finished
/// concurrently is handled by whichever statement sees it in its new state.
pub(crate) async fn cancel_in_tx(
    conn: &mut PgConnection,
    thread_id: ThreadId,
    run_ids: &[RunId],
    action: CancelAction,
) -> Result<Vec<(RunId, CancelOutcome)>> {
    let run_ids: Vec<Uuid> = run_ids.iter().map(|run_id| run_id.0).collect();
    let mut outcomes = Vec::with_capacity(run_ids.len());
    match action {
        CancelAction::Interrupt => {
            // The `end` event insert notifies its subscribers through the run_events trigger.
            let interrupted = sqlx::query_scalar!(
                r#"
                -- Locked by their ids alone, then checked (see `crate::db`).
                with locked as materialized (
                    select run_id, status
                    from mostrador.runs
                    where run_id = any($1)
                      and thread_id = $2
                    for no key update
                ),
                interrupted as (
                    update mostrador.runs
                    set status = 'interrupted',
                        cancel_action = 'interrupt',
                        finished_at = now(),
                        updated_at = now(),
                        event_seq = event_seq + 1
                    where run_id = any(array(select run_id from locked where status = 'pending'))
                    returning run_id, event_seq
                ),
                ended as (
                    insert into mostrador.run_events (run_id, seq, event, data)
                    select run_id, event_seq, 'end', '{"status": "interrupted"}'::jsonb
                    from interrupted
                )
                select run_id as "run_id: RunId"
                from interrupted
                "#,
                &run_ids,
                thread_id.0,
            )
            .fetch_all(&mut *conn)
            .await?;
            outcomes.extend(
                interrupted
                    .into_iter()
                    .map(|run_id| (run_id, CancelOutcome::Interrupted)),
            );
        }
        CancelAction::Rollback => {
            let deleted =
                delete_runs(&mut *conn, thread_id, &run_ids, RunStatus::Pending, None).await?;
            outcomes.extend(
                deleted
                    .into_iter()
                    .map(|run_id| (run_id, CancelOutcome::Deleted)),
            );
        }
    }

    // N.B. `rollback` is the stronger action: a later `interrupt` does not weaken it.
    let signalled = sqlx::query!(
        r#"
        -- Locked by their ids alone, then checked (see `crate::db`).
        with locked as materialized (
            select run_id, status
            from mostrador.runs
            where run_id = any($1)
              and thread_id = $2
            for no key update
        )
        update mostrador.runs
        set cancel_action = case
                when cancel_action = 'rollback' then cancel_action
                else $3
            end,
            updated_at = now()
        where run_id = any(array(select run_id from locked where status = 'running'))
        returning
            run_id as "run_id: RunId",
            lease_owner as "lease_owner: WorkerId",
            cancel_action as "cancel_action!: CancelAction",
            pg_notify(
                $4,
                json_build_object('run_id', run_id, 'action', cancel_action, 'worker', lease_owner)::text
            )::text as "notified"
        "#,
        &run_ids,
        thread_id.0,
        action as CancelAction,
        CONTROL_CHANNEL,
    )
    .fetch_all(&mut *conn)
    .await?;
    outcomes.extend(signalled.into_iter().map(|row| {
        (
            row.run_id,
            CancelOutcome::Signalled {
                holder: row.lease_owner,
            },
        )
    }));
    Ok(outcomes)
}

/// Deletes runs of a thread that are in `status` (and at `attempt`, when given), with their events
/// and the checkpoints they made, as if they had never been created. Subscribers get a marker
/// without `seq`, re-read, and find the run gone. Returns the runs deleted.
pub(crate) async fn delete_runs(
    executor: impl PgExecutor<'_>,
    thread_id: ThreadId,
    run_ids: &[Uuid],
    status: RunStatus,
    attempt: Option<i32>,
) -> Result<Vec<RunId>> {
    let deleted = sqlx::query_file_scalar!(
        "queries/delete_runs.sql",
        run_ids,
        thread_id.0,
        status as RunStatus,
        attempt,
        EVENTS_CHANNEL,
    )
    .fetch_all(executor)
    .await?;
    Ok(deleted)
}
