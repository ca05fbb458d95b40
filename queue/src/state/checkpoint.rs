//! The Postgres checkpointer: the engine's checkpoints, channel values and pending writes in
//! `checkpoints`, `checkpoint_blobs` and `checkpoint_writes`.
//!
//! A checkpoint row names each channel's version; a channel's value is written to
//! `checkpoint_blobs` only in the checkpoint that bumped its version, so a superstep costs what it
//! changed. Saving a checkpoint also restarts the thread's retention clock (`last_activity_at`),
//! to the minute.
//!
//! A checkpointer made with [`PgCheckpointer::fenced`] writes only while its run is held under
//! that attempt: each write takes the run's row lock (`for key share`) and checks
//! `(run_id, attempt, status = running)` in the same statement, so a worker that lost its lease
//! gets [`Error::LeaseLost`] and writes nothing. Each write is one statement (one commit). A
//! worker's checkpointer ([`PgCheckpointer::holding_final`]) holds its run's final checkpoint
//! instead, for the run's ending to write in its transaction, fenced the same way.
//!
//! A [`IdleThreadCheckpointer`] writes a change made outside any run (the api's state update): its
//! checkpoint only while the thread has no run in flight and has not changed since the change read
//! it, checked in the write's transaction under the thread's row lock, which every enqueue takes.
//!
//! `for key share` is the weakest lock that does the job, on purpose: every statement that moves
//! a run out of `running` locks its row `for update`, which waits for the checkpoint write, while
//! event appends (a plain `update` of `event_seq`, taking `for no key update`) do not conflict
//! with it. Checkpoint writes therefore never queue behind the worker's event flushes.

use std::collections::BTreeMap;
use std::sync::Arc;

use mostrador_graph::State;
use mostrador_graph::checkpoint::{
    BoxError, Checkpoint, Checkpointer, PendingWrite, Saved, TaskSpec, TaskWrites,
};
use serde_json::{Map, Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::db::Connections;
use crate::run::claim::{ClaimedRun, Lease};
use crate::{Error, Result};

mod held;
mod idle;
mod latest;

pub(crate) use held::write_final;
pub use held::{FinalCheckpoint, HeldFinal};
pub use idle::IdleThreadCheckpointer;
use latest::LatestRead;

/// Checkpoints in Postgres, for one process (unfenced) or one claimed run (fenced), of a thread's
/// graph or of one of its subgraphs' tasks (a `checkpoint_ns`).
#[derive(Debug, Clone)]
pub struct PgCheckpointer {
    pool: PgPool,
    /// A fenced checkpointer's statements follow each other on one connection.
    connections: Arc<Connections>,
    /// A fenced checkpointer's last read of where its thread is, until its next write.
    latest: Option<Arc<LatestRead>>,
    lease: Option<Lease>,
    /// `''` for the thread's graph; `node:task|node:task…` for a subgraph's.
    namespace: Arc<str>,
    /// Where a run's final checkpoint waits for its ending, if it is held
    /// ([`PgCheckpointer::holding_final`]).
    held: Option<HeldFinal>,
}

impl PgCheckpointer {
    /// A checkpointer for reads and for writes outside a run (`update_state`).
    pub fn new(pool: PgPool) -> Self {
        Self {
            connections: Arc::new(Connections::pooled(pool.clone())),
            latest: None,
            pool,
            lease: None,
            namespace: Arc::from(""),
            held: None,
        }
    }

    /// A checkpointer for a claimed run: every write is fenced by its lease. Of a thread that had
    /// no checkpoint when the run was claimed, it knows there is none without reading.
    pub fn fenced(pool: PgPool, claimed: &ClaimedRun) -> Self {
        Self {
            connections: Arc::new(Connections::kept(pool.clone())),
            latest: Some(Arc::new(LatestRead::of_claim(claimed))),
            lease: Some(claimed.lease()),
            ..Self::new(pool)
        }
    }

    /// A fenced checkpointer that holds its run's final checkpoint in `held` instead of writing
    /// it: the checkpoint of the thread's graph after which nothing is left to run. The run's
    /// ending carries it ([`crate::run::ending::End::with_checkpoint`]) and writes it in its own
    /// transaction, so a run that ends costs one commit fewer, and its final state and its ending
    /// become visible together. Until then nothing reads it: the engine reads no checkpoint after
    /// its last.
    pub fn holding_final(self, held: HeldFinal) -> Self {
        debug_assert!(
            self.lease.is_some(),
            "only a claimed run's checkpoint is held"
        );
        Self {
            held: Some(held),
            ..self
        }
    }

    /// Whether it holds a final checkpoint: the run has nothing left to run.
    pub fn holds_final(&self) -> bool {
        self.held.as_ref().is_some_and(|held| held.get().is_some())
    }

    fn lease_parts(&self) -> (Option<Uuid>, i32) {
        self.lease
            .map_or((None, 0), |lease| (Some(lease.run_id.0), lease.attempt))
    }

    fn lost(&self) -> Error {
        let lease = self
            .lease
            .expect("only a fenced checkpointer loses its lease");
        Error::LeaseLost {
            run_id: lease.run_id,
            attempt: lease.attempt,
        }
    }

    /// Before any write: what it read of where the thread is may be stale after it.
    fn forget(&self) {
        if let Some(latest) = &self.latest {
            latest.forget();
        }
    }

    /// One statement, so a superstep costs one commit.
    async fn put_checkpoint(
        &self,
        executor: impl sqlx::PgExecutor<'_>,
        thread_id: Uuid,
        checkpoint: &Checkpoint,
        values: &State,
        changed: &[String],
    ) -> Result {
        let versions: Vec<i64> = changed
            .iter()
            .map(|c| checkpoint.versions.get(c).copied().unwrap_or_default())
            .collect();
        let blobs: Vec<&Value> = changed
            .iter()
            .map(|c| values.get(c).unwrap_or(&Value::Null))
            .collect();
        let next: Vec<String> = checkpoint.next.iter().map(|t| t.node.clone()).collect();
        let tasks = Value::Array(checkpoint.next.iter().map(task_json).collect());
        let versions_json = json!(checkpoint.versions);
        let (run_id, attempt) = self.lease_parts();
        // N.B. The fence takes the run's row lock (`for key share`) for the statement's
        // transaction, so a transition (which locks `for update`) cannot commit between the check
        // and the writes.
        let held = sqlx::query_file_scalar!(
            "queries/put_checkpoint.sql",
            thread_id,
            changed,
            &versions,
            &blobs as &[&Value],
            checkpoint.checkpoint_id,
            checkpoint.parent_id,
            run_id,
            checkpoint.step,
            versions_json,
            &next,
            tasks,
            checkpoint.metadata,
            run_id,
            attempt,
            &*self.namespace,
        )
        .fetch_one(executor)
        .await?;
        if held { Ok(()) } else { Err(self.lost()) }
    }

    /// Replaces the writes of tasks that finished together, in one statement: rows past each
    /// task's new list are deleted, the others upserted (a data-modifying CTE's delete would be
    /// invisible to an insert of the same keys beside it).
    async fn put_task_writes(
        &self,
        thread_id: Uuid,
        checkpoint_id: Uuid,
        writes: &[TaskWrites],
    ) -> Result {
        let mut task_ids = Vec::new();
        let mut indexes = Vec::new();
        let mut channels = Vec::new();
        let mut values = Vec::new();
        for (task_id, task_writes) in writes {
            for (idx, (channel, value)) in task_writes.iter().enumerate() {
                task_ids.push(task_id.as_str());
                indexes.push(idx as i32);
                channels.push(channel.as_str());
                values.push(value);
            }
        }
        let (run_id, attempt) = self.lease_parts();
        let mut connection = self.connections.take().await?;
        let held = sqlx::query_file_scalar!(
            "queries/put_task_writes.sql",
            thread_id,
            checkpoint_id,
            &task_ids as &[&str],
            &indexes,
            &channels as &[&str],
            &values as &[&Value],
            run_id,
            attempt,
            &*self.namespace,
        )
        .fetch_one(&mut *connection)
        .await?;
        connection.done();
        if held { Ok(()) } else { Err(self.lost()) }
    }

    async fn read(
        &self,
        thread_id: Uuid,
        checkpoint_id: Option<Uuid>,
        limit: i64,
        before: Option<Uuid>,
    ) -> Result<Vec<Saved>> {
        let mut connection = self.connections.take().await?;
        let rows = sqlx::query_file!(
            "queries/read_checkpoints.sql",
            thread_id,
            checkpoint_id,
            limit,
            before,
            &*self.namespace,
        )
        .fetch_all(&mut *connection)
        .await?;
        connection.done();
        rows.into_iter()
            .map(|row| {
                let checkpoint = Checkpoint {
                    checkpoint_id: row.checkpoint_id,
                    parent_id: row.parent_checkpoint_id,
                    step: row.step,
                    versions: serde_json::from_value::<BTreeMap<String, i64>>(row.channel_versions)
                        .map_err(corrupt)?,
                    next: row
                        .tasks
                        .as_array()
                        .map(|tasks| tasks.iter().filter_map(task_from_json).collect())
                        .unwrap_or_default(),
                    metadata: row.metadata,
                    created_at: row.created_at,
                };
                let values = match row.values {
                    Value::Object(values) => values,
                    _ => Map::new(),
                };
                let writes = row
                    .writes
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|w| {
                        Some(PendingWrite {
                            task_id: w.get(0)?.as_str()?.to_owned(),
                            channel: w.get(1)?.as_str()?.to_owned(),
                            value: w.get(2).cloned().unwrap_or(Value::Null),
                        })
                    })
                    .collect();
                Ok(Saved {
                    checkpoint,
                    values,
                    writes,
                })
            })
            .collect()
    }
}

fn corrupt(err: serde_json::Error) -> Error {
    Error::Invalid {
        field: "checkpoint",
        reason: format!("stored checkpoint is malformed: {err}"),
    }
}

fn task_json(task: &TaskSpec) -> Value {
    match &task.arg {
        Some(arg) => json!({"node": task.node, "arg": arg}),
        None => json!({"node": task.node}),
    }
}

fn task_from_json(value: &Value) -> Option<TaskSpec> {
    Some(TaskSpec {
        node: value.get("node")?.as_str()?.to_owned(),
        arg: value.get("arg").cloned(),
    })
}

fn boxed(err: Error) -> BoxError {
    Box::new(err)
}

impl Checkpointer for PgCheckpointer {
    async fn put(
        &self,
        thread_id: Uuid,
        checkpoint: &Checkpoint,
        values: &State,
        changed: &[String],
    ) -> std::result::Result<(), BoxError> {
        self.forget();
        if let Some(held) = &self.held
            && self.namespace.is_empty()
            && checkpoint.next.is_empty()
        {
            held.hold(thread_id, checkpoint, values, changed);
            return Ok(());
        }
        let mut connection = self.connections.take().await.map_err(boxed)?;
        self.put_checkpoint(&mut *connection, thread_id, checkpoint, values, changed)
            .await
            .map_err(boxed)?;
        connection.done();
        Ok(())
    }

    async fn put_writes(
        &self,
        thread_id: Uuid,
        checkpoint_id: Uuid,
        writes: &[TaskWrites],
    ) -> std::result::Result<(), BoxError> {
        self.forget();
        self.put_task_writes(thread_id, checkpoint_id, writes)
            .await
            .map_err(boxed)
    }

    async fn get(
        &self,
        thread_id: Uuid,
        checkpoint_id: Option<Uuid>,
    ) -> std::result::Result<Option<Saved>, BoxError> {
        let latest = self.latest.as_deref().filter(|_| checkpoint_id.is_none());
        if let Some(saved) = latest.and_then(|latest| latest.get(thread_id, &self.namespace)) {
            return Ok(saved);
        }
        let saved = self
            .read(thread_id, checkpoint_id, 1, None)
            .await
            .map_err(boxed)?
            .pop();
        if let Some(latest) = latest {
            latest.set(thread_id, &self.namespace, saved.as_ref());
        }
        Ok(saved)
    }

    async fn list(
        &self,
        thread_id: Uuid,
        limit: usize,
        before: Option<Uuid>,
    ) -> std::result::Result<Vec<Saved>, BoxError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(thread_id, None, limit, before)
            .await
            .map_err(boxed)
    }

    fn scoped(&self, namespace: &str) -> Self {
        Self {
            namespace: Arc::from(mostrador_graph::checkpoint::nested(
                &self.namespace,
                namespace,
            )),
            ..self.clone()
        }
    }

    /// Every namespace of the thread's.
    async fn delete_thread(&self, thread_id: Uuid) -> std::result::Result<(), BoxError> {
        self.forget();
        sqlx::query!(
            r#"
            with deleted_writes as (
                delete from mostrador.checkpoint_writes where thread_id = $1
            ),
            deleted_blobs as (
                delete from mostrador.checkpoint_blobs where thread_id = $1
            )
            delete from mostrador.checkpoints where thread_id = $1
            "#,
            thread_id
        )
        .execute(&self.pool)
        .await
        .map_err(|err| boxed(err.into()))?;
        Ok(())
    }

    async fn prune(
        &self,
        thread_id: Uuid,
        keep_latest: usize,
    ) -> std::result::Result<(), BoxError> {
        self.forget();
        prune(&self.pool, thread_id, keep_latest)
            .await
            .map_err(boxed)
    }

    /// Every namespace of the thread's.
    async fn copy_thread(&self, from: Uuid, to: Uuid) -> std::result::Result<(), BoxError> {
        self.forget();
        copy_thread(&self.pool, from, to).await.map_err(boxed)
    }
}

/// Copies every checkpoint of `from` (every namespace, its channels' values and pending writes)
/// to `to`, in the caller's transaction if it is one.
///
/// # Errors
///
/// The database failed.
pub async fn copy_thread(executor: impl sqlx::PgExecutor<'_>, from: Uuid, to: Uuid) -> Result<()> {
    sqlx::query!(
        r#"
        with copied_blobs as (
            insert into mostrador.checkpoint_blobs (
                thread_id, checkpoint_ns, channel, version, value, payload_type, payload
            )
            select $2, checkpoint_ns, channel, version, value, payload_type, payload
            from mostrador.checkpoint_blobs
            where thread_id = $1
        ),
        copied_writes as (
            insert into mostrador.checkpoint_writes (
                thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, value,
                payload_type, payload, task_path
            )
            select $2, checkpoint_ns, checkpoint_id, task_id, idx, channel, value,
                payload_type, payload, task_path
            from mostrador.checkpoint_writes
            where thread_id = $1
        )
        insert into mostrador.checkpoints (
            thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step,
            channel_versions, next, tasks, metadata, created_at, saved, snapshot
        )
        select $2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step,
            channel_versions, next, tasks, metadata, created_at, saved, snapshot
        from mostrador.checkpoints
        where thread_id = $1
        "#,
        from,
        to,
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// Deletes a thread's root checkpoints but its `keep_latest` newest, their pending writes, and
/// the values no kept checkpoint names, in one transaction.
///
/// # Errors
///
/// The database failed.
pub(crate) async fn prune(pool: &PgPool, thread_id: Uuid, keep_latest: usize) -> Result {
    let keep = i64::try_from(keep_latest).unwrap_or(i64::MAX);
    // N.B. The thread's graph's checkpoints only: a subgraph task's stay with the thread.
    // Safe by construction: every kept checkpoint names complete values, and a blob is
    // deleted only when no kept checkpoint names it.
    let mut tx = pool.begin().await?;
    sqlx::query!(
        r#"
        with doomed as (
            delete from mostrador.checkpoints c
            where c.thread_id = $1
              and c.checkpoint_ns = ''
              and c.checkpoint_id not in (
                  select checkpoint_id
                  from mostrador.checkpoints
                  where thread_id = $1
                    and checkpoint_ns = ''
                  order by step desc
                  limit $2
              )
            returning c.checkpoint_id
        )
        delete from mostrador.checkpoint_writes w
        using doomed d
        where w.thread_id = $1
          and w.checkpoint_ns = ''
          and w.checkpoint_id = d.checkpoint_id
        "#,
        thread_id,
        keep,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        r#"
        delete from mostrador.checkpoint_blobs b
        where b.thread_id = $1
          and b.checkpoint_ns = ''
          and not exists (
              select 1
              from mostrador.checkpoints c
              where c.thread_id = b.thread_id
                and c.checkpoint_ns = b.checkpoint_ns
                and (c.channel_versions ->> b.channel)::bigint = b.version
          )
        "#,
        thread_id,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}
