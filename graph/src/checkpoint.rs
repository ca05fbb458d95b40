//! Checkpoints, pending writes, and the [`Checkpointer`] that stores them.
//!
//! A checkpoint is taken after every superstep. It names, for each channel, the version of its
//! value, so a store writes a channel's value only when its version changed (a superstep costs
//! what it changed), and every checkpoint still refers to complete values: pruning old
//! checkpoints of a thread is safe by construction.
//!
//! Pending writes are a task's results, saved the moment the task finishes, against the checkpoint
//! its superstep started from. Resuming that superstep reuses them instead of running the task
//! again. A task's writes are always saved whole, replacing what the task had saved before.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::channel::State;

/// Errors of a checkpointer, boxed so each store keeps its own type.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The write that marks a task as finished; its value holds the task's routing (`goto`).
pub const TASK_DONE: &str = "__task__";
/// The write that records a task's pending interrupt: `{"id": …, "value": …}`.
pub const INTERRUPT: &str = "__interrupt__";
/// The write that records the resume values given to a task so far, as a list.
pub const RESUME: &str = "__resume__";

/// A task to run from a checkpoint: a node, with a [`crate::Send`] argument or the state.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSpec {
    pub node: String,
    pub arg: Option<Value>,
}

impl TaskSpec {
    /// The task's id within its checkpoint: its position and node. Deterministic, so a resumed
    /// superstep finds the writes its tasks saved before.
    pub fn task_id(&self, index: usize) -> String {
        format!("{index}:{}", self.node)
    }
}

/// The state of a thread after a superstep (or an input or an update).
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub checkpoint_id: Uuid,
    pub parent_id: Option<Uuid>,
    /// -1 for the input, then one per superstep.
    pub step: i64,
    /// The version of each channel's value. A version only grows.
    pub versions: BTreeMap<String, i64>,
    /// The tasks of the next superstep; empty when the graph has finished.
    pub next: Vec<TaskSpec>,
    /// `{"source": "input" | "loop" | "update", "step": …, "writes": …}`.
    pub metadata: Value,
    pub created_at: DateTime<Utc>,
}

/// A write saved by a task.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingWrite {
    pub task_id: String,
    pub channel: String,
    pub value: Value,
}

/// One task's writes: its id and `(channel, value)` pairs.
pub type TaskWrites = (String, Vec<(String, Value)>);

/// A checkpoint as read back: with its channel values and the pending writes made against it.
#[derive(Debug, Clone, PartialEq)]
pub struct Saved {
    pub checkpoint: Checkpoint,
    pub values: State,
    pub writes: Vec<PendingWrite>,
}

impl Saved {
    /// The interrupts of this checkpoint's next tasks that no resume has answered yet.
    pub fn pending_interrupts(&self) -> Vec<crate::Interrupt> {
        crate::task::pending_interrupts(self)
    }
}

/// Where checkpoints live. Implementations must make `put` and `put_writes` durable before they
/// return: the engine's guarantees (no finished superstep or task runs twice) rest on it.
pub trait Checkpointer: Send + Sync {
    /// The same store, for the checkpoints of a subgraph's task: `namespace` (`node:task`)
    /// nested in this checkpointer's own (joined with `|`), beside the thread's graph's.
    fn scoped(&self, namespace: &str) -> Self
    where
        Self: Sized;

    /// Saves a checkpoint. `values` is the whole state; only the channels in `changed` (whose
    /// version this checkpoint bumped) need their value written.
    fn put(
        &self,
        thread_id: Uuid,
        checkpoint: &Checkpoint,
        values: &State,
        changed: &[String],
    ) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// Saves the writes of tasks that finished together against `checkpoint_id`, each task's
    /// whole, replacing what that task saved before. All or nothing.
    fn put_writes(
        &self,
        thread_id: Uuid,
        checkpoint_id: Uuid,
        writes: &[TaskWrites],
    ) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// A checkpoint (the latest when `checkpoint_id` is `None`), with values and pending writes.
    fn get(
        &self,
        thread_id: Uuid,
        checkpoint_id: Option<Uuid>,
    ) -> impl Future<Output = Result<Option<Saved>, BoxError>> + Send;

    /// Checkpoints newest first, at most `limit`, older than `before` when given.
    fn list(
        &self,
        thread_id: Uuid,
        limit: usize,
        before: Option<Uuid>,
    ) -> impl Future<Output = Result<Vec<Saved>, BoxError>> + Send;

    /// Deletes everything of a thread.
    fn delete_thread(&self, thread_id: Uuid) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// Keeps only the `keep_latest` newest checkpoints of a thread (and the values they refer to).
    fn prune(
        &self,
        thread_id: Uuid,
        keep_latest: usize,
    ) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// Copies a thread's checkpoints, values and writes to another thread id.
    fn copy_thread(
        &self,
        from: Uuid,
        to: Uuid,
    ) -> impl Future<Output = Result<(), BoxError>> + Send;
}

/// A namespace nested in another (`''` is the thread's graph's), as LangGraph joins them.
pub fn nested(outer: &str, inner: &str) -> String {
    if outer.is_empty() {
        inner.to_owned()
    } else {
        format!("{outer}|{inner}")
    }
}

/// A checkpointer in memory, for tests and for graphs run without a database.
#[derive(Debug, Default)]
pub struct MemoryCheckpointer {
    /// By thread and namespace; shared by the checkpointers [`Checkpointer::scoped`] makes.
    threads: Arc<Mutex<HashMap<(Uuid, String), ThreadData>>>,
    namespace: String,
}

#[derive(Debug, Clone, Default)]
struct ThreadData {
    /// Oldest first.
    checkpoints: Vec<Checkpoint>,
    blobs: HashMap<(String, i64), Value>,
    writes: HashMap<Uuid, BTreeMap<String, Vec<(String, Value)>>>,
}

impl ThreadData {
    fn saved(&self, checkpoint: &Checkpoint) -> Saved {
        let values = checkpoint
            .versions
            .iter()
            .filter_map(|(channel, version)| {
                let value = self.blobs.get(&(channel.clone(), *version))?;
                Some((channel.clone(), value.clone()))
            })
            .collect();
        let writes = self
            .writes
            .get(&checkpoint.checkpoint_id)
            .into_iter()
            .flatten()
            .flat_map(|(task_id, writes)| {
                writes.iter().map(|(channel, value)| PendingWrite {
                    task_id: task_id.clone(),
                    channel: channel.clone(),
                    value: value.clone(),
                })
            })
            .collect();
        Saved {
            checkpoint: checkpoint.clone(),
            values,
            writes,
        }
    }
}

impl MemoryCheckpointer {
    pub fn new() -> Self {
        Self::default()
    }

    fn key(&self, thread_id: Uuid) -> (Uuid, String) {
        (thread_id, self.namespace.clone())
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<(Uuid, String), ThreadData>) -> T) -> T {
        let mut threads = self
            .threads
            .lock()
            .expect("checkpointer lock is never poisoned");
        f(&mut threads)
    }
}

impl Checkpointer for MemoryCheckpointer {
    fn scoped(&self, namespace: &str) -> Self {
        Self {
            threads: Arc::clone(&self.threads),
            namespace: nested(&self.namespace, namespace),
        }
    }

    async fn put(
        &self,
        thread_id: Uuid,
        checkpoint: &Checkpoint,
        values: &State,
        changed: &[String],
    ) -> Result<(), BoxError> {
        self.with(|threads| {
            let thread = threads.entry(self.key(thread_id)).or_default();
            for channel in changed {
                let version = checkpoint
                    .versions
                    .get(channel)
                    .copied()
                    .unwrap_or_default();
                let value = values.get(channel).cloned().unwrap_or(Value::Null);
                thread.blobs.insert((channel.clone(), version), value);
            }
            thread
                .checkpoints
                .retain(|c| c.checkpoint_id != checkpoint.checkpoint_id);
            thread.checkpoints.push(checkpoint.clone());
        });
        Ok(())
    }

    async fn put_writes(
        &self,
        thread_id: Uuid,
        checkpoint_id: Uuid,
        writes: &[TaskWrites],
    ) -> Result<(), BoxError> {
        self.with(|threads| {
            let thread = threads.entry(self.key(thread_id)).or_default();
            let saved = thread.writes.entry(checkpoint_id).or_default();
            for (task_id, task_writes) in writes {
                saved.insert(task_id.clone(), task_writes.clone());
            }
        });
        Ok(())
    }

    async fn get(
        &self,
        thread_id: Uuid,
        checkpoint_id: Option<Uuid>,
    ) -> Result<Option<Saved>, BoxError> {
        Ok(self.with(|threads| {
            let thread = threads.get(&self.key(thread_id))?;
            let checkpoint = match checkpoint_id {
                None => thread.checkpoints.last()?,
                Some(id) => thread.checkpoints.iter().find(|c| c.checkpoint_id == id)?,
            };
            Some(thread.saved(checkpoint))
        }))
    }

    async fn list(
        &self,
        thread_id: Uuid,
        limit: usize,
        before: Option<Uuid>,
    ) -> Result<Vec<Saved>, BoxError> {
        Ok(self.with(|threads| {
            let Some(thread) = threads.get(&self.key(thread_id)) else {
                return Vec::new();
            };
            let newest_first = thread.checkpoints.iter().rev();
            let older = newest_first.skip_while(|c| before.is_some_and(|id| c.checkpoint_id != id));
            let older = older.skip(usize::from(before.is_some()));
            older.take(limit).map(|c| thread.saved(c)).collect()
        }))
    }

    async fn delete_thread(&self, thread_id: Uuid) -> Result<(), BoxError> {
        self.with(|threads| threads.retain(|(id, _), _| *id != thread_id));
        Ok(())
    }

    async fn prune(&self, thread_id: Uuid, keep_latest: usize) -> Result<(), BoxError> {
        self.with(|threads| {
            let Some(thread) = threads.get_mut(&self.key(thread_id)) else {
                return;
            };
            let drop_count = thread.checkpoints.len().saturating_sub(keep_latest);
            let dropped: Vec<Checkpoint> = thread.checkpoints.drain(..drop_count).collect();
            for checkpoint in &dropped {
                thread.writes.remove(&checkpoint.checkpoint_id);
            }
            let referenced: HashSet<(String, i64)> = thread
                .checkpoints
                .iter()
                .flat_map(|c| {
                    c.versions
                        .iter()
                        .map(|(channel, version)| (channel.clone(), *version))
                })
                .collect();
            thread.blobs.retain(|key, _| referenced.contains(key));
        });
        Ok(())
    }

    async fn copy_thread(&self, from: Uuid, to: Uuid) -> Result<(), BoxError> {
        self.with(|threads| {
            let copies: Vec<_> = threads
                .iter()
                .filter(|((id, _), _)| *id == from)
                .map(|((_, namespace), thread)| ((to, namespace.clone()), thread.clone()))
                .collect();
            threads.extend(copies);
        });
        Ok(())
    }
}
