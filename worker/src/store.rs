//! The Store for the graphs a worker runs: LangGraph's store operations on the items of a
//! run's thread's owner (`queue::store`), for Python graphs (their runner's `store` messages)
//! and Rust graphs ([`ThreadStore`], which nodes reach through their context) alike.

use std::future::Future;
use std::pin::Pin;

use mostrador_graph::{StoreBackend, StoreError, StoreFuture};
use mostrador_queue::PgPool;
use mostrador_queue::{Error as QueueError, ThreadId, store, thread};
use serde_json::{Value, json};

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
            match batch(&self.pool, self.thread_id, &ops).await {
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
/// search's `query_vector` with them; for a Rust node's, [`EMBED`] makes them here.
///
/// # Errors
///
/// [`QueueError::Invalid`] for an operation the store does not have or refuses; the database
/// failed.
pub async fn batch(pool: &PgPool, thread_id: ThreadId, ops: &[Value]) -> Result<Value, QueueError> {
    let owner = thread::get(pool, thread_id).await?.owner;
    let labels = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|label| label.as_str().map(str::to_owned))
            .collect()
    };
    let mut results = Vec::new();
    for op in ops {
        let key = op["key"].as_str().unwrap_or_default();
        let refresh_ttl = op["refresh_ttl"].as_bool().unwrap_or(true);
        let result = match op["op"].as_str() {
            Some("get") => store::get(pool, &owner, &labels(&op["namespace"]), key, refresh_ttl)
                .await?
                .map_or(Value::Null, |item| item.json()),
            Some("put") if op["value"].is_null() => {
                store::delete(pool, &owner, &labels(&op["namespace"]), key).await?;
                Value::Null
            }
            Some("put") => {
                let namespace = labels(&op["namespace"]);
                let embedded: Vec<store::Embedded> = match (op.get("embedded"), EMBED.get()) {
                    (None | Some(Value::Null), None) => Vec::new(),
                    (None | Some(Value::Null), Some(embed)) => embed
                        .documents(&op["value"], &op["index"])
                        .await
                        .map_err(embed_error)?,
                    (Some(sent), _) => {
                        serde_json::from_value(sent.clone()).map_err(|err| QueueError::Invalid {
                            field: "embedded",
                            reason: format!("a put's embedded fields: {err}"),
                        })?
                    }
                };
                let write = store::Write {
                    namespace: &namespace,
                    key,
                    value: &op["value"],
                    ttl_minutes: op["ttl"].as_f64(),
                    embedded: &embedded,
                };
                store::put(pool, &owner, write, quota()).await?;
                Value::Null
            }
            Some("search") => {
                let query = match (op.get("query_vector"), op["query"].as_str(), EMBED.get()) {
                    (None | Some(Value::Null), Some(query), Some(embed)) if !query.is_empty() => {
                        Some(embed.query(query).await.map_err(embed_error)?)
                    }
                    (None | Some(Value::Null), _, _) => None,
                    (Some(sent), _, _) => {
                        Some(serde_json::from_value(sent.clone()).map_err(|err| {
                            QueueError::Invalid {
                                field: "query_vector",
                                reason: format!("a search's query vector: {err}"),
                            }
                        })?)
                    }
                };
                let search = store::Search {
                    namespace_prefix: labels(&op["namespace_prefix"]),
                    filter: Some(op["filter"].clone()).filter(Value::is_object),
                    query,
                    limit: op["limit"].as_i64().unwrap_or(10),
                    offset: op["offset"].as_i64().unwrap_or(0),
                    refresh_ttl,
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
            Some("list_namespaces") => {
                let asked = store::Namespaces {
                    prefix: labels(&op["prefix"]),
                    suffix: labels(&op["suffix"]),
                    max_depth: op["max_depth"].as_i64().and_then(|d| i32::try_from(d).ok()),
                    limit: op["limit"].as_i64().unwrap_or(100),
                    offset: op["offset"].as_i64().unwrap_or(0),
                };
                json!(store::namespaces(pool, &owner, &asked).await?)
            }
            other => {
                return Err(QueueError::Invalid {
                    field: "op",
                    reason: format!("the store has no operation {other:?}"),
                });
            }
        };
        results.push(result);
    }
    Ok(Value::Array(results))
}
