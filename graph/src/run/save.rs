//! The checkpoint after a superstep (or an input, or an update), and saving a run's progress as
//! its durability says: at once (`sync`), while the next superstep runs (`async`), or only when
//! the run stops (`exit`).

use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{Current, Execution, Unsaved};
use crate::channel::State;
use crate::checkpoint::{Checkpoint, Checkpointer, TaskSpec, TaskWrites};
use crate::control::Durability;
use crate::stream::StreamMode;
use crate::task::{TaskDone, update_json};
use crate::{Error, Result};

impl<C: Checkpointer> Execution<'_, C> {
    pub(super) async fn save(
        &mut self,
        checkpoint: &Checkpoint,
        values: &State,
        changed: Vec<String>,
    ) -> Result {
        match self.options.durability {
            Durability::Sync => self
                .checkpointer
                .put(self.thread_id, checkpoint, values, &changed)
                .await
                .map_err(Error::Checkpointer),
            Durability::Async | Durability::Exit => {
                // Channels changed since the last saved checkpoint must all be written with it.
                let mut all_changed = self.unsaved.take().map(|u| u.changed).unwrap_or_default();
                for channel in changed {
                    if !all_changed.contains(&channel) {
                        all_changed.push(channel);
                    }
                }
                self.unsaved = Some(Unsaved {
                    checkpoint: checkpoint.clone(),
                    values: values.clone(),
                    changed: all_changed,
                });
                Ok(())
            }
        }
    }

    pub(super) async fn save_unsaved(&self, unsaved: Option<Unsaved>) -> Result {
        let Some(unsaved) = unsaved else {
            return Ok(());
        };
        self.checkpointer
            .put(
                self.thread_id,
                &unsaved.checkpoint,
                &unsaved.values,
                &unsaved.changed,
            )
            .await
            .map_err(Error::Checkpointer)
    }

    pub(super) async fn put_writes(&self, checkpoint_id: Uuid, writes: Vec<TaskWrites>) -> Result {
        if writes.is_empty() {
            return Ok(());
        }
        if self.options.durability == Durability::Exit {
            let mut unsaved = self
                .unsaved_writes
                .lock()
                .expect("unsaved writes lock is never poisoned");
            for (task_id, task_writes) in writes {
                unsaved.retain(|(c, t, _)| !(*c == checkpoint_id && *t == task_id));
                unsaved.push((checkpoint_id, task_id, task_writes));
            }
            return Ok(());
        }
        self.checkpointer
            .put_writes(self.thread_id, checkpoint_id, &writes)
            .await
            .map_err(Error::Checkpointer)
    }

    /// Saves what `async` and `exit` durability held back: the last checkpoint, and the writes
    /// made against it.
    pub(super) async fn flush(&mut self) -> Result {
        let unsaved = self.unsaved.take();
        let last_id = unsaved.as_ref().map(|u| u.checkpoint.checkpoint_id);
        self.save_unsaved(unsaved).await?;
        let unsaved_writes = std::mem::take(
            &mut *self
                .unsaved_writes
                .lock()
                .expect("unsaved writes lock is never poisoned"),
        );
        for (checkpoint_id, task_id, writes) in unsaved_writes {
            if last_id.is_none_or(|id| id == checkpoint_id) {
                self.checkpointer
                    .put_writes(self.thread_id, checkpoint_id, &[(task_id, writes)])
                    .await
                    .map_err(Error::Checkpointer)?;
            }
        }
        Ok(())
    }

    /// The checkpoint after applying `done` (in task order) to `base`: new values, bumped
    /// versions, the next tasks; saved according to the durability.
    pub(super) async fn checkpoint_after(
        &mut self,
        base: Option<&Current>,
        done: &BTreeMap<usize, TaskDone>,
        source: &str,
        next: Option<Vec<TaskSpec>>,
    ) -> Result<Current> {
        let mut values = base.map(|b| b.values.clone()).unwrap_or_default();
        let mut versions = base
            .map(|b| b.checkpoint.versions.clone())
            .unwrap_or_default();
        let version = versions
            .values()
            .copied()
            .max()
            .unwrap_or(0)
            .max(self.version_floor)
            + 1;
        self.version_floor = version;
        let mut by_channel: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
        for task in done.values() {
            for (channel, value) in &task.update {
                if !self.graph.inner.channels.contains_key(channel) {
                    return Err(Error::InvalidUpdate {
                        node: task.node.clone(),
                        channel: channel.clone(),
                        reason: "no such channel".into(),
                    });
                }
                by_channel.entry(channel).or_default().push(value.clone());
            }
        }
        let mut changed = Vec::new();
        for (channel, writes) in by_channel {
            let reducer = &self.graph.inner.channels[channel];
            let value = reducer
                .reduce(values.remove(channel), writes)
                .map_err(|reason| Error::InvalidUpdate {
                    node: done
                        .values()
                        .find(|t| t.update.iter().any(|(c, _)| c == channel))
                        .map(|t| t.node.clone())
                        .unwrap_or_default(),
                    channel: channel.to_owned(),
                    reason,
                })?;
            values.insert(channel.to_owned(), value);
            versions.insert(channel.to_owned(), version);
            changed.push(channel.to_owned());
        }
        let next = match next {
            Some(next) => next,
            None => self.next_tasks(done, &values)?,
        };
        let step = base.map_or(-1, |b| b.checkpoint.step + 1);
        let writes_meta: Map<String, Value> = done
            .values()
            .map(|t| (t.node.clone(), update_json(&t.update)))
            .collect();
        let mut metadata = json!({"source": source, "step": step, "writes": writes_meta});
        if let Some(run_id) = self.options.config.get("run_id") {
            metadata["run_id"] = run_id.clone();
        }
        let checkpoint = Checkpoint {
            checkpoint_id: Uuid::now_v7(),
            parent_id: base.map(|b| b.checkpoint.checkpoint_id),
            step,
            versions,
            next,
            metadata,
            created_at: Utc::now(),
        };
        self.save(&checkpoint, &values, changed).await?;
        self.emit(StreamMode::Values, || Value::Object(values.clone()));
        self.emit(StreamMode::Checkpoints, || {
            let next: Vec<&str> = checkpoint.next.iter().map(|t| t.node.as_str()).collect();
            json!({"checkpoint_id": checkpoint.checkpoint_id, "parent_checkpoint_id": checkpoint.parent_id, "step": step, "values": values, "metadata": checkpoint.metadata, "next": next})
        });
        Ok(Current {
            checkpoint,
            values,
            writes: Vec::new(),
        })
    }
}
