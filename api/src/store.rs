//! `/store`: the Store (long-term memory) as the official server serves it. Each item is the
//! caller's own (its subject's): a caller reads, searches and deletes only what it wrote, or what
//! graph runs on its threads wrote.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use mostrador_queue::store::{self, Namespaces, Search};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{Body, Params};
use crate::runs::queue_error;

/// `PUT /store/items`.
#[derive(Debug, Deserialize)]
pub struct Put {
    namespace: Vec<String>,
    key: String,
    value: serde_json::Map<String, Value>,
    /// Minutes the item lives; it never expires without one. (`index`, the fields a semantic
    /// index would embed, is ignored: mostrador has no index.)
    #[serde(default)]
    ttl: Option<f64>,
}

pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Body(put): Body<Put>,
) -> Result<Response, ApiError> {
    store::put(
        state.pool(),
        &caller.subject,
        &put.namespace,
        &put.key,
        &Value::Object(put.value),
        put.ttl,
    )
    .await
    .map_err(queue_error)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The query of `GET /store/items`: the namespace's labels joined with periods.
#[derive(Debug, Deserialize)]
pub struct Get {
    #[serde(default)]
    namespace: String,
    key: Option<String>,
    refresh_ttl: Option<String>,
}

/// `GET /store/items`: the item, or `null`.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Params(query): Params<Get>,
) -> Result<Json<Value>, ApiError> {
    let namespace: Vec<String> = query.namespace.split('.').map(str::to_owned).collect();
    store::check_namespace(&namespace).map_err(queue_error)?;
    let Some(key) = query.key.filter(|key| !key.is_empty()) else {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "Key is required"));
    };
    let refresh =
        !matches!(query.refresh_ttl.as_deref(), Some(value) if value.eq_ignore_ascii_case("false"));
    let item = store::get(state.pool(), &caller.subject, &namespace, &key, refresh)
        .await
        .map_err(queue_error)?;
    Ok(Json(item.map_or(Value::Null, |item| item.json())))
}

/// `DELETE /store/items`.
#[derive(Debug, Deserialize)]
pub struct Delete {
    namespace: Vec<String>,
    key: String,
}

pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Body(delete): Body<Delete>,
) -> Result<Response, ApiError> {
    store::check_namespace(&delete.namespace).map_err(queue_error)?;
    store::delete(
        state.pool(),
        &caller.subject,
        &delete.namespace,
        &delete.key,
    )
    .await
    .map_err(queue_error)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /store/items/search`.
#[derive(Debug, Deserialize)]
pub struct SearchBody {
    #[serde(default)]
    namespace_prefix: Vec<String>,
    filter: Option<serde_json::Map<String, Value>>,
    limit: Option<i64>,
    offset: Option<i64>,
    /// (`query`, a semantic query, is ignored: mostrador has no index, so items are found by
    /// prefix and filter alone.)
    refresh_ttl: Option<bool>,
}

pub async fn search(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<SearchBody>,
) -> Result<Json<Value>, ApiError> {
    let search = Search {
        namespace_prefix: body.namespace_prefix,
        filter: body
            .filter
            .filter(|filter| !filter.is_empty())
            .map(Value::Object),
        limit: body.limit.unwrap_or(10),
        offset: body.offset.unwrap_or(0),
        refresh_ttl: body.refresh_ttl.unwrap_or(true),
    };
    let items = store::search(state.pool(), &caller.subject, &search)
        .await
        .map_err(queue_error)?;
    // Search items have a relevance score, null without a semantic query.
    let items: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut found = item.json();
            found["score"] = Value::Null;
            found
        })
        .collect();
    Ok(Json(json!({ "items": items })))
}

/// `POST /store/namespaces`.
#[derive(Debug, Deserialize)]
pub struct NamespacesBody {
    prefix: Option<Vec<String>>,
    suffix: Option<Vec<String>>,
    max_depth: Option<i32>,
    limit: Option<i64>,
    offset: Option<i64>,
}

pub async fn namespaces(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<NamespacesBody>,
) -> Result<Json<Value>, ApiError> {
    let asked = Namespaces {
        prefix: body.prefix.unwrap_or_default(),
        suffix: body.suffix.unwrap_or_default(),
        max_depth: body.max_depth,
        limit: body.limit.unwrap_or(100),
        offset: body.offset.unwrap_or(0),
    };
    let namespaces = store::namespaces(state.pool(), &caller.subject, &asked)
        .await
        .map_err(queue_error)?;
    Ok(Json(json!({ "namespaces": namespaces })))
}
