//! The four retail graphs (DESIGN.md §9), registered under their assistant ids:
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
use mostrador_queue::{Error as QueueError, Thread, ThreadId};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use crate::llm::Model;

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
        Err(err) => Err(NodeError::retryable(format!("the database failed: {err}"))),
    }
}

/// The messages of the state.
pub(crate) fn messages(ctx: &NodeContext) -> Vec<Value> {
    ctx.get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// A database failure in a node: worth another try under the node's retry policy.
pub(crate) fn db(err: sqlx::Error) -> NodeError {
    NodeError::retryable(format!("the database failed: {err}"))
}
