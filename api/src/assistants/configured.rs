//! Assistants callers create: configured instances of a graph, as on the official server. Each
//! update is a new version (one of which is the latest), each assistant its creator's own; the
//! graphs' own assistants are code, listed beside them and never changed.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use mostrador_queue::data::assistants::{self as rows, Change, NewAssistant, SORTS};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::{Assistant, Search, found, found_for, owner_scope};
use crate::app::AppState;
use crate::auth::Caller;
use crate::authorize::grant;
use crate::custom_auth::event::{AssistantsCreate, AssistantsSearch, AssistantsUpdate};
use crate::error::ApiError;
use crate::extract::{Body, Params};
use crate::openapi::fields;
use crate::runs::queue_error;
use crate::threads::granted_metadata;

/// An assistant `id` the caller created (under a project's auth handlers, one their `action`
/// handler allows); the graphs' own are not theirs to change.
async fn owned(
    state: &AppState,
    caller: &Caller,
    id: &str,
    action: &'static str,
) -> Result<Uuid, ApiError> {
    let assistant = found_for(state, caller, id, Some(action)).await?;
    if state.assistant(id).is_some() {
        return Err(ApiError::conflict(
            "a graph's own assistant is the graph's: create an assistant to configure it",
        ));
    }
    Ok(assistant.assistant_id)
}

/// A graph's assistant's config and context, as the official server keeps them: the context is
/// `config.configurable`, given either way but not both.
fn config_and_context(
    config: Option<Map<String, Value>>,
    context: Option<Map<String, Value>>,
) -> Result<(Option<Value>, Option<Value>), ApiError> {
    let mut config = config;
    let configurable = config
        .as_ref()
        .and_then(|config| config.get("configurable"))
        .filter(|configurable| !configurable.is_null());
    if configurable.is_some_and(|configurable| !configurable.is_object()) {
        return Err(ApiError::unprocessable(
            "config.configurable must be an object",
        ));
    }
    let given = configurable.is_some_and(|c| c.as_object().is_some_and(|c| !c.is_empty()));
    let context = context.filter(|context| !context.is_empty());
    match (given, context) {
        (true, Some(_)) => Err(ApiError::bad_request(
            "specify either config.configurable or context, not both",
        )),
        (true, None) => {
            let configurable = configurable.cloned();
            Ok((config.map(Value::Object), configurable))
        }
        (false, Some(context)) => {
            let config = config.get_or_insert_with(Map::new);
            config.insert("configurable".into(), Value::Object(context.clone()));
            Ok((
                Some(Value::Object(config.clone())),
                Some(Value::Object(context)),
            ))
        }
        (false, None) => Ok((config.map(Value::Object), None)),
    }
}

/// `POST /assistants`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = AssistantCreate)]
pub struct Create {
    #[schema(value_type = String, required = true)]
    graph_id: Option<String>,
    #[schema(schema_with = fields::nullable_uuid)]
    assistant_id: Option<String>,
    #[schema(value_type = Option<Object>)]
    config: Option<Map<String, Value>>,
    #[schema(value_type = Option<Object>)]
    context: Option<Map<String, Value>>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Map<String, Value>>,
    #[schema(schema_with = fields::if_exists)]
    if_exists: Option<String>,
    name: Option<String>,
    description: Option<String>,
}

pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<Create>,
) -> Result<Json<Assistant>, ApiError> {
    let graph_id = body
        .graph_id
        .ok_or_else(|| ApiError::unprocessable("graph_id is required"))?;
    if state
        .assistant(&graph_id)
        .is_none_or(|own| own.graph_id != graph_id)
    {
        return Err(ApiError::not_found(format!("Graph {graph_id:?} not found")));
    }
    let do_nothing = match body.if_exists.as_deref() {
        None | Some("raise") => false,
        Some("do_nothing") => true,
        Some(_) => {
            return Err(ApiError::unprocessable(
                "if_exists must be raise or do_nothing",
            ));
        }
    };
    let assistant_id = match body.assistant_id.as_deref() {
        None => Uuid::now_v7(),
        Some(id) => Uuid::parse_str(id)
            .map_err(|_| ApiError::unprocessable("assistant_id must be a UUID"))?,
    };
    let taken = || ApiError::conflict(format!("Assistant {assistant_id} already exists"));
    if state.assistant(&assistant_id.to_string()).is_some() {
        return Err(taken());
    }
    // The project's handler may stamp the metadata (an owner, say), as officially.
    let granted = grant(
        &state,
        &caller,
        &AssistantsCreate {
            assistant_id,
            graph_id: &graph_id,
            config: body.config.as_ref(),
            context: body.context.as_ref(),
            metadata: body.metadata.clone().unwrap_or_default(),
            if_exists: body.if_exists.as_deref(),
            name: body.name.as_deref(),
            description: body.description.as_deref(),
        },
    )
    .await?;
    let metadata = granted_metadata(granted.value, body.metadata)?;
    let (config, context) = config_and_context(body.config, body.context)?;
    let new = NewAssistant {
        assistant_id,
        owner: caller.subject.clone(),
        graph_id: graph_id.clone(),
        name: body.name.unwrap_or_else(|| "Untitled".to_owned()),
        description: body.description,
        config: config.unwrap_or_else(|| json!({})),
        context: context.unwrap_or_else(|| json!({})),
        metadata: Value::Object(metadata),
    };
    match rows::create(state.pool(), &new)
        .await
        .map_err(queue_error)?
    {
        Some(created) => Ok(Json(created.into())),
        // Anyone's: the same conflict, and only the caller's own is handed back.
        None if do_nothing => {
            match rows::get(state.pool(), owner_scope(&state, &caller), assistant_id)
                .await
                .map_err(queue_error)?
            {
                Some(existing) => Ok(Json(existing.into())),
                None => Err(taken()),
            }
        }
        None => Err(taken()),
    }
}

/// `PATCH /assistants/{assistant_id}`: a new version, the latest.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = AssistantPatch)]
pub struct Update {
    graph_id: Option<String>,
    #[schema(value_type = Option<Object>)]
    config: Option<Map<String, Value>>,
    #[schema(value_type = Option<Object>)]
    context: Option<Map<String, Value>>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Map<String, Value>>,
    name: Option<String>,
    description: Option<String>,
}

pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Body(body): Body<Update>,
) -> Result<Json<Assistant>, ApiError> {
    let mut body = body;
    if state.custom_auth().is_some() {
        let granted = grant(
            &state,
            &caller,
            &AssistantsUpdate {
                assistant_id: &id,
                graph_id: body.graph_id.as_deref(),
                config: body.config.as_ref(),
                context: body.context.as_ref(),
                metadata: body.metadata.clone().unwrap_or_default(),
                name: body.name.as_deref(),
                description: body.description.as_deref(),
            },
        )
        .await?;
        let sent = body.metadata.take();
        body.metadata = Some(granted_metadata(granted.value, sent)?);
    }
    let assistant_id = owned(&state, &caller, &id, "update").await?;
    if let Some(graph_id) = &body.graph_id
        && state
            .assistant(graph_id)
            .is_none_or(|own| own.graph_id != *graph_id)
    {
        return Err(ApiError::not_found(format!("Graph {graph_id:?} not found")));
    }
    let config = body.config.filter(|config| !config.is_empty());
    let (config, context) = config_and_context(config, body.context)?;
    let change = Change {
        graph_id: body.graph_id,
        name: body.name,
        description: body.description,
        config,
        context,
        metadata: body.metadata.map(Value::Object),
    };
    rows::update(
        state.pool(),
        owner_scope(&state, &caller),
        assistant_id,
        &change,
    )
    .await
    .map_err(queue_error)?
    .map(|updated| Json(updated.into()))
    .ok_or_else(|| ApiError::not_found(format!("Assistant {id} not found")))
}

/// `DELETE /assistants/{assistant_id}`.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Params(query): Params<DeleteQuery>,
) -> Result<Response, ApiError> {
    let assistant_id = owned(&state, &caller, &id, "delete").await?;
    rows::delete(state.pool(), owner_scope(&state, &caller), assistant_id)
        .await
        .map_err(queue_error)?;
    if query.delete_threads {
        // The threads it ran on go too, as officially (their in-flight runs cancelled).
        let threads =
            mostrador_queue::thread::of_assistant(state.pool(), &caller.subject, assistant_id)
                .await
                .map_err(ApiError::failed)?;
        for thread_id in threads {
            match mostrador_queue::thread::delete(state.pool(), thread_id).await {
                Ok(()) | Err(mostrador_queue::Error::ThreadNotFound(_)) => {}
                Err(err) => return Err(ApiError::failed(err)),
            }
        }
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The query of `DELETE /assistants/{assistant_id}`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(default)]
pub struct DeleteQuery {
    /// Also delete the threads the assistant ran on.
    delete_threads: bool,
}

/// `POST /assistants/{assistant_id}/versions`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = AssistantVersionSearch)]
pub struct Versions {
    #[schema(value_type = Option<Object>)]
    metadata: Option<Map<String, Value>>,
    #[schema(minimum = 1, maximum = 1000, default = 10)]
    limit: i64,
    #[schema(minimum = 0, default = 0)]
    offset: i64,
}

impl Default for Versions {
    fn default() -> Self {
        Self {
            metadata: None,
            limit: 10,
            offset: 0,
        }
    }
}

/// An assistant as it was at a version: a version is made once, so it has no `updated_at`, as
/// on the official server.
#[derive(Debug, Serialize, ToSchema)]
pub struct AssistantVersion {
    assistant_id: Uuid,
    graph_id: String,
    #[schema(value_type = Object)]
    config: Value,
    #[schema(value_type = Object)]
    context: Value,
    #[schema(value_type = Object)]
    metadata: Value,
    name: String,
    description: Option<String>,
    version: i32,
    created_at: chrono::DateTime<chrono::Utc>,
}

impl From<Assistant> for AssistantVersion {
    fn from(assistant: Assistant) -> Self {
        Self {
            assistant_id: assistant.assistant_id,
            graph_id: assistant.graph_id,
            config: assistant.config,
            context: assistant.context,
            metadata: assistant.metadata,
            name: assistant.name,
            description: assistant.description,
            version: assistant.version,
            created_at: assistant.created_at,
        }
    }
}

pub async fn versions(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Body(body): Body<Versions>,
) -> Result<Json<Vec<AssistantVersion>>, ApiError> {
    let assistant = found(&state, &caller, &id).await?;
    if state.assistant(&id).is_some() {
        // A graph's own assistant has one version: itself.
        return Ok(Json(vec![assistant.into()]));
    }
    let metadata = body
        .metadata
        .filter(|metadata| !metadata.is_empty())
        .map(Value::Object);
    let found = rows::versions(
        state.pool(),
        owner_scope(&state, &caller),
        assistant.assistant_id,
        metadata.as_ref(),
        body.limit,
        body.offset,
    )
    .await
    .map_err(queue_error)?
    .unwrap_or_default();
    Ok(Json(
        found
            .into_iter()
            .map(|row| Assistant::from(row).into())
            .collect(),
    ))
}

/// `POST /assistants/{assistant_id}/latest`.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = AssistantLatest)]
pub struct Latest {
    version: i32,
}

pub async fn set_latest(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Body(body): Body<Latest>,
) -> Result<Json<Assistant>, ApiError> {
    let assistant_id = owned(&state, &caller, &id, "update").await?;
    rows::set_latest(
        state.pool(),
        owner_scope(&state, &caller),
        assistant_id,
        body.version,
    )
    .await
    .map_err(queue_error)?
    .map(|latest| Json(latest.into()))
    .ok_or_else(|| {
        ApiError::not_found(format!(
            "Version {} not found for assistant {id}",
            body.version
        ))
    })
}

/// `POST /assistants/count`.
pub async fn count(
    State(state): State<AppState>,
    caller: Caller,
    Body(search): Body<Search>,
) -> Result<Json<i64>, ApiError> {
    state.learn_names().await;
    let (own, query) = matching(&state, &caller, &search).await?;
    let created = rows::count(state.pool(), owner_scope(&state, &caller), &query)
        .await
        .map_err(queue_error)?;
    Ok(Json(own.len() as i64 + created))
}

/// The graphs' own assistants that match, and the query for the caller's (both filtered by a
/// project's search handler, under `auth.path`).
async fn matching(
    state: &AppState,
    caller: &Caller,
    search: &Search,
) -> Result<(Vec<Assistant>, rows::Search), ApiError> {
    if !(1..=1000).contains(&search.limit) || search.offset < 0 {
        return Err(ApiError::unprocessable(
            "limit must be between 1 and 1000 and offset at least 0",
        ));
    }
    let sort_by = match search.sort_by.as_deref() {
        None => "created_at",
        Some(name) => SORTS
            .into_iter()
            .find(|sort| *sort == name)
            .ok_or_else(|| {
                ApiError::unprocessable(format!("sort_by must be one of {}", SORTS.join(", ")))
            })?,
    };
    let descending = match search.sort_order.as_deref() {
        None | Some("desc") => true,
        Some("asc") => false,
        Some(_) => return Err(ApiError::unprocessable("sort_order must be asc or desc")),
    };
    let metadata = search
        .metadata
        .clone()
        .filter(|metadata| !metadata.is_empty());
    let granted = grant(
        state,
        caller,
        &AssistantsSearch {
            graph_id: search.graph_id.as_deref(),
            metadata: search.metadata.clone().unwrap_or_default(),
            limit: search.limit,
            offset: search.offset,
        },
    )
    .await?;
    let own = state
        .assistants()
        .map(|a| state.named(a.clone()))
        .filter(|a| granted.admits(&a.metadata))
        .filter(|a| search.graph_id.as_ref().is_none_or(|g| *g == a.graph_id))
        .filter(|a| search.name.as_ref().is_none_or(|n| *n == a.name))
        .filter(|a| {
            metadata.as_ref().is_none_or(|wanted| {
                wanted
                    .iter()
                    .all(|(key, value)| a.metadata.get(key) == Some(value))
            })
        })
        .collect();
    let query = rows::Search {
        graph_id: search.graph_id.clone(),
        name: search.name.clone(),
        metadata: metadata.map(Value::Object),
        auth_filter: granted.filter_json(),
        sort_by,
        descending,
        // Enough of the caller's to fill the page after the graphs' own are merged in, and one
        // more to tell whether another page follows.
        limit: search
            .offset
            .saturating_add(search.limit)
            .saturating_add(1)
            .min(1000),
        offset: 0,
    };
    Ok((own, query))
}

/// The graphs' own assistants and the caller's, sorted, paged; and whether more follow.
pub(super) async fn search(
    state: &AppState,
    caller: &Caller,
    search: Search,
) -> Result<(Vec<Assistant>, bool), ApiError> {
    state.learn_names().await;
    let (mut all, query) = matching(state, caller, &search).await?;
    let created = rows::search(state.pool(), owner_scope(state, caller), &query)
        .await
        .map_err(queue_error)?;
    all.extend(created.into_iter().map(Assistant::from));
    let key = |a: &Assistant| -> (Value, String, Uuid) {
        let by = match query.sort_by {
            "assistant_id" => json!(a.assistant_id),
            "graph_id" => json!(a.graph_id),
            "name" => json!(a.name),
            "updated_at" => json!(a.updated_at.timestamp_micros()),
            _ => json!(a.created_at.timestamp_micros()),
        };
        (by, a.graph_id.clone(), a.assistant_id)
    };
    // Ties (the graphs' own assistants share a creation time) in graph order either way.
    all.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        let ordered = compare(&ka.0, &kb.0);
        let ordered = if query.descending {
            ordered.reverse()
        } else {
            ordered
        };
        ordered.then_with(|| (ka.1, ka.2).cmp(&(kb.1, kb.2)))
    });
    let (offset, limit) = (
        usize::try_from(search.offset).unwrap_or(usize::MAX),
        usize::try_from(search.limit).unwrap_or(0),
    );
    let more = all.len() > offset.saturating_add(limit);
    Ok((all.into_iter().skip(offset).take(limit).collect(), more))
}

fn compare(a: &Value, b: &Value) -> std::cmp::Ordering {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => a
            .as_i64()
            .unwrap_or_default()
            .cmp(&b.as_i64().unwrap_or_default()),
        _ => a
            .as_str()
            .unwrap_or_default()
            .cmp(b.as_str().unwrap_or_default()),
    }
}
