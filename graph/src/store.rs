//! Long-term memory for nodes, as LangGraph's `BaseStore` is for its graphs: items by namespace
//! and key, kept across threads. The engine keeps none itself: whoever executes a run gives it one
//! ([`RunOptions::store`](crate::RunOptions::store); mostrador's workers give the items of the
//! thread's owner, in Postgres), and its nodes reach it through
//! [`NodeContext::store`](crate::NodeContext::store). A backend executes LangGraph's store
//! operations as JSON (`get`, `put`, `search`, `list_namespaces`), so that Rust and Python
//! graphs share one implementation of them.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::node::NodeError;

/// What a backend's batch resolves to: one result per operation, or why it failed (and whether
/// trying again may help).
pub type StoreFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<Value>, StoreError>> + Send + 'a>>;

/// Why a batch failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    pub message: String,
    /// The store could not be reached (a retry may succeed), rather than refusing the operation.
    pub transient: bool,
}

/// Executes store operations.
pub trait StoreBackend: Send + Sync {
    /// Executes `ops` in order, each `{"op": ..., ...}` as LangGraph's `BaseStore.batch` names
    /// them; one result per operation.
    fn batch(&self, ops: Vec<Value>) -> StoreFuture<'_>;
}

/// A store, as a node holds it. Cheap to clone.
#[derive(Clone)]
pub struct Store(Arc<dyn StoreBackend>);

/// An item as the store keeps it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Item {
    pub namespace: Vec<String>,
    pub key: String,
    pub value: Value,
    /// RFC 3339.
    pub created_at: String,
    pub updated_at: String,
    /// How similar it is to a search's query (a store with a semantic index); none elsewhere.
    #[serde(default)]
    pub score: Option<f64>,
}

impl Store {
    pub fn new(backend: impl StoreBackend + 'static) -> Self {
        Self(Arc::new(backend))
    }

    async fn one(&self, op: Value) -> Result<Value, NodeError> {
        let mut results = self.0.batch(vec![op]).await.map_err(|err| {
            if err.transient {
                NodeError::retryable(format!("the store: {}", err.message))
            } else {
                NodeError::fatal(format!("the store: {}", err.message))
            }
        })?;
        Ok(results.pop().unwrap_or(Value::Null))
    }

    /// The item at `key` in `namespace`, if there is one.
    ///
    /// # Errors
    ///
    /// A failed store: retryable when it could not be reached.
    pub async fn get(&self, namespace: &[&str], key: &str) -> Result<Option<Item>, NodeError> {
        let found = self
            .one(json!({"op": "get", "namespace": namespace, "key": key}))
            .await?;
        item(found)
    }

    /// Writes `value` (a JSON object) at `key` in `namespace`.
    ///
    /// # Errors
    ///
    /// As [`Store::get`]; a value that is not an object is refused.
    pub async fn put(&self, namespace: &[&str], key: &str, value: Value) -> Result<(), NodeError> {
        self.one(json!({"op": "put", "namespace": namespace, "key": key, "value": value}))
            .await
            .map(drop)
    }

    /// Deletes the item at `key` in `namespace`, if there is one.
    ///
    /// # Errors
    ///
    /// As [`Store::get`].
    pub async fn delete(&self, namespace: &[&str], key: &str) -> Result<(), NodeError> {
        self.one(json!({"op": "put", "namespace": namespace, "key": key, "value": null}))
            .await
            .map(drop)
    }

    /// Up to `limit` items under `prefix` whose values contain `filter`, newest first.
    ///
    /// # Errors
    ///
    /// As [`Store::get`].
    pub async fn search(
        &self,
        prefix: &[&str],
        filter: Option<Value>,
        limit: i64,
    ) -> Result<Vec<Item>, NodeError> {
        self.search_op(json!({
            "op": "search", "namespace_prefix": prefix, "filter": filter, "limit": limit,
            "offset": 0,
        }))
        .await
    }

    /// Up to `limit` items under `prefix` whose values contain `filter`, those nearest in meaning
    /// to `query` first, each with its `score`, as LangGraph's `search(..., query=...)` finds
    /// them in a store with a semantic index (a project's `store.index`); without one, newest
    /// first, unscored.
    ///
    /// # Errors
    ///
    /// As [`Store::get`].
    pub async fn search_similar(
        &self,
        prefix: &[&str],
        query: &str,
        filter: Option<Value>,
        limit: i64,
    ) -> Result<Vec<Item>, NodeError> {
        self.search_op(json!({
            "op": "search", "namespace_prefix": prefix, "query": query, "filter": filter,
            "limit": limit, "offset": 0,
        }))
        .await
    }

    async fn search_op(&self, op: Value) -> Result<Vec<Item>, NodeError> {
        let found = self.one(op).await?;
        match found {
            Value::Array(items) => items
                .into_iter()
                .map(|found| item(found)?.ok_or_else(|| NodeError::fatal("the store: a null item")))
                .collect(),
            other => Err(NodeError::fatal(format!("the store answered {other}"))),
        }
    }
}

fn item(found: Value) -> Result<Option<Item>, NodeError> {
    if found.is_null() {
        return Ok(None);
    }
    serde_json::from_value(found).map(Some).map_err(|err| {
        NodeError::fatal(format!("the store answered an item that is not one: {err}"))
    })
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Store")
    }
}

/// The same store.
impl PartialEq for Store {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
