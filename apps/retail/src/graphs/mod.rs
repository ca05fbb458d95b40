//! The four retail graphs, registered under their assistant ids:
//!
//! * [`tienda`]: the store-floor assistant, a model ⇄ tools loop.
//! * [`cliente`]: returns, with a manager's approval (an interrupt) before the refund.
//! * [`compras`]: the daily purchasing pass, a bounded fan-out of batches.
//! * [`fichas`]: product sheets, generator → evaluator → bounded loop.
//!
//! They are also the examples to copy: each is a plain [`StateGraph`] whose nodes call the
//! [`Model`] and the `retail` schema.

pub mod cliente;
pub mod compras;
pub mod fichas;
pub mod tienda;

use std::collections::HashMap;

use mostrador_graph::{Graph, NodeContext, NodeError};
use mostrador_model::Model;
use mostrador_queue::{Error as QueueError, Thread, ThreadId};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

/// The retail app's authorization policy (`apps/retail/policy.toml`): managers read their store's
/// threads and decide its refunds; only a store's staff start `compras` and `fichas`.
pub const POLICY: &str = include_str!("../../policy.toml");

/// Every retail graph by assistant id.
pub fn all(pool: &PgPool, model: &Model) -> HashMap<String, Graph> {
    HashMap::from([
        ("tienda".to_owned(), tienda::graph(pool, model)),
        ("cliente".to_owned(), cliente::graph(pool, model)),
        ("compras".to_owned(), compras::graph(pool, model)),
        ("fichas".to_owned(), fichas::graph(pool, model)),
    ])
}

/// The run and thread a node works for (the worker puts them in the configuration).
pub(crate) fn run_and_thread(ctx: &NodeContext) -> Result<(Uuid, Uuid), NodeError> {
    let id = |key: &str| {
        ctx.config()[key]
            .as_str()
            .and_then(|id| Uuid::parse_str(id).ok())
            .ok_or_else(|| NodeError::fatal(format!("the run's configuration has no {key}")))
    };
    Ok((id("run_id")?, id("thread_id")?))
}

/// The thread a node works for: its owner (the customer) and store.
pub(crate) async fn thread(pool: &PgPool, thread_id: Uuid) -> Result<Thread, NodeError> {
    match mostrador_queue::thread::get(pool, ThreadId(thread_id)).await {
        Ok(thread) => Ok(thread),
        Err(QueueError::ThreadNotFound(_)) => Err(NodeError::fatal("the run's thread is gone")),
        Err(QueueError::Database(err)) => Err(db(err)),
        Err(err) => Err(NodeError::fatal(format!(
            "reading the run's thread failed: {err}"
        ))),
    }
}

/// The messages of the state.
pub(crate) fn messages(ctx: &NodeContext) -> Vec<Value> {
    ctx.get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// A database failure in a node. Worth another try under the node's retry policy when the
/// database or the connection to it failed; not when a statement does not fit the schema or its
/// data (a row that does not decode, a constraint broken), which another try would repeat.
pub(crate) fn db(err: sqlx::Error) -> NodeError {
    use sqlx::Error;
    match &err {
        Error::Io(_)
        | Error::Tls(_)
        | Error::Protocol(_)
        | Error::PoolTimedOut
        | Error::PoolClosed
        | Error::WorkerCrashed => NodeError::retryable(format!("the database failed: {err}")),
        Error::Database(db) if retryable_sqlstate(db.code().as_deref()) => {
            NodeError::retryable(format!("the database failed: {err}"))
        }
        _ => NodeError::fatal(format!("a statement failed: {err}")),
    }
}

/// Serialization failures, deadlocks, lock timeouts, too many connections, the server shutting
/// down or out of resources: another try may succeed.
fn retryable_sqlstate(code: Option<&str>) -> bool {
    code.is_some_and(|code| {
        matches!(
            code,
            "40001" | "40P01" | "55P03" | "53300" | "57P01" | "57P02" | "57P03"
        ) || code.starts_with("08")
            || code.starts_with("53")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retryable(err: sqlx::Error) -> bool {
        matches!(
            db(err),
            NodeError::Failed {
                retryable: true,
                ..
            }
        )
    }

    #[test]
    fn a_lost_database_is_retried_and_a_statement_that_does_not_fit_is_not() {
        assert!(retryable(sqlx::Error::PoolTimedOut));
        assert!(retryable(sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset
        ))));
        assert!(!retryable(sqlx::Error::ColumnDecode {
            index: "4".into(),
            source: "unexpected null".into(),
        }));
        assert!(!retryable(sqlx::Error::RowNotFound));
        assert!(retryable_sqlstate(Some("57P01")), "the server shuts down");
        assert!(retryable_sqlstate(Some("08006")), "the connection failed");
        assert!(retryable_sqlstate(Some("40001")), "a serialization failure");
        assert!(!retryable_sqlstate(Some("23505")), "a unique violation");
        assert!(
            !retryable_sqlstate(Some("22P05")),
            "a character jsonb refuses"
        );
        assert!(!retryable_sqlstate(None));
    }
}
