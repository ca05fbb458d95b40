//! Reading and changing a thread's state outside a run: latest state, state at a checkpoint,
//! history, and updates.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::channel::State;
use crate::checkpoint::{Checkpointer, Saved};
use crate::node::START;
use crate::task::{Interrupt, pending_interrupts};
use crate::{Error, Graph, Result};

/// A thread's state at a checkpoint, as the `langgraph-sdk` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct StateSnapshot {
    pub values: State,
    /// The nodes of the next superstep; empty when the graph has finished (or never ran).
    pub next: Vec<String>,
    /// The next superstep's tasks, with the interrupts they wait on.
    pub tasks: Vec<TaskState>,
    pub metadata: Value,
    /// `None` for a thread that has no checkpoint.
    pub checkpoint_id: Option<Uuid>,
    pub parent_checkpoint_id: Option<Uuid>,
    pub created_at: Option<DateTime<Utc>>,
    pub step: Option<i64>,
}

/// A task of the next superstep.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskState {
    pub id: String,
    pub name: String,
    pub interrupts: Vec<Interrupt>,
}

impl StateSnapshot {
    /// The state of a thread without checkpoints: empty, waiting for nothing.
    pub fn empty() -> Self {
        Self {
            values: State::new(),
            next: Vec::new(),
            tasks: Vec::new(),
            metadata: Value::Null,
            checkpoint_id: None,
            parent_checkpoint_id: None,
            created_at: None,
            step: None,
        }
    }

    /// The interrupts the thread waits on.
    pub fn interrupts(&self) -> impl Iterator<Item = &Interrupt> {
        self.tasks.iter().flat_map(|task| &task.interrupts)
    }

    fn from_saved(saved: &Saved) -> Self {
        let interrupts = pending_interrupts(saved);
        let tasks = saved
            .checkpoint
            .next
            .iter()
            .enumerate()
            .map(|(index, spec)| {
                let id = spec.task_id(index);
                TaskState {
                    interrupts: interrupts
                        .iter()
                        .filter(|i| i.task_id == id)
                        .cloned()
                        .collect(),
                    id,
                    name: spec.node.clone(),
                }
            })
            .collect();
        Self {
            values: saved.values.clone(),
            next: saved
                .checkpoint
                .next
                .iter()
                .map(|t| t.node.clone())
                .collect(),
            tasks,
            metadata: saved.checkpoint.metadata.clone(),
            checkpoint_id: Some(saved.checkpoint.checkpoint_id),
            parent_checkpoint_id: saved.checkpoint.parent_id,
            created_at: Some(saved.checkpoint.created_at),
            step: Some(saved.checkpoint.step),
        }
    }
}

impl Graph {
    /// The latest state of a thread, or the state at `checkpoint_id`. A thread without
    /// checkpoints has the empty state.
    ///
    /// # Errors
    ///
    /// [`Error::CheckpointNotFound`] for an unknown checkpoint id; checkpointer errors.
    pub async fn get_state<C: Checkpointer>(
        &self,
        checkpointer: &C,
        thread_id: Uuid,
        checkpoint_id: Option<Uuid>,
    ) -> Result<StateSnapshot> {
        match checkpointer
            .get(thread_id, checkpoint_id)
            .await
            .map_err(Error::Checkpointer)?
        {
            Some(saved) => Ok(StateSnapshot::from_saved(&saved)),
            None if checkpoint_id.is_some() => Err(Error::CheckpointNotFound),
            None => Ok(StateSnapshot::empty()),
        }
    }

    /// The states of a thread, newest first: at most `limit`, older than `before` when given.
    pub async fn get_history<C: Checkpointer>(
        &self,
        checkpointer: &C,
        thread_id: Uuid,
        limit: usize,
        before: Option<Uuid>,
    ) -> Result<Vec<StateSnapshot>> {
        let saved = checkpointer
            .list(thread_id, limit, before)
            .await
            .map_err(Error::Checkpointer)?;
        Ok(saved.iter().map(StateSnapshot::from_saved).collect())
    }

    /// Writes `values` to the thread's state as if node `as_node` had returned them, in a new
    /// checkpoint: on the latest, or on the past checkpoint `at`, as a new branch that becomes the
    /// thread's latest (an edit of the past). The next tasks are those `as_node` leads to; without
    /// `as_node` the pending tasks stay as they were (their interrupts, if any, are dropped).
    /// Returns the new checkpoint's id.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownNode`], [`Error::InvalidUpdate`], [`Error::InvalidInput`] for values that
    /// are not an object, [`Error::CheckpointNotFound`] for an `at` the thread does not have.
    pub async fn update_state<C: Checkpointer>(
        &self,
        checkpointer: &C,
        thread_id: Uuid,
        values: Value,
        as_node: Option<&str>,
        at: Option<Uuid>,
    ) -> Result<Uuid> {
        if let Some(node) = as_node
            && node != START
            && !self.inner.nodes.contains_key(node)
        {
            return Err(Error::UnknownNode(node.to_owned()));
        }
        let latest = checkpointer
            .get(thread_id, None)
            .await
            .map_err(Error::Checkpointer)?;
        // New versions stay above every version of the thread, so a branch from the past never
        // reads a value of the branch it left.
        let version_floor = latest
            .as_ref()
            .and_then(|l| l.checkpoint.versions.values().copied().max())
            .unwrap_or(0);
        let base = match at {
            None => latest,
            Some(checkpoint_id) => {
                let mut past = checkpointer
                    .get(thread_id, Some(checkpoint_id))
                    .await
                    .map_err(Error::Checkpointer)?
                    .ok_or(Error::CheckpointNotFound)?;
                // The new branch is the thread's latest: numbered after its latest step, with
                // that checkpoint's tasks to run again.
                if let Some(latest) = &latest {
                    past.checkpoint.step = past.checkpoint.step.max(latest.checkpoint.step);
                }
                past.writes.clear();
                Some(past)
            }
        };
        let checkpoint_id = crate::run::update(
            self,
            checkpointer,
            thread_id,
            base,
            values,
            as_node,
            version_floor,
        )
        .await?;
        Ok(checkpoint_id)
    }
}
