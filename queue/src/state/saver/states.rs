//! The states of Python graphs' checkpoints, as the api serves them: described by the graph in a
//! worker's runner, recorded fenced by the run's lease, read by the api without running Python.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use crate::Result;
use crate::RunId;
use crate::run::claim::Lease;
use crate::run::ending::{lost_leases, write_runs};

/// The state at a checkpoint, as the api serves it.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub checkpoint_id: Uuid,
    pub parent_checkpoint_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    /// The runner's snapshot (values, next, tasks, interrupts, metadata), or `None` while the
    /// graph has not described this checkpoint yet (its worker stopped in between).
    pub snapshot: Option<Value>,
    pub metadata: Value,
}

/// The state the graph computed at one of its run's root checkpoints, as the api will serve it.
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    pub checkpoint_id: Uuid,
    pub snapshot: Value,
}

/// Records the states that runs' graphs described, each fenced by its run's lease, in one
/// statement: the worker's publisher writes them in the statement of the events sent after them
/// ([`crate::run::ending::write`]), so a client that sees an event reads a state at least as new. Where a run describes a
/// checkpoint twice, the last description wins. Returns the leases found lost (nothing of theirs
/// was written).
///
/// # Errors
///
/// The database failed.
pub async fn describe_many(
    executor: impl sqlx::PgExecutor<'_>,
    batches: &[(Lease, &[Described])],
) -> Result<Vec<Lease>> {
    let done: Vec<RunId> = write_runs(executor, batches, &[], &[])
        .await?
        .into_iter()
        .map(|(run_id, _)| run_id)
        .collect();
    Ok(lost_leases(batches.iter().map(|(lease, _)| *lease), &done))
}

/// A thread's root-namespace states, newest first: the one at `checkpoint_id` (or the latest),
/// then up to `limit - 1` older ones when `limit` asks for history; `before` starts below a
/// checkpoint; `metadata`, only those whose metadata contains it (as LangGraph's `list` filters).
///
/// A checkpoint that a run still in flight saved but has not described yet is left out: the
/// state is the newest the graph described (at most one superstep behind while a run goes on),
/// as the events the client saw.
///
/// # Errors
///
/// The database failed.
pub async fn snapshots(
    pool: &PgPool,
    thread_id: Uuid,
    checkpoint_id: Option<Uuid>,
    before: Option<Uuid>,
    limit: i64,
    metadata: Option<&Value>,
) -> Result<Vec<Snapshot>> {
    let rows = sqlx::query!(
        r#"
        select checkpoint_id, parent_checkpoint_id, created_at, snapshot, metadata
        from mostrador.checkpoints
        where thread_id = $1
          and checkpoint_ns = ''
          and saved is not null
          and ($2::uuid is null or checkpoint_id = $2)
          and (
              snapshot is not null
              or not exists (
                  select 1
                  from mostrador.runs r
                  where r.run_id = checkpoints.run_id
                    and r.status in ('pending', 'running')
              )
          )
          and (
              $3::uuid is null
              or step < (
                  select step
                  from mostrador.checkpoints
                  where thread_id = $1
                    and checkpoint_ns = ''
                    and checkpoint_id = $3
              )
          )
          and ($5::jsonb is null or metadata @> $5)
        order by step desc
        limit $4
        "#,
        thread_id,
        checkpoint_id,
        before,
        limit,
        metadata,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| Snapshot {
            checkpoint_id: row.checkpoint_id,
            parent_checkpoint_id: row.parent_checkpoint_id,
            created_at: row.created_at,
            snapshot: row.snapshot,
            metadata: row.metadata,
        })
        .collect())
}
