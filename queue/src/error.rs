//! The queue's error type. Callers match on the domain variants; database failures are wrapped
//! whole.

use std::time::Duration;

use crate::api_keys::ApiKeyId;
use crate::{RunId, ThreadId};

/// `Result` with the queue's [`Error`].
pub type Result<T = ()> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Database(#[from] sqlx::Error),

    #[error(transparent)]
    Migrate(#[from] sqlx::migrate::MigrateError),

    /// The database schema is not the one this binary embeds.
    #[error("{0}")]
    Schema(String),

    #[error("thread {0} not found")]
    ThreadNotFound(ThreadId),

    #[error("run {0} not found")]
    RunNotFound(RunId),

    #[error("API key {0} not found")]
    ApiKeyNotFound(ApiKeyId),

    /// The operating system gave no random bytes (for a new API key).
    #[error("no random bytes from the operating system: {0}")]
    Random(String),

    /// A run was enqueued on a thread of another graph.
    #[error("thread {thread_id} belongs to graph {thread_graph_id:?}, not {graph_id:?}")]
    GraphMismatch {
        thread_id: ThreadId,
        thread_graph_id: String,
        graph_id: String,
    },

    /// The `reject` multitask strategy met a run in flight on the thread.
    #[error("thread {thread_id} already has run {run_id} in flight")]
    Conflict { thread_id: ThreadId, run_id: RunId },

    /// The graph's pending queue is at its limit; nothing was inserted.
    #[error("graph {graph_id:?} has {pending} pending runs, at its limit of {limit}")]
    Backpressure {
        graph_id: String,
        pending: i64,
        limit: i64,
        retry_after: Duration,
    },

    /// The run is no longer running under this attempt: it was swept, released or finished, and
    /// maybe claimed again. The caller must stop the run and write nothing more.
    #[error("lease lost on run {run_id} (attempt {attempt})")]
    LeaseLost { run_id: RunId, attempt: i32 },

    /// An argument that no database state could make valid.
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
}
