//! LangGraph's own checkpoints, for Python graphs: what the worker's Python runner saves through
//! mostrador (LangGraph's `BaseCheckpointSaver` protocol: get a checkpoint with its pending
//! writes, list, put a checkpoint with its new channel values, put a task's writes), in the same
//! tables as the Rust engine's checkpoints.
//!
//! Values are stored as LangGraph serialized them (its serde's type tag and bytes), and read back
//! unchanged, so a Python graph resumes with exactly the objects it saved. The api never decodes
//! them: it serves the state the runner computed with the graph for each checkpoint (the `states` module).
//!
//! A [`Saver`] made for a claimed run writes only while the run is held under its attempt: each
//! write takes the run's row lock (`for key share`) and checks `(run_id, attempt, status =
//! running)` in the same statement, as [`crate::PgCheckpointer::fenced`] does, so a worker that
//! lost its lease gets [`Error::LeaseLost`] and writes nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use sqlx::{Connection, PgConnection, PgPool};
use uuid::Uuid;

use crate::db::Connections;
use crate::run::claim::{ClaimedRun, Lease};
use crate::{Error, Result};

mod states;

pub use states::{Described, Snapshot, describe_many, snapshots};

/// A channel value or a pending write as LangGraph's serde wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    /// The serde's type tag (`msgpack`, `json`, `null`, `empty`, ...).
    pub kind: String,
    /// Empty for the tags that carry no bytes (`null`, `empty`).
    pub bytes: Vec<u8>,
}

/// A channel's value at a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    pub channel: String,
    pub version: i64,
    pub payload: Payload,
}

/// One write of a task, saved the moment the task finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingWrite {
    pub task_id: String,
    pub task_path: String,
    pub idx: i32,
    pub channel: String,
    pub payload: Payload,
}

/// A checkpoint as LangGraph reads it back: its saved body, its channel values and its pending
/// writes.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedCheckpoint {
    pub checkpoint_ns: String,
    pub checkpoint_id: Uuid,
    pub parent_checkpoint_id: Option<Uuid>,
    /// LangGraph's checkpoint without `channel_values`.
    pub saved: Value,
    pub metadata: Value,
    pub blobs: Vec<Blob>,
    pub writes: Vec<PendingWrite>,
}

/// A checkpoint to save: LangGraph's `put`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCheckpoint {
    pub checkpoint_ns: String,
    pub checkpoint_id: Uuid,
    pub parent_checkpoint_id: Option<Uuid>,
    /// LangGraph's checkpoint without `channel_values`; its `channel_versions` name the blobs.
    pub saved: Value,
    pub metadata: Value,
    /// The values of the channels whose version this checkpoint bumped.
    pub blobs: Vec<Blob>,
}

/// One of LangGraph's writes: a checkpoint (`put`) or a task's writes on one (`put_writes`).
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    Checkpoint(NewCheckpoint),
    TaskWrites {
        checkpoint_ns: String,
        checkpoint_id: Uuid,
        writes: Vec<PendingWrite>,
    },
}

/// LangGraph's checkpoints of one claimed run's thread, every write fenced by its lease.
#[derive(Debug, Clone)]
pub struct Saver {
    pool: PgPool,
    /// The run's statements follow each other on one connection.
    connections: Arc<Connections>,
    thread_id: Uuid,
    lease: Lease,
    /// The thread had no checkpoint when the run was claimed, and the run has written none since:
    /// there is nothing to read (see [`ClaimedRun::checkpointed`]).
    blank: Arc<AtomicBool>,
}

impl Saver {
    /// The pool, for the run's other reads and writes (its Store).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub fn thread_id(&self) -> Uuid {
        self.thread_id
    }

    /// The lease that fences its writes, for the run's other fenced writes (its thread's files).
    pub fn lease(&self) -> Lease {
        self.lease
    }

    pub fn fenced(pool: PgPool, claimed: &ClaimedRun) -> Self {
        Self {
            connections: Arc::new(Connections::kept(pool.clone())),
            pool,
            thread_id: claimed.thread_id.0,
            lease: claimed.lease(),
            blank: Arc::new(AtomicBool::new(!claimed.checkpointed)),
        }
    }

    /// Nothing to read: the thread had no checkpoint at the claim, and none was written since.
    fn blank(&self) -> bool {
        self.blank.load(Ordering::Acquire)
    }

    fn lost(&self) -> Error {
        Error::LeaseLost {
            run_id: self.lease.run_id,
            attempt: self.lease.attempt,
        }
    }

    /// The checkpoint `checkpoint_id` of namespace `checkpoint_ns`, or its latest; `None` when
    /// there is none.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn get(
        &self,
        checkpoint_ns: &str,
        checkpoint_id: Option<Uuid>,
    ) -> Result<Option<SavedCheckpoint>> {
        if self.blank() {
            return Ok(None);
        }
        let mut connection = self.connections.take().await?;
        let ids = self
            .ids(&mut connection, checkpoint_ns, checkpoint_id, None, 1)
            .await?;
        let saved = match ids.first() {
            Some(id) => self.load(&mut connection, checkpoint_ns, *id).await?,
            None => None,
        };
        connection.done();
        Ok(saved)
    }

    /// Up to `limit` checkpoints of a namespace, newest first, older than `before` if given.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn list(
        &self,
        checkpoint_ns: &str,
        before: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<SavedCheckpoint>> {
        if self.blank() {
            return Ok(Vec::new());
        }
        let mut connection = self.connections.take().await?;
        let mut listed = Vec::new();
        for id in self
            .ids(&mut connection, checkpoint_ns, None, before, limit)
            .await?
        {
            if let Some(checkpoint) = self.load(&mut connection, checkpoint_ns, id).await? {
                listed.push(checkpoint);
            }
        }
        connection.done();
        Ok(listed)
    }

    async fn ids(
        &self,
        connection: &mut PgConnection,
        checkpoint_ns: &str,
        checkpoint_id: Option<Uuid>,
        before: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<Uuid>> {
        Ok(sqlx::query_scalar!(
            r#"
            select c.checkpoint_id
            from mostrador.checkpoints c
            where c.thread_id = $1
              and c.checkpoint_ns = $2
              and ($3::uuid is null or c.checkpoint_id = $3)
              and (
                  $4::uuid is null
                  or c.step < (
                      select step
                      from mostrador.checkpoints
                      where thread_id = $1
                        and checkpoint_ns = $2
                        and checkpoint_id = $4
                  )
              )
            order by c.step desc
            limit $5
            "#,
            self.thread_id,
            checkpoint_ns,
            checkpoint_id,
            before,
            limit,
        )
        .fetch_all(&mut *connection)
        .await?)
    }

    async fn load(
        &self,
        connection: &mut PgConnection,
        checkpoint_ns: &str,
        checkpoint_id: Uuid,
    ) -> Result<Option<SavedCheckpoint>> {
        let Some(row) = sqlx::query!(
            r#"
            select parent_checkpoint_id, saved, metadata
            from mostrador.checkpoints
            where thread_id = $1
              and checkpoint_ns = $2
              and checkpoint_id = $3
            "#,
            self.thread_id,
            checkpoint_ns,
            checkpoint_id,
        )
        .fetch_optional(&mut *connection)
        .await?
        else {
            return Ok(None);
        };
        let saved = row.saved.ok_or_else(|| Error::Invalid {
            field: "checkpoint",
            reason: format!("{checkpoint_id} was not saved by LangGraph"),
        })?;
        let versions = saved
            .get("channel_versions")
            .cloned()
            .unwrap_or_else(|| Value::Object(Default::default()));
        // N.B. A version that is not an integer names no blob: this saver hands out integers.
        let blobs = sqlx::query!(
            r#"
            select b.channel, b.version, b.payload_type as "payload_type!", coalesce(b.payload, '') as "payload!"
            from jsonb_each_text($3::jsonb) as v(channel, version)
            join mostrador.checkpoint_blobs b
              on b.thread_id = $1
             and b.checkpoint_ns = $2
             and b.channel = v.channel
             and b.version = case when v.version ~ '^-?[0-9]{1,18}$' then v.version::bigint end
            where b.payload_type is not null
            "#,
            self.thread_id,
            checkpoint_ns,
            versions,
        )
        .fetch_all(&mut *connection)
        .await?
        .into_iter()
        .map(|b| Blob {
            channel: b.channel,
            version: b.version,
            payload: Payload {
                kind: b.payload_type,
                bytes: b.payload,
            },
        })
        .collect();
        let writes = sqlx::query!(
            r#"
            select task_id, task_path, idx, channel, payload_type as "payload_type!", coalesce(payload, '') as "payload!"
            from mostrador.checkpoint_writes
            where thread_id = $1
              and checkpoint_ns = $2
              and checkpoint_id = $3
              and payload_type is not null
            order by task_path, task_id, idx
            "#,
            self.thread_id,
            checkpoint_ns,
            checkpoint_id,
        )
        .fetch_all(&mut *connection)
        .await?
        .into_iter()
        .map(|w| PendingWrite {
            task_id: w.task_id,
            task_path: w.task_path,
            idx: w.idx,
            channel: w.channel,
            payload: Payload {
                kind: w.payload_type,
                bytes: w.payload,
            },
        })
        .collect();
        Ok(Some(SavedCheckpoint {
            checkpoint_ns: checkpoint_ns.to_owned(),
            checkpoint_id,
            parent_checkpoint_id: row.parent_checkpoint_id,
            saved,
            metadata: row.metadata,
            blobs,
            writes,
        }))
    }

    /// Carries out writes in order, in one transaction: tasks' writes and the checkpoint that
    /// follows them in one statement (one statement and one commit per superstep).
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] (nothing was written), or the database failed (nothing was written).
    pub async fn write(&self, writes: &[Write]) -> Result {
        // Statements: each a run of task writes and the checkpoint that ends it, if any.
        let mut statements: Vec<(Vec<&PendingWriteAt<'_>>, Option<&NewCheckpoint>)> = Vec::new();
        let mut pending = Vec::new();
        let rows: Vec<Vec<PendingWriteAt<'_>>> = writes
            .iter()
            .map(|write| match write {
                Write::TaskWrites {
                    checkpoint_ns,
                    checkpoint_id,
                    writes,
                } => writes
                    .iter()
                    .map(|write| PendingWriteAt {
                        checkpoint_ns,
                        checkpoint_id: *checkpoint_id,
                        write,
                    })
                    .collect(),
                Write::Checkpoint(_) => Vec::new(),
            })
            .collect();
        for (write, rows) in writes.iter().zip(&rows) {
            pending.extend(rows);
            if let Write::Checkpoint(checkpoint) = write {
                statements.push((std::mem::take(&mut pending), Some(checkpoint)));
            }
        }
        if !pending.is_empty() {
            statements.push((pending, None));
        }
        for (rows, _) in &mut statements {
            dedupe(rows);
        }
        if statements.is_empty() {
            return Ok(());
        }
        // Whether or not it lands, what there is to read is for the database to say now.
        self.blank.store(false, Ordering::Release);
        let mut connection = self.connections.take().await?;
        match statements.as_slice() {
            [(rows, checkpoint)] => self.save(&mut *connection, rows, *checkpoint).await?,
            many => {
                let mut tx = connection.begin().await?;
                for (rows, checkpoint) in many {
                    self.save(&mut *tx, rows, *checkpoint).await?;
                }
                tx.commit().await?;
            }
        }
        connection.done();
        Ok(())
    }

    /// One statement: tasks' writes, then a checkpoint with the values of the channels it
    /// changed. The checkpoint's `step` follows the thread's latest in its namespace, so "latest"
    /// is the last saved. Writes of LangGraph's special channels (errors, interrupts, resumes:
    /// negative `idx`) replace earlier ones; the others are kept as first written, as LangGraph's
    /// own Postgres saver does, so a task re-run after a crash changes nothing it had saved.
    async fn save(
        &self,
        executor: impl sqlx::PgExecutor<'_>,
        rows: &[&PendingWriteAt<'_>],
        checkpoint: Option<&NewCheckpoint>,
    ) -> Result {
        let blobs = checkpoint.map_or(&[][..], |c| c.blobs.as_slice());
        let blob_channels: Vec<&str> = blobs.iter().map(|b| b.channel.as_str()).collect();
        let blob_versions: Vec<i64> = blobs.iter().map(|b| b.version).collect();
        let blob_kinds: Vec<&str> = blobs.iter().map(|b| b.payload.kind.as_str()).collect();
        let blob_bytes: Vec<&[u8]> = blobs.iter().map(|b| b.payload.bytes.as_slice()).collect();
        let channel_versions = checkpoint.map(|c| {
            c.saved
                .get("channel_versions")
                .cloned()
                .unwrap_or_else(|| Value::Object(Default::default()))
        });
        let write_ns: Vec<&str> = rows.iter().map(|r| r.checkpoint_ns).collect();
        let write_checkpoints: Vec<Uuid> = rows.iter().map(|r| r.checkpoint_id).collect();
        let task_ids: Vec<&str> = rows.iter().map(|r| r.write.task_id.as_str()).collect();
        let task_paths: Vec<&str> = rows.iter().map(|r| r.write.task_path.as_str()).collect();
        let indexes: Vec<i32> = rows.iter().map(|r| r.write.idx).collect();
        let write_channels: Vec<&str> = rows.iter().map(|r| r.write.channel.as_str()).collect();
        let write_kinds: Vec<&str> = rows.iter().map(|r| r.write.payload.kind.as_str()).collect();
        let write_bytes: Vec<&[u8]> = rows
            .iter()
            .map(|r| r.write.payload.bytes.as_slice())
            .collect();
        // N.B. As in the engine's checkpointer, the fence holds the run's row lock (`for key
        // share`) for the statement, so no transition commits between the check and the writes.
        let held = sqlx::query_file_scalar!(
            "queries/save_checkpoint.sql",
            self.lease.run_id.0,
            self.lease.attempt,
            self.thread_id,
            &write_ns as &[&str],
            &write_checkpoints,
            &task_ids as &[&str],
            &task_paths as &[&str],
            &indexes,
            &write_channels as &[&str],
            &write_kinds as &[&str],
            &write_bytes as &[&[u8]],
            checkpoint.map_or("", |c| c.checkpoint_ns.as_str()),
            &blob_channels as &[&str],
            &blob_versions,
            &blob_kinds as &[&str],
            &blob_bytes as &[&[u8]],
            checkpoint.map(|c| c.checkpoint_id),
            checkpoint.and_then(|c| c.parent_checkpoint_id),
            channel_versions,
            checkpoint.map(|c| &c.saved),
            checkpoint.map(|c| &c.metadata),
        )
        .fetch_one(executor)
        .await?;
        if held { Ok(()) } else { Err(self.lost()) }
    }
}

/// One row per `(checkpoint, task, idx)`, as one statement must insert them: as the statement
/// would leave them written one after another (the last of LangGraph's special writes, the first
/// of the others).
fn dedupe(rows: &mut Vec<&PendingWriteAt<'_>>) {
    fn same(a: &PendingWriteAt<'_>, b: &PendingWriteAt<'_>) -> bool {
        a.checkpoint_ns == b.checkpoint_ns
            && a.checkpoint_id == b.checkpoint_id
            && a.write.task_id == b.write.task_id
            && a.write.idx == b.write.idx
    }
    let mut kept: Vec<&PendingWriteAt<'_>> = Vec::with_capacity(rows.len());
    for row in rows.drain(..) {
        match kept.iter().position(|k| same(k, row)) {
            Some(at) if row.write.idx < 0 => kept[at] = row,
            Some(_) => {}
            None => kept.push(row),
        }
    }
    *rows = kept;
}

/// A task's write with the checkpoint it was made on.
#[derive(Debug)]
struct PendingWriteAt<'a> {
    checkpoint_ns: &'a str,
    checkpoint_id: Uuid,
    write: &'a PendingWrite,
}
