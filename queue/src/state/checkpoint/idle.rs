//! The checkpointer of changes made outside any run (the api's state update of a Rust graph's
//! thread): written only while the thread is idle and unchanged since the change read it.

use mostrador_graph::State;
use mostrador_graph::checkpoint::{BoxError, Checkpoint, Checkpointer, Saved, TaskWrites};
use sqlx::PgPool;
use uuid::Uuid;

use super::{PgCheckpointer, boxed};
use crate::{Error, Result};

/// A checkpointer for a change made outside any run: the api's update of a thread's state. It
/// reads as [`PgCheckpointer`]; it writes a checkpoint in a transaction that holds the thread's
/// row (`for no key update`, as every enqueue does), then finds no run of the thread pending or
/// running and the thread's latest checkpoint still the one it read, else writes nothing
/// ([`Error::ThreadBusy`]). So no run is enqueued, starts or saves between the change's read and
/// its write, and the change never forks the thread behind a run's back.
#[derive(Debug)]
pub struct IdleThreadCheckpointer {
    inner: PgCheckpointer,
    /// The latest checkpoint the change read (`Some(None)`: the thread had none).
    read: std::sync::Mutex<Option<Option<Uuid>>>,
}

impl IdleThreadCheckpointer {
    pub fn new(pool: PgPool) -> Self {
        Self {
            inner: PgCheckpointer::new(pool),
            read: std::sync::Mutex::new(None),
        }
    }

    fn read_latest(&self) -> Option<Option<Uuid>> {
        *self
            .read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn put_while_idle(
        &self,
        thread_id: Uuid,
        checkpoint: &Checkpoint,
        values: &State,
        changed: &[String],
    ) -> Result {
        let mut tx = self.inner.pool.begin().await?;
        let thread = crate::ThreadId(thread_id);
        // The lock first, in a statement of its own: the next one reads after every enqueue that
        // held the row before it committed.
        sqlx::query_scalar!(
            r#"
            -- Locked by its id alone, then checked (see `crate::db`).
            with locked as materialized (
                select thread_id, deleted_at
                from mostrador.threads
                where thread_id = $1
                for no key update
            )
            select thread_id
            from locked
            where deleted_at is null
            "#,
            thread_id,
        )
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(Error::ThreadNotFound(thread))?;
        let now = sqlx::query!(
            r#"
            select
                exists (
                    select 1
                    from mostrador.runs
                    where thread_id = $1
                      and status in ('pending', 'running')
                ) as "busy!",
                (
                    select checkpoint_id
                    from mostrador.checkpoints
                    where thread_id = $1
                      and checkpoint_ns = ''
                    order by step desc
                    limit 1
                ) as "latest?"
            "#,
            thread_id,
        )
        .fetch_one(&mut *tx)
        .await?;
        let changed_since = self.read_latest().is_some_and(|read| read != now.latest);
        if now.busy || changed_since {
            return Err(Error::ThreadBusy(thread));
        }
        self.inner
            .put_checkpoint(&mut *tx, thread_id, checkpoint, values, changed)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}

impl Checkpointer for IdleThreadCheckpointer {
    async fn put(
        &self,
        thread_id: Uuid,
        checkpoint: &Checkpoint,
        values: &State,
        changed: &[String],
    ) -> std::result::Result<(), BoxError> {
        self.put_while_idle(thread_id, checkpoint, values, changed)
            .await
            .map_err(boxed)
    }

    async fn put_writes(
        &self,
        _thread_id: Uuid,
        _checkpoint_id: Uuid,
        _writes: &[TaskWrites],
    ) -> std::result::Result<(), BoxError> {
        Err(boxed(Error::Invalid {
            field: "writes",
            reason: "a change outside any run writes checkpoints, not tasks' writes".into(),
        }))
    }

    async fn get(
        &self,
        thread_id: Uuid,
        checkpoint_id: Option<Uuid>,
    ) -> std::result::Result<Option<Saved>, BoxError> {
        let saved = self.inner.get(thread_id, checkpoint_id).await?;
        if checkpoint_id.is_none() && self.inner.namespace.is_empty() {
            *self
                .read
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some(saved.as_ref().map(|saved| saved.checkpoint.checkpoint_id));
        }
        Ok(saved)
    }

    async fn list(
        &self,
        thread_id: Uuid,
        limit: usize,
        before: Option<Uuid>,
    ) -> std::result::Result<Vec<Saved>, BoxError> {
        self.inner.list(thread_id, limit, before).await
    }

    fn scoped(&self, namespace: &str) -> Self {
        Self {
            inner: self.inner.scoped(namespace),
            read: std::sync::Mutex::new(None),
        }
    }

    async fn delete_thread(&self, thread_id: Uuid) -> std::result::Result<(), BoxError> {
        self.inner.delete_thread(thread_id).await
    }

    async fn prune(
        &self,
        thread_id: Uuid,
        keep_latest: usize,
    ) -> std::result::Result<(), BoxError> {
        self.inner.prune(thread_id, keep_latest).await
    }

    async fn copy_thread(&self, from: Uuid, to: Uuid) -> std::result::Result<(), BoxError> {
        self.inner.copy_thread(from, to).await
    }
}
