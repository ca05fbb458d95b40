//! Threads: the server chooses their ids, and a caller sees only its own (and those of its tenant
//! the policy lets its roles read). Every route with a thread id goes through [`visible_thread`].

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use mostrador_graph::Checkpointer;
use mostrador_queue::thread::{self, NewThread, ThreadSearch, ThreadSort, ThreadSortKey, Ttl};
use mostrador_queue::{Error as QueueError, PgCheckpointer, Thread, ThreadId, ThreadStatus};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::app::AppState;
use crate::assistants::Assistant;
use crate::auth::Caller;
use crate::authorize::{
    grant, visible_thread, visible_thread_granted, writable_thread, writable_thread_for,
};
use crate::custom_auth::event::{ThreadCopy, ThreadsCreate, ThreadsSearch, ThreadsUpdate};
use crate::error::ApiError;
use crate::extract::Body;
use crate::openapi::fields;
use crate::wire;

/// `POST /threads`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
#[schema(as = ThreadCreate)]
pub struct Create {
    /// The client's choice of id; the server chooses one when absent. An id a thread has
    /// already, whoever's, is a 409.
    #[schema(schema_with = fields::nullable_uuid)]
    thread_id: Option<Value>,
    /// `graph_id` binds the thread to that graph (404 when there is none).
    #[schema(value_type = Option<Object>)]
    metadata: Option<Map<String, Value>>,
    #[schema(schema_with = fields::if_exists)]
    if_exists: Option<String>,
    #[schema(schema_with = fields::unsupported)]
    supersteps: Option<Value>,
    /// Once idle this many minutes, the thread is deleted (`strategy` `delete`, the default) or
    /// keeps only its latest checkpoint (`keep_latest`).
    #[schema(schema_with = thread_ttl)]
    ttl: Option<Value>,
}

fn thread_ttl() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
    crate::openapi::schema(json!({
        "anyOf": [
            {"type": "number", "exclusiveMinimum": 0},
            {
                "type": "object",
                "properties": {
                    "ttl": {"type": "number", "exclusiveMinimum": 0},
                    "strategy": {"type": "string", "enum": ["delete", "keep_latest"]},
                },
            },
            {"type": "null"},
        ],
    }))
}

/// A `ttl` as the SDKs send it: minutes, or `{ttl, strategy}`; `None` when absent (or null).
fn ttl(given: Option<&Value>) -> Result<Option<Ttl>, ApiError> {
    let invalid = || {
        ApiError::unprocessable(format!(
            "ttl must be a number of minutes above 0 (at most {}), or {{ttl, strategy}} with \
             strategy delete or keep_latest",
            Ttl::MAX_MINUTES
        ))
    };
    let (minutes, strategy) = match given {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(minutes)) => (minutes.as_f64(), &Value::Null),
        Some(Value::Object(fields)) => (
            fields.get("ttl").and_then(Value::as_f64),
            fields.get("strategy").unwrap_or(&Value::Null),
        ),
        Some(_) => return Err(invalid()),
    };
    let strategy = match strategy {
        Value::Null => None,
        Value::String(strategy) => Some(strategy.as_str()),
        _ => return Err(invalid()),
    };
    minutes
        .and_then(|minutes| Ttl::new(minutes, strategy))
        .map(Some)
        .ok_or_else(invalid)
}

pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Body(create): Body<Create>,
) -> Result<Json<wire::Thread>, ApiError> {
    let chosen = match &create.thread_id {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(
            Uuid::parse_str(id).map_err(|_| ApiError::unprocessable("thread_id must be a UUID"))?,
        ),
        Some(_) => return Err(ApiError::unprocessable("thread_id must be a UUID")),
    };
    if create.supersteps.is_some() {
        return Err(ApiError::unprocessable(
            "creating a thread with supersteps is not supported",
        ));
    }
    let ttl = ttl(create.ttl.as_ref())?.or(state.default_thread_ttl());
    if create
        .if_exists
        .as_deref()
        .is_some_and(|value| value != "raise" && value != "do_nothing")
    {
        return Err(ApiError::unprocessable(
            "if_exists must be raise or do_nothing",
        ));
    }
    // The project's handler may stamp the metadata (an owner, say), as officially.
    let grant = grant(
        &state,
        &caller,
        &ThreadsCreate {
            thread_id: chosen,
            metadata: create.metadata.clone().unwrap_or_default(),
            if_exists: create.if_exists.as_deref(),
        },
    )
    .await?;
    let metadata = granted_metadata(grant.value, create.metadata)?;
    let graph_id = match metadata.get("graph_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(graph_id)) if state.serves(graph_id) => Some(graph_id.clone()),
        Some(Value::String(graph_id)) => {
            return Err(ApiError::not_found(format!("graph {graph_id:?} not found")));
        }
        Some(_) => {
            return Err(ApiError::unprocessable(
                "metadata.graph_id must be a string",
            ));
        }
    };
    let new = NewThread {
        graph_id,
        owner: caller.subject.clone(),
        tenant: caller.tenant.clone(),
        metadata: Value::Object(metadata),
        temporary: false,
        ttl,
        quota: state.thread_quota(),
    };
    // A thread this request created had no state when it was created: nothing to read.
    let Some(thread_id) = chosen else {
        let thread = thread::create(state.pool(), &new)
            .await
            .map_err(crate::runs::queue_error)?;
        return Ok(Json(thread_without_state(&thread)));
    };
    if let Some(thread) = thread::create_with_id(state.pool(), thread_id, &new)
        .await
        .map_err(crate::runs::queue_error)?
    {
        return Ok(Json(thread_without_state(&thread)));
    }
    // Taken. `do_nothing` answers the caller's own thread as it is; whoever else's it is, the
    // answer is the same conflict, which says nothing but "taken".
    if create.if_exists.as_deref() == Some("do_nothing") {
        match visible_thread(&state, &caller, &thread_id.to_string()).await {
            Ok(thread) => return Ok(Json(thread_answer(&state, &thread).await?)),
            Err(err) if err.status == StatusCode::SERVICE_UNAVAILABLE => return Err(err),
            Err(_) => {}
        }
    }
    Err(thread_taken())
}

/// The metadata a project's handler left in its `value` (its `metadata`), else `sent`.
///
/// # Errors
///
/// A 500 for a handler that left metadata that is not an object.
pub(crate) fn granted_metadata(
    mut value: Value,
    sent: Option<Map<String, Value>>,
) -> Result<Map<String, Value>, ApiError> {
    match value.get_mut("metadata").map(Value::take) {
        None => Ok(sent.unwrap_or_default()),
        Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(metadata)) => Ok(metadata),
        Some(other) => Err(ApiError::failed(format!(
            "the project's auth handler left metadata that is not an object: {other:.100}"
        ))),
    }
}

/// The one answer for a client-chosen thread id that a thread has already.
pub fn thread_taken() -> ApiError {
    ApiError::conflict("Thread already exists")
}

/// `GET /threads/{thread_id}`.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
) -> Result<Json<wire::Thread>, ApiError> {
    let thread = visible_thread(&state, &caller, &thread_id).await?;
    Ok(Json(thread_answer(&state, &thread).await?))
}

/// `DELETE /threads/{thread_id}`: 204.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let thread = writable_thread_for(&state, &caller, &thread_id, "delete").await?;
    match thread::delete(state.pool(), thread.thread_id).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(QueueError::ThreadNotFound(_)) => Err(ApiError::thread_not_found()),
        Err(err) => Err(ApiError::failed(err)),
    }
}

/// `POST /threads/search` and `/count`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = ThreadSearch)]
pub struct Search {
    #[schema(minimum = 1, maximum = 1000, default = 10)]
    limit: i64,
    #[schema(minimum = 0, default = 0)]
    offset: i64,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Map<String, Value>>,
    /// Threads whose latest state's values contain this object (as `metadata`, Postgres's `@>`).
    #[schema(value_type = Option<Object>)]
    values: Option<Map<String, Value>>,
    #[schema(value_type = Option<Vec<String>>, format = Uuid)]
    ids: Option<Vec<String>>,
    #[schema(schema_with = fields::thread_status)]
    status: Option<String>,
    #[schema(schema_with = fields::thread_sort_by)]
    sort_by: Option<String>,
    #[schema(schema_with = fields::sort_order)]
    sort_order: Option<String>,
    /// The fields of each thread to answer (a search only; all when absent).
    #[schema(schema_with = thread_fields)]
    select: Option<Vec<String>>,
    /// Values to answer under `extracted`, by alias: a path into a thread's `values`,
    /// `metadata`, `config` or `interrupts` (`values.messages[-1].content`); a search only.
    #[schema(value_type = Option<Object>)]
    extract: Option<Map<String, Value>>,
}

impl Default for Search {
    fn default() -> Self {
        Self {
            limit: 10,
            offset: 0,
            metadata: None,
            values: None,
            ids: None,
            status: None,
            sort_by: None,
            sort_order: None,
            select: None,
            extract: None,
        }
    }
}

fn thread_fields() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
    fields::names_or_null(&THREAD_FIELDS)
}

/// The fields of a thread a search may select.
const THREAD_FIELDS: [&str; 10] = [
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "metadata",
    "status",
    "config",
    "values",
    "interrupts",
    "error",
];

///
/// The page is written as it is read, thread by thread, and holds at most
/// [`AppState::max_page_bytes`]: past it the answer is a 413 saying so (a smaller `limit`, or a
/// `select` without `values`, fits), never a page cut short. Threads' states are read only when
/// `values` or `interrupts` are selected.
pub async fn search(
    State(state): State<AppState>,
    caller: Caller,
    Body(mut search): Body<Search>,
) -> Result<axum::response::Response, ApiError> {
    let select = search.select.clone();
    if let Some(unknown) = select
        .iter()
        .flatten()
        .find(|field| !THREAD_FIELDS.contains(&field.as_str()))
    {
        return Err(ApiError::unprocessable(format!(
            "select: {unknown:?} is not a field of a thread"
        )));
    }
    let extract = extracts(search.extract.take())?;
    let offset = search.offset;
    let query = thread_search(&state, &caller, search).await?;
    let (threads, more) = match thread::search_page(state.pool(), &query).await {
        Ok(page) => page,
        Err(QueueError::Invalid { reason, .. }) => return Err(ApiError::unprocessable(reason)),
        Err(err) => return Err(ApiError::failed(err)),
    };
    let with_state = select.as_ref().is_none_or(|select| {
        select
            .iter()
            .any(|field| field == "values" || field == "interrupts")
    }) || extract
        .iter()
        .any(|(_, path)| path.starts_with("values") || path.starts_with("interrupts"));
    let mut page = wire::Page::new(b"[", state.max_page_bytes());
    for thread in &threads {
        let answer = if with_state {
            thread_answer(&state, thread).await?
        } else {
            thread_without_state(thread)
        };
        let mut json = serde_json::to_value(answer).map_err(ApiError::failed)?;
        let extracted: Map<String, Value> = extract
            .iter()
            .map(|(alias, path)| (alias.clone(), extracted(&json, path)))
            .collect();
        if let (Some(select), Value::Object(fields)) = (&select, &mut json) {
            fields.retain(|field, _| select.contains(field));
        }
        if !extract.is_empty()
            && let Value::Object(fields) = &mut json
        {
            fields.insert("extracted".into(), Value::Object(extracted));
        }
        page.push(&json)?;
    }
    let mut answer = page.answer(b"]");
    answer
        .headers_mut()
        .extend(wire::pagination(offset, threads.len(), more));
    Ok(answer)
}

/// The roots an `extract` path may start from, as officially.
const EXTRACTABLE: [&str; 4] = ["values", "metadata", "config", "interrupts"];

/// A search's `extract`, checked as the official server checks it: at most ten aliases, each an
/// identifier that is no field of a thread, each path a non-empty string from an extractable
/// field.
fn extracts(extract: Option<Map<String, Value>>) -> Result<Vec<(String, String)>, ApiError> {
    let Some(extract) = extract else {
        return Ok(Vec::new());
    };
    if extract.len() > 10 {
        return Err(ApiError::unprocessable(format!(
            "Maximum of 10 extract paths allowed, got {}",
            extract.len()
        )));
    }
    extract
        .into_iter()
        .map(|(alias, path)| {
            let identifier = alias.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && alias.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !identifier || THREAD_FIELDS.contains(&alias.as_str()) {
                return Err(ApiError::unprocessable(format!(
                    "Extract key '{alias}' must be an identifier that is not a field of a thread"
                )));
            }
            let Value::String(path) = path else {
                return Err(ApiError::unprocessable(format!(
                    "Extract path for '{alias}' must be a non-empty string"
                )));
            };
            let root = path.split(['.', '[']).next().unwrap_or_default();
            if !EXTRACTABLE.contains(&root) {
                return Err(ApiError::unprocessable(format!(
                    "Extract path '{path}' must start with one of: config, interrupts, metadata, values"
                )));
            }
            Ok((alias, path))
        })
        .collect()
}

/// The value at `path` (`values.messages[-1].content`: keys after dots, indexes in brackets,
/// negative from the end) in a thread's answer; null where it leads nowhere.
fn extracted(thread: &Value, path: &str) -> Value {
    let mut current = thread;
    for part in path.split(['.', '[']).filter(|part| !part.is_empty()) {
        let next = match part.strip_suffix(']') {
            Some(index) => index.parse::<i64>().ok().and_then(|index| {
                let items = current.as_array()?;
                let at = if index < 0 {
                    i64::try_from(items.len()).ok()? + index
                } else {
                    index
                };
                items.get(usize::try_from(at).ok()?)
            }),
            None if part.starts_with('_') => None,
            None => current.get(part),
        };
        match next {
            Some(value) => current = value,
            None => return Value::Null,
        }
    }
    current.clone()
}

/// `POST /threads/count`: how many threads a search with the same filters finds.
pub async fn count(
    State(state): State<AppState>,
    caller: Caller,
    Body(search): Body<Search>,
) -> Result<Json<i64>, ApiError> {
    let query = thread_search(&state, &caller, search).await?;
    match thread::count(state.pool(), &query).await {
        Ok(count) => Ok(Json(count)),
        Err(QueueError::Invalid { reason, .. }) => Err(ApiError::unprocessable(reason)),
        Err(err) => Err(ApiError::failed(err)),
    }
}

/// A search's filters and order, validated, among the caller's visible threads (those the
/// project's search handler's filter lets through, under `auth.path`).
/// The caller's threads, newest first, at most `limit` (as a search with no filter finds them),
/// for a protocol served over the api's own calls (A2A).
pub(crate) async fn visible(
    state: &AppState,
    caller: &Caller,
    limit: i64,
) -> Result<Vec<Thread>, ApiError> {
    let search = Search {
        limit,
        ..Search::default()
    };
    let query = thread_search(state, caller, search).await?;
    let (threads, _) = thread::search_page(state.pool(), &query)
        .await
        .map_err(ApiError::failed)?;
    Ok(threads)
}

async fn thread_search(
    state: &AppState,
    caller: &Caller,
    search: Search,
) -> Result<ThreadSearch, ApiError> {
    let by = match search.sort_by.as_deref() {
        None => ThreadSortKey::CreatedAt,
        Some(name) => ThreadSortKey::from_name(name).ok_or_else(|| {
            ApiError::unprocessable(
                "sort_by must be thread_id, status, created_at, updated_at or state_updated_at",
            )
        })?,
    };
    let ascending = match search.sort_order.as_deref() {
        None | Some("desc") => false,
        Some("asc") => true,
        Some(_) => return Err(ApiError::unprocessable("sort_order must be asc or desc")),
    };
    let status = match search.status.as_deref() {
        None => None,
        Some(name) => Some(ThreadStatus::from_name(name).ok_or_else(|| {
            ApiError::unprocessable("status must be idle, busy, interrupted or error")
        })?),
    };
    let ids = match search.ids {
        None => None,
        Some(ids) => Some(
            ids.iter()
                .map(|id| Uuid::parse_str(id).map(ThreadId))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| ApiError::unprocessable("ids must be thread ids (UUIDs)"))?,
        ),
    };
    let mut visible_to = state.visibility(caller);
    if state.custom_auth().is_some() {
        let grant = grant(
            state,
            caller,
            &ThreadsSearch {
                metadata: search.metadata.clone().unwrap_or_default(),
                values: search.values.as_ref(),
                status: search.status.as_deref(),
                limit: search.limit,
                offset: search.offset,
            },
        )
        .await?;
        visible_to.auth_filter = grant.filter_json();
    }
    Ok(ThreadSearch {
        visible_to,
        metadata: search.metadata.map(Value::Object),
        values: search.values.map(Value::Object),
        status,
        ids,
        limit: search.limit,
        offset: search.offset,
        sort: ThreadSort { by, ascending },
    })
}

/// A thread as the `langgraph-sdk` reads it, with the values and pending interrupts of its
/// latest checkpoint.
async fn thread_answer(state: &AppState, thread: &Thread) -> Result<wire::Thread, ApiError> {
    let latest = crate::state::latest(state, thread.thread_id, thread.graph_id.as_deref()).await?;
    let mut answer = thread_without_state(thread);
    if let Some(latest) = latest {
        // By task id, as the client reads them.
        for (task_id, interrupt) in latest.interrupts {
            answer
                .interrupts
                .entry(task_id)
                .or_default()
                .push(interrupt);
        }
        answer.values = Some(latest.values);
    }
    Ok(answer)
}

/// A thread as the client reads it, but its state: `values` null, `interrupts` empty.
fn thread_without_state(thread: &Thread) -> wire::Thread {
    let mut metadata = thread.metadata.clone();
    if let (Some(graph_id), Value::Object(map)) = (&thread.graph_id, &mut metadata)
        && !map.contains_key("graph_id")
    {
        // A run's binding stores these (`run::enqueue`); threads bound otherwise (stateless
        // runs' threads, threads bound before it did) show them the same way: the graph and its
        // own assistant, the only kind there is.
        map.insert("graph_id".into(), json!(graph_id));
        map.entry("assistant_id")
            .or_insert_with(|| json!(Assistant::for_graph(graph_id).assistant_id));
    }
    wire::Thread {
        thread_id: thread.thread_id.0,
        created_at: thread.created_at,
        updated_at: thread.updated_at,
        state_updated_at: thread.state_updated_at,
        metadata,
        status: thread.status.as_str(),
        config: Map::new(),
        values: None,
        interrupts: BTreeMap::new(),
        error: (),
    }
}

/// `PATCH /threads/{thread_id}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
#[schema(as = ThreadPatch)]
pub struct Patch {
    /// Merged into the thread's; `graph_id` may not change.
    #[schema(value_type = Object)]
    metadata: Option<Map<String, Value>>,
    /// A new time to live (as on create).
    #[schema(schema_with = thread_ttl)]
    ttl: Option<Value>,
}

/// Merges metadata into the thread; 204 with `Prefer: return=minimal`, else the thread.
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    headers: axum::http::HeaderMap,
    Body(patch): Body<Patch>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let new_ttl = ttl(patch.ttl.as_ref())?;
    if patch.metadata.is_none() && patch.ttl.is_none() {
        return Err(ApiError::unprocessable("metadata or ttl is required"));
    }
    let (thread, metadata) = match state.custom_auth() {
        // The project's handler sees the metadata, and may stamp it, as officially.
        Some(_) => {
            let grant = grant(
                &state,
                &caller,
                &ThreadsUpdate {
                    thread_id: &thread_id,
                    metadata: patch.metadata.clone().unwrap_or_default(),
                },
            )
            .await?;
            let thread = visible_thread_granted(&state, &thread_id, &grant).await?;
            (thread, granted_metadata(grant.value, patch.metadata)?)
        }
        None => (
            writable_thread(&state, &caller, &thread_id).await?,
            patch.metadata.unwrap_or_default(),
        ),
    };
    if let Some(ttl) = new_ttl {
        thread::set_ttl(state.pool(), thread.thread_id, Some(ttl))
            .await
            .map_err(crate::runs::queue_error)?;
    }
    if metadata.contains_key("graph_id") {
        return Err(ApiError::unprocessable(
            "graph_id is the thread's graph: it cannot be changed",
        ));
    }
    thread::update_metadata(state.pool(), thread.thread_id, &Value::Object(metadata))
        .await
        .map_err(crate::runs::queue_error)?;
    let minimal = headers
        .get("prefer")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.contains("return=minimal"));
    if minimal {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let thread = thread::get(state.pool(), thread.thread_id)
        .await
        .map_err(ApiError::failed)?;
    Ok(Json(thread_answer(&state, &thread).await?).into_response())
}

/// `POST /threads/prune`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
#[schema(as = ThreadPrune)]
pub struct Prune {
    /// Ids of threads the caller may not see are passed over.
    #[schema(max_items = 1000)]
    thread_ids: Vec<String>,
    #[schema(schema_with = fields::prune_strategy)]
    strategy: Option<String>,
}

/// The answer of `POST /threads/prune`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Pruned {
    pruned_count: u64,
}

/// Deletes the threads (`delete`, the default) or keeps only their latest checkpoint
/// (`keep_latest`). Ids of threads the caller does not own are passed over, as if unknown.
pub async fn prune(
    State(state): State<AppState>,
    caller: Caller,
    Body(prune): Body<Prune>,
) -> Result<Json<Pruned>, ApiError> {
    let keep_latest = match prune.strategy.as_deref() {
        None | Some("delete") => false,
        Some("keep_latest") => true,
        Some(_) => {
            return Err(ApiError::unprocessable(
                "strategy must be delete or keep_latest",
            ));
        }
    };
    if prune.thread_ids.len() > 1000 {
        return Err(ApiError::unprocessable("at most 1000 threads per call"));
    }
    let checkpointer = PgCheckpointer::new(state.pool().clone());
    let mut pruned = 0;
    for id in &prune.thread_ids {
        let thread = match writable_thread_for(&state, &caller, id, "delete").await {
            Ok(thread) => thread,
            Err(err) if [StatusCode::NOT_FOUND, StatusCode::FORBIDDEN].contains(&err.status) => {
                continue;
            }
            Err(err) => return Err(err),
        };
        if keep_latest {
            checkpointer
                .prune(thread.thread_id.0, 1)
                .await
                .map_err(ApiError::failed)?;
        } else {
            match thread::delete(state.pool(), thread.thread_id).await {
                Ok(()) | Err(QueueError::ThreadNotFound(_)) => {}
                Err(err) => return Err(ApiError::failed(err)),
            }
        }
        pruned += 1;
    }
    Ok(Json(Pruned {
        pruned_count: pruned,
    }))
}

/// `POST /threads/{thread_id}/copy`: a new thread of the caller's with the same state.
pub async fn copy(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
) -> Result<Json<wire::Thread>, ApiError> {
    let original = visible_thread(&state, &caller, &thread_id).await?;
    // The copy is a thread the caller creates, as officially.
    grant(&state, &caller, &ThreadCopy { thread_id: None }).await?;
    // One transaction: a copy is whole or is not.
    let mut tx = state.pool().begin().await.map_err(ApiError::failed)?;
    let copy = thread::create(
        &mut *tx,
        &NewThread {
            graph_id: original.graph_id.clone(),
            owner: caller.subject.clone(),
            tenant: caller.tenant.clone(),
            metadata: original.metadata.clone(),
            temporary: false,
            ttl: state.default_thread_ttl(),
            quota: state.thread_quota(),
        },
    )
    .await
    .map_err(crate::runs::queue_error)?;
    mostrador_queue::state::checkpoint::copy_thread(
        &mut *tx,
        original.thread_id.0,
        copy.thread_id.0,
    )
    .await
    .map_err(ApiError::failed)?;
    // A thread's files are its owner's alone (a reader of the thread reads none, whatever a
    // policy or a project's handlers let them read): a reader's copy takes its state, not its
    // files.
    if original.owner == caller.subject {
        mostrador_queue::state::files::copy(&mut *tx, original.thread_id.0, copy.thread_id.0)
            .await
            .map_err(ApiError::failed)?;
    }
    tx.commit().await.map_err(ApiError::failed)?;
    Ok(Json(thread_answer(&state, &copy).await?))
}
