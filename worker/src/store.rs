//! The Store for the graphs a worker runs: LangGraph's store operations on the items of a
//! run's thread's owner (`queue::data::store`), for Python graphs (their runner's `store` messages)
//! and Rust graphs ([`ThreadStore`], which nodes reach through their context) alike.

use std::future::Future;
use std::pin::Pin;

use mostrador_graph::{StoreBackend, StoreError, StoreFuture};
use mostrador_queue::PgPool;
use mostrador_queue::{Error as QueueError, ThreadId, data::store, thread};
use serde_json::{Value, json};

use crate::runner::protocol::StoreOp;

/// The Store of a Rust graph's run: its thread's owner's items.
#[derive(Debug)]
pub struct ThreadStore {
    pool: PgPool,
    thread_id: ThreadId,
}

impl ThreadStore {
    pub fn new(pool: PgPool, thread_id: ThreadId) -> Self {
        Self { pool, thread_id }
    }
}

impl StoreBackend for ThreadStore {
    fn batch(&self, ops: Vec<Value>) -> StoreFuture<'_> {
        Box::pin(async move {
            let typed: Result<Vec<StoreOp>, _> =
                ops.into_iter().map(serde_json::from_value).collect();
            let typed = typed.map_err(|err| StoreError {
                transient: false,
                message: format!("a store operation of the wrong shape: {err}"),
            })?;
            match batch(&self.pool, self.thread_id, &typed).await {
                Ok(Value::Array(results)) => Ok(results),
                Ok(other) => Ok(vec![other]),
                Err(err) => Err(StoreError {
                    transient: mostrador_queue::is_transient(&err),
                    message: match err {
                        QueueError::Invalid { reason, .. } => reason,
                        other => other.to_string(),
                    },
                }),
            }
        })
    }
}

/// What one caller may keep in the Store, as this process's operator set it (once, at start).
static QUOTA: std::sync::OnceLock<store::StoreQuota> = std::sync::OnceLock::new();

/// Sets [`QUOTA`]; the first call counts.
pub fn set_quota(quota: store::StoreQuota) {
    let _ = QUOTA.set(quota);
}

fn quota() -> store::StoreQuota {
    QUOTA.get().copied().unwrap_or_default()
}

/// The vectors this process has read for semantic searches (`store.index`).
static VECTORS: std::sync::LazyLock<store::VectorCache> =
    std::sync::LazyLock::new(store::VectorCache::default);

/// What an [`Embed`] resolves to.
pub type EmbedFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// The project's embedding function (`store.index`), for what reaches the Store without its
/// vectors: a Rust node's puts and searches (a Python graph's runner embeds its own).
pub trait Embed: Send + Sync {
    /// The embedded fields of `value`: the index's, or those `index` names (`false`: none).
    fn documents<'a>(
        &'a self,
        value: &'a Value,
        index: &'a Value,
    ) -> EmbedFuture<'a, Vec<store::Embedded>>;
    /// The embedding of a search's query.
    fn query<'a>(&'a self, query: &'a str) -> EmbedFuture<'a, Vec<f32>>;
}

/// The project's embedding function, as this process's operator set it (once, at start).
static EMBED: std::sync::OnceLock<Box<dyn Embed>> = std::sync::OnceLock::new();

/// Sets [`EMBED`]; the first call counts.
pub fn set_embed(embed: Box<dyn Embed>) {
    let _ = EMBED.set(embed);
}

fn embed_error(reason: String) -> QueueError {
    QueueError::Invalid {
        field: "index",
        reason: format!("the project's embedding function: {reason}"),
    }
}

/// A batch of LangGraph's Store operations (`get`, `put`, `search`, `list_namespaces`) on the
/// items of the thread's owner, whoever the graph says it is: their results, in order. Under the
/// project's `store.index`, a Python graph's runner sends a put's `embedded` fields and a
/// search's `query_vector` with them; for a Rust node's or a JavaScript graph's, [`EMBED`] makes
/// them here.
///
/// # Errors
///
/// [`QueueError::Invalid`] for an operation the store does not have or refuses; the database
/// failed.
pub async fn batch(
    pool: &PgPool,
    thread_id: ThreadId,
    ops: &[StoreOp],
) -> Result<Value, QueueError> {
    let owner = thread::get(pool, thread_id).await?.owner;
    let mut results = Vec::new();
    for op in ops {
        let result = match op {
            StoreOp::Get {
                namespace,
                key,
                refresh_ttl,
            } => store::get(pool, &owner, namespace, key, *refresh_ttl)
                .await?
                .map_or(Value::Null, |item| item.json()),
            StoreOp::Put {
                namespace,
                key,
                value: Value::Null,
                ..
            } => {
                store::delete(pool, &owner, namespace, key).await?;
                Value::Null
            }
            StoreOp::Put {
                namespace,
                key,
                value,
                ttl,
                index,
                embedded,
            } => {
                let embedded = match (embedded, EMBED.get()) {
                    (Some(sent), _) => sent.clone(),
                    (None, Some(embed)) => embed
                        .documents(value, index.as_ref().unwrap_or(&Value::Null))
                        .await
                        .map_err(embed_error)?,
                    (None, None) => Vec::new(),
                };
                let write = store::Write {
                    namespace,
                    key,
                    value,
                    ttl_minutes: *ttl,
                    embedded: &embedded,
                };
                store::put(pool, &owner, write, quota()).await?;
                Value::Null
            }
            StoreOp::Search {
                namespace_prefix,
                filter,
                limit,
                offset,
                refresh_ttl,
                query,
                query_vector,
            } => {
                let query = match (query_vector, query.as_deref(), EMBED.get()) {
                    (Some(sent), _, _) => Some(sent.clone()),
                    (None, Some(query), Some(embed)) if !query.is_empty() => {
                        Some(embed.query(query).await.map_err(embed_error)?)
                    }
                    (None, _, _) => None,
                };
                let search = store::Search {
                    namespace_prefix: namespace_prefix.clone(),
                    filter: filter.clone().filter(Value::is_object),
                    query,
                    limit: *limit,
                    offset: *offset,
                    refresh_ttl: *refresh_ttl,
                };
                let found = store::search(pool, &owner, &search, &VECTORS).await?;
                Value::Array(
                    found
                        .iter()
                        .map(|found| {
                            let mut item = found.item.json();
                            item["score"] = json!(found.score);
                            item
                        })
                        .collect(),
                )
            }
            StoreOp::ListNamespaces {
                prefix,
                suffix,
                max_depth,
                limit,
                offset,
            } => {
                let asked = store::Namespaces {
                    prefix: prefix.clone(),
                    suffix: suffix.clone(),
                    max_depth: *max_depth,
                    limit: *limit,
                    offset: *offset,
                };
                json!(store::namespaces(pool, &owner, &asked).await?)
            }
        };
        results.push(result);
    }
    Ok(Value::Array(results))
}
