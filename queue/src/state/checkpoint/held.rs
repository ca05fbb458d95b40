//! A run's final checkpoint, held by its checkpointer for the run's ending to write in its own
//! transaction ([`super::PgCheckpointer::holding_final`]), and the statement that writes a batch
//! of them.

use std::sync::{Arc, Mutex};

use mostrador_graph::{Checkpoint, State};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::Result;
use crate::run::claim::Lease;

/// Where a run's checkpointer holds the run's final checkpoint ([`super::PgCheckpointer::holding_final`]):
/// shared with whoever writes the run's ending, which may be the worker's supervisor when the
/// run's own could not be written (it then fails the run, retryably, with it).
#[derive(Debug, Clone, Default)]
pub struct HeldFinal(Arc<Mutex<Option<Arc<FinalCheckpoint>>>>);

impl HeldFinal {
    /// The final checkpoint held, if the run has made it: nothing is left to run.
    pub fn get(&self) -> Option<Arc<FinalCheckpoint>> {
        self.lock().clone()
    }

    /// Holds the checkpoint the run made last, with the values of the channels it changed.
    pub(super) fn hold(
        &self,
        thread_id: Uuid,
        checkpoint: &Checkpoint,
        values: &State,
        changed: &[String],
    ) {
        *self.lock() = Some(Arc::new(FinalCheckpoint {
            thread_id,
            checkpoint: checkpoint.clone(),
            values: changed
                .iter()
                .map(|c| values.get(c).cloned().unwrap_or(Value::Null))
                .collect(),
            changed: changed.to_vec(),
        }));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<FinalCheckpoint>>> {
        self.0
            .lock()
            .expect("held checkpoint lock is never poisoned")
    }
}

/// A run's final checkpoint (of the thread's graph, with nothing left to run), held by its
/// checkpointer to be written in the transaction of the run's ending ([`crate::run::ending::End`]'s
/// `with_checkpoint`), fenced as the checkpointer would have written it.
#[derive(Debug, Clone, PartialEq)]
pub struct FinalCheckpoint {
    thread_id: Uuid,
    checkpoint: Checkpoint,
    /// The channels it changed, and their values beside them.
    changed: Vec<String>,
    values: Vec<Value>,
}

/// Writes runs' final checkpoints, each under its run's lease, in one statement; a checkpoint
/// whose lease is lost is not written (the run's ending, in the same transaction, reports it).
pub(crate) async fn write_final(
    executor: impl sqlx::PgExecutor<'_>,
    finals: &[(Lease, &FinalCheckpoint)],
) -> Result {
    let n = finals.len();
    let (mut runs, mut attempts, mut threads) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut ids, mut parents, mut steps) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut versions, mut metadata) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut blob_runs, mut channels, mut blob_versions, mut values) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (lease, last) in finals {
        let checkpoint = &last.checkpoint;
        debug_assert!(
            checkpoint.next.is_empty(),
            "a final checkpoint has nothing next"
        );
        runs.push(lease.run_id.0);
        attempts.push(lease.attempt);
        threads.push(last.thread_id);
        ids.push(checkpoint.checkpoint_id);
        parents.push(checkpoint.parent_id);
        steps.push(checkpoint.step);
        versions.push(json!(checkpoint.versions));
        metadata.push(&checkpoint.metadata);
        for (channel, value) in last.changed.iter().zip(&last.values) {
            blob_runs.push(lease.run_id.0);
            channels.push(channel.as_str());
            blob_versions.push(
                checkpoint
                    .versions
                    .get(channel)
                    .copied()
                    .unwrap_or_default(),
            );
            values.push(value);
        }
    }
    sqlx::query_file_scalar!(
        "queries/put_final_checkpoints.sql",
        &runs,
        &attempts,
        &threads,
        &ids,
        &parents as &[Option<Uuid>],
        &steps,
        &versions,
        &metadata as &[&Value],
        &blob_runs,
        &channels as &[&str],
        &blob_versions,
        &values as &[&Value],
    )
    .fetch_all(executor)
    .await?;
    Ok(())
}
