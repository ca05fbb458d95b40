//! What a claimed run's checkpointer last read of where its thread is.

use std::sync::{Arc, Mutex};

use mostrador_graph::checkpoint::Saved;
use uuid::Uuid;

use crate::run::claim::ClaimedRun;

/// A claimed run's checkpointer's last read of its thread's latest checkpoint in a namespace,
/// until its next write: while the run holds its lease nothing else writes that thread's
/// checkpoints, so the worker's look at where a run starts and the engine's start share one read.
#[derive(Debug, Default)]
pub(super) struct LatestRead(Mutex<Option<Read>>);

/// A thread, a namespace, and its latest checkpoint there (`None`: it had none).
type Read = (Uuid, Arc<str>, Option<Saved>);

impl LatestRead {
    /// What the claim said: a thread without a checkpoint has none in its root namespace.
    pub(super) fn of_claim(claimed: &ClaimedRun) -> Self {
        let latest = Self::default();
        if !claimed.checkpointed {
            latest.set(claimed.thread_id.0, &Arc::from(""), None);
        }
        latest
    }

    /// The latest checkpoint read of `thread_id` in `namespace` (`Some(None)`: it had none).
    pub(super) fn get(&self, thread_id: Uuid, namespace: &str) -> Option<Option<Saved>> {
        let read = self.0.lock().expect("never poisoned");
        read.as_ref()
            .filter(|(thread, ns, _)| *thread == thread_id && **ns == *namespace)
            .map(|(_, _, saved)| saved.clone())
    }

    pub(super) fn set(&self, thread_id: Uuid, namespace: &Arc<str>, saved: Option<&Saved>) {
        *self.0.lock().expect("never poisoned") =
            Some((thread_id, Arc::clone(namespace), saved.cloned()));
    }

    /// A write came: what was read may be stale.
    pub(super) fn forget(&self) {
        self.0.lock().expect("never poisoned").take();
    }
}
