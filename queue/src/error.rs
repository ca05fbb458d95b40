//! The queue's error type. Callers match on the domain variants; database failures are wrapped
//! whole.

use std::time::Duration;

use crate::data::api_keys::ApiKeyId;
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

    /// A change outside any run (a state update) found a run of the thread in flight, or the
    /// thread changed since the change read it; nothing was written.
    #[error("thread {0} has a run in flight or changed meanwhile")]
    ThreadBusy(ThreadId),

    /// The graph's pending queue is at its limit; nothing was inserted.
    #[error("graph {graph_id:?} has {pending} pending runs, at its limit of {limit}")]
    Backpressure {
        graph_id: String,
        pending: i64,
        limit: i64,
        retry_after: Duration,
    },

    /// The caller (the thread's owner) has their share of pending runs already; nothing was
    /// inserted. Others' runs are still taken.
    #[error("{owner:?} has {pending} pending runs, at their share of {limit}")]
    CallerShare {
        owner: String,
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

impl Error {
    /// Whether trying again later may succeed: the database away, restarting, out of
    /// connections or resources, a lock or serialization conflict, backpressure, a schema being
    /// migrated. Anything else is bad input or a bug, which trying again does not fix.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Database(err) => database_is_transient(err),
            Self::Schema(_) | Self::Backpressure { .. } | Self::CallerShare { .. } => true,
            _ => false,
        }
    }
}

/// [`Error::is_transient`] for a database error.
pub fn database_is_transient(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // Connection exceptions, insufficient resources, operator intervention (a restart),
            // serialization failures, deadlocks and locks not available.
            ["08", "53", "57P"]
                .iter()
                .any(|class| code.starts_with(class))
                || matches!(code.as_ref(), "40001" | "40P01" | "55P03")
        }),
        _ => false,
    }
}

/// Whether an error, or the first of its causes that is the queue's or the database's, is
/// transient ([`Error::is_transient`]); an error of no such cause is not.
pub fn is_transient(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(err) = next {
        if let Some(err) = err.downcast_ref::<Error>() {
            return err.is_transient();
        }
        if let Some(err) = err.downcast_ref::<sqlx::Error>() {
            return database_is_transient(err);
        }
        next = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_that_may_pass_are_transient() {
        let gone = Error::Database(sqlx::Error::Io(std::io::Error::other("reset")));
        assert!(gone.is_transient());
        assert!(Error::Database(sqlx::Error::PoolTimedOut).is_transient());
        assert!(!Error::Database(sqlx::Error::RowNotFound).is_transient());
        assert!(
            !Error::Invalid {
                field: "x",
                reason: "y".into()
            }
            .is_transient()
        );
        // Found among the causes of another error, boxed or not.
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(gone);
        assert!(is_transient(&*boxed));
        assert!(is_transient(&sqlx::Error::PoolClosed));
        let plain: Box<dyn std::error::Error + Send + Sync> = "a bug".into();
        assert!(!is_transient(&*plain));
    }
}
