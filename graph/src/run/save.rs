//! Saving a run's progress as its durability says: at once (`sync`), while the next superstep
//! runs (`async`), or only when the run stops (`exit`).

use uuid::Uuid;

use super::{Execution, Unsaved};
use crate::channel::State;
use crate::checkpoint::{Checkpoint, Checkpointer, TaskWrites};
use crate::control::Durability;
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
}
