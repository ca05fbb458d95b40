//! A run's checkpointer that reports how long its durable writes take.

use mostrador_graph::checkpoint::{BoxError, TaskWrites};
use mostrador_graph::{Checkpoint, Checkpointer, Saved, State};
use mostrador_queue::PgCheckpointer;
use tokio::time::Instant;
use uuid::Uuid;

use crate::telemetry::Telemetry;

/// Wraps a run's checkpointer; `put` and `put_writes` are timed, reads pass through.
#[derive(Debug)]
pub struct Timed<'a> {
    inner: PgCheckpointer,
    telemetry: &'a Telemetry,
}

impl<'a> Timed<'a> {
    pub fn new(inner: PgCheckpointer, telemetry: &'a Telemetry) -> Self {
        Self { inner, telemetry }
    }
}

impl Checkpointer for Timed<'_> {
    fn scoped(&self, namespace: &str) -> Self {
        Self::new(self.inner.scoped(namespace), self.telemetry)
    }

    async fn put(
        &self,
        thread_id: Uuid,
        checkpoint: &Checkpoint,
        values: &State,
        changed: &[String],
    ) -> Result<(), BoxError> {
        let start = Instant::now();
        let saved = self.inner.put(thread_id, checkpoint, values, changed).await;
        // A final checkpoint held for the run's ending was not written: nothing to time.
        if !self.inner.holds_final() {
            self.telemetry.observe_write("checkpoint", start.elapsed());
        }
        saved
    }

    async fn put_writes(
        &self,
        thread_id: Uuid,
        checkpoint_id: Uuid,
        writes: &[TaskWrites],
    ) -> Result<(), BoxError> {
        let start = Instant::now();
        let saved = self
            .inner
            .put_writes(thread_id, checkpoint_id, writes)
            .await;
        self.telemetry.observe_write("writes", start.elapsed());
        saved
    }

    async fn get(
        &self,
        thread_id: Uuid,
        checkpoint_id: Option<Uuid>,
    ) -> Result<Option<Saved>, BoxError> {
        self.inner.get(thread_id, checkpoint_id).await
    }

    async fn list(
        &self,
        thread_id: Uuid,
        limit: usize,
        before: Option<Uuid>,
    ) -> Result<Vec<Saved>, BoxError> {
        self.inner.list(thread_id, limit, before).await
    }

    async fn delete_thread(&self, thread_id: Uuid) -> Result<(), BoxError> {
        self.inner.delete_thread(thread_id).await
    }

    async fn prune(&self, thread_id: Uuid, keep_latest: usize) -> Result<(), BoxError> {
        self.inner.prune(thread_id, keep_latest).await
    }

    async fn copy_thread(&self, from: Uuid, to: Uuid) -> Result<(), BoxError> {
        self.inner.copy_thread(from, to).await
    }
}
