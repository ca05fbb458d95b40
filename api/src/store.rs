//! `/store`: the Store (long-term memory) as the official server serves it. Each item is the
//! caller's own (its subject's): a caller reads, searches and deletes only what it wrote, or what
//! graph runs on its threads wrote. A project's store handlers (`auth.path`) are asked first, as
//! officially: they may refuse, move the namespace (under the user's own, say), and add to a
//! search's filter.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use mostrador_queue::data::store::{self, Namespaces, Search};
use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::app::AppState;
use crate::auth::Caller;
use crate::authorize::grant;
use crate::custom_auth::Grant;
use crate::custom_auth::event::{
    StoreDelete, StoreGet, StoreListNamespaces, StorePut, StoreSearch,
};
use crate::error::ApiError;
use crate::extract::{Body, Params};
use crate::openapi::fields;
use crate::runs::queue_error;
use crate::wire;

/// `PUT /store/items`.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = ItemPut)]
pub struct Put {
    #[schema(schema_with = fields::item_namespace)]
    namespace: Vec<String>,
    key: String,
    #[schema(value_type = Object)]
    value: serde_json::Map<String, Value>,
    /// Minutes the item lives; without one, the project's default (`store.ttl.default_ttl`), or
    /// it never expires.
    #[serde(default)]
    #[schema(schema_with = fields::item_ttl)]
    ttl: Option<f64>,
    /// The fields of the value to embed for searches with a query, in place of the index's
    /// (`store.index.fields`); `false` for none. Without a `store.index`, nothing is embedded.
    #[serde(default)]
    #[schema(value_type = Option<Value>)]
    index: Option<Value>,
}

pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Body(put): Body<Put>,
) -> Result<Response, ApiError> {
    let granted = grant(
        &state,
        &caller,
        &StorePut {
            namespace: &put.namespace,
            key: &put.key,
            value: &put.value,
            index: put.index.as_ref(),
            ttl: put.ttl,
        },
    )
    .await?;
    let namespace = granted_namespace(&granted, put.namespace)?;
    let value = Value::Object(put.value);
    let index = put.index.unwrap_or(Value::Null);
    if !(index.is_null()
        || index == Value::Bool(false)
        || index
            .as_array()
            .is_some_and(|paths| paths.iter().all(Value::is_string)))
    {
        return Err(ApiError::unprocessable(
            "index must be false, null or a list of the value's paths to embed",
        ));
    }
    let embedded = match state.store_index() {
        Some(store_index) => store_index.embed(&value, &index).await?,
        None => Vec::new(),
    };
    let write = store::Write {
        namespace: &namespace,
        key: &put.key,
        value: &value,
        ttl_minutes: put.ttl.or(state.store_ttl().default_minutes),
        embedded: &embedded,
    };
    store::put(state.pool(), &caller.subject, write, state.store_quota())
        .await
        .map_err(queue_error)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The query of `GET /store/items`: the namespace's labels joined with periods.
#[derive(Debug, Deserialize, IntoParams)]
pub struct Get {
    #[serde(default)]
    #[param(pattern = "^[^.]+([.][^.]+)*$")]
    namespace: String,
    #[param(nullable = false)]
    key: Option<String>,
    /// Whether reading the item renews its TTL (anything but `false`; the operator's default
    /// when absent).
    #[param(nullable = false)]
    refresh_ttl: Option<String>,
}

/// `GET /store/items`: the item, or `null`.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Params(query): Params<Get>,
) -> Result<Json<Option<wire::Item>>, ApiError> {
    let namespace: Vec<String> = query.namespace.split('.').map(str::to_owned).collect();
    store::check_namespace(&namespace).map_err(queue_error)?;
    let Some(key) = query.key.filter(|key| !key.is_empty()) else {
        return Err(ApiError::bad_request("Key is required"));
    };
    let refresh = match query.refresh_ttl.as_deref() {
        None | Some("") => state.store_ttl().refresh_on_read,
        Some(value) => !value.eq_ignore_ascii_case("false"),
    };
    let granted = grant(
        &state,
        &caller,
        &StoreGet {
            namespace: &namespace,
            key: &key,
            refresh_ttl: refresh,
        },
    )
    .await?;
    let namespace = granted_namespace(&granted, namespace)?;
    let item = store::get(state.pool(), &caller.subject, &namespace, &key, refresh)
        .await
        .map_err(queue_error)?;
    Ok(Json(item.map(wire::Item::from)))
}

/// `DELETE /store/items`.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = ItemDelete)]
pub struct Delete {
    #[schema(schema_with = fields::namespace_prefix)]
    namespace: Vec<String>,
    key: String,
}

pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Body(delete): Body<Delete>,
) -> Result<Response, ApiError> {
    store::check_namespace(&delete.namespace).map_err(queue_error)?;
    let granted = grant(
        &state,
        &caller,
        &StoreDelete {
            namespace: &delete.namespace,
            key: &delete.key,
        },
    )
    .await?;
    let namespace = granted_namespace(&granted, delete.namespace)?;
    store::delete(state.pool(), &caller.subject, &namespace, &delete.key)
        .await
        .map_err(queue_error)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /store/items/search`.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = ItemSearch)]
pub struct SearchBody {
    #[serde(default)]
    #[schema(schema_with = fields::namespace_prefix)]
    namespace_prefix: Vec<String>,
    /// Items whose value holds these fields with these values.
    #[schema(value_type = Option<Object>)]
    filter: Option<serde_json::Map<String, Value>>,
    #[schema(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    #[schema(minimum = 0)]
    offset: Option<i64>,
    /// A semantic query: under the project's `store.index`, the items most similar to it come
    /// first, with their `score`; without an index, it is not used.
    #[serde(default)]
    query: Option<String>,
    refresh_ttl: Option<bool>,
}

pub async fn search(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<SearchBody>,
) -> Result<Response, ApiError> {
    let granted = grant(
        &state,
        &caller,
        &StoreSearch {
            namespace: &body.namespace_prefix,
            filter: body.filter.as_ref(),
            limit: body.limit.unwrap_or(10),
            offset: body.offset.unwrap_or(0),
            query: body.query.as_deref(),
            refresh_ttl: body.refresh_ttl,
        },
    )
    .await?;
    let namespace_prefix = granted_namespace(&granted, body.namespace_prefix)?;
    // The handler's filter joins the request's, over the items' values, as officially.
    let mut filter = body.filter.unwrap_or_default();
    if let Some(Value::Object(added)) = granted.filter_json() {
        filter.extend(added);
    }
    let query = match (state.store_index(), body.query.as_deref()) {
        (Some(store_index), Some(query)) if !query.is_empty() => {
            Some(store_index.query(query).await?)
        }
        _ => None,
    };
    let search = Search {
        namespace_prefix,
        filter: Some(filter)
            .filter(|filter| !filter.is_empty())
            .map(Value::Object),
        query,
        limit: body.limit.unwrap_or(10),
        offset: body.offset.unwrap_or(0),
        refresh_ttl: body
            .refresh_ttl
            .unwrap_or(state.store_ttl().refresh_on_read),
    };
    let found = store::search(state.pool(), &caller.subject, &search, state.vectors())
        .await
        .map_err(queue_error)?;
    // Search items have a relevance score, null without a semantic query.
    let mut page = wire::Page::new(br#"{"items":["#, state.max_page_bytes());
    for found in found {
        page.push(&wire::SearchItem {
            item: found.item.into(),
            score: found.score,
        })?;
    }
    Ok(page.answer(b"]}"))
}

/// The namespace a project's handler left in its value (`namespace`), else `sent`.
///
/// # Errors
///
/// A 500 for a handler that left one that is not a list of strings.
fn granted_namespace(granted: &Grant, sent: Vec<String>) -> Result<Vec<String>, ApiError> {
    match granted.value.get("namespace") {
        None | Some(Value::Null) => Ok(sent),
        Some(Value::Array(labels)) => labels
            .iter()
            .map(|label| label.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                ApiError::failed("the project's store handler left a namespace that is not strings")
            }),
        Some(other) => Err(ApiError::failed(format!(
            "the project's store handler left a namespace that is not a list: {other:.100}"
        ))),
    }
}

/// `POST /store/namespaces`.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = NamespaceSearch)]
pub struct NamespacesBody {
    #[schema(schema_with = fields::nullable_namespace_prefix)]
    prefix: Option<Vec<String>>,
    #[schema(schema_with = fields::nullable_namespace_prefix)]
    suffix: Option<Vec<String>>,
    #[schema(minimum = 1, maximum = 1000)]
    max_depth: Option<i32>,
    #[schema(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    #[schema(minimum = 0)]
    offset: Option<i64>,
}

pub async fn namespaces(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<NamespacesBody>,
) -> Result<Json<wire::NamespaceList>, ApiError> {
    let granted = grant(
        &state,
        &caller,
        &StoreListNamespaces {
            namespace: body.prefix.as_deref(),
            suffix: body.suffix.as_deref(),
            max_depth: body.max_depth,
            limit: body.limit.unwrap_or(100),
            offset: body.offset.unwrap_or(0),
        },
    )
    .await?;
    let asked = Namespaces {
        prefix: granted_namespace(&granted, body.prefix.unwrap_or_default())?,
        suffix: body.suffix.unwrap_or_default(),
        max_depth: body.max_depth,
        limit: body.limit.unwrap_or(100),
        offset: body.offset.unwrap_or(0),
    };
    let namespaces = store::namespaces(state.pool(), &caller.subject, &asked)
        .await
        .map_err(queue_error)?;
    Ok(Json(wire::NamespaceList { namespaces }))
}
