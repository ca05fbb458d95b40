//! A thread's state: latest, at a checkpoint, its history, and updates made outside a run.

mod python;
mod rust;

use axum::Json;
use axum::extract::{Path, State};
use mostrador_graph::{Checkpointer, Error as GraphError, Graph, StateSnapshot};
use mostrador_queue::{
    Error as QueueError, IdleThreadCheckpointer, PgCheckpointer, Thread, ThreadId, ThreadStatus,
    state::saver,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Caller;
use crate::authorize::{may_decide, may_write, visible_thread};
use crate::error::ApiError;
use crate::extract::{Body, Params};
use crate::openapi::fields;
use crate::wire;

pub use python::python_position;
use python::{is_python, python_state, python_states, python_update};
use rust::with_subgraphs;

fn graph_error(err: GraphError) -> ApiError {
    match err {
        GraphError::CheckpointNotFound => ApiError::not_found("Checkpoint not found"),
        GraphError::UnknownNode(node) => {
            ApiError::unprocessable(format!("as_node {node:?} is not a node of the graph"))
        }
        GraphError::InvalidUpdate { .. } | GraphError::InvalidInput(_) => {
            ApiError::unprocessable(err.to_string())
        }
        other => ApiError::failed(other),
    }
}

/// The thread's graph, or `None` for a thread no run has bound yet (its state is empty).
fn graph_of<'a>(state: &'a AppState, thread: &Thread) -> Option<&'a Graph> {
    thread
        .graph_id
        .as_deref()
        .and_then(|graph_id| state.graph(graph_id))
}

/// The latest values of a thread and the interrupts that wait for a resume, whichever engine runs
/// its graph.
#[derive(Debug)]
pub struct Latest {
    pub values: Map<String, Value>,
    /// `(task id, {"id", "value"})`.
    pub interrupts: Vec<(String, Value)>,
}

/// `None` while the thread has no checkpoint.
///
/// # Errors
///
/// The database failed.
pub async fn latest(
    state: &AppState,
    thread_id: ThreadId,
    graph_id: Option<&str>,
) -> Result<Option<Latest>, ApiError> {
    if graph_id.is_some_and(|graph_id| state.is_python(graph_id)) {
        let found = saver::snapshots(state.pool(), thread_id.0, None, None, 1, None)
            .await
            .map_err(ApiError::failed)?;
        return Ok(found.into_iter().next().map(|saved| {
            let snapshot = saved.snapshot.unwrap_or_default();
            let interrupts = snapshot["tasks"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|task| {
                    let task_id = task["id"].as_str().unwrap_or_default().to_owned();
                    task["interrupts"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(move |interrupt| (task_id.clone(), interrupt.clone()))
                })
                .collect();
            Latest {
                values: snapshot["values"].as_object().cloned().unwrap_or_default(),
                interrupts,
            }
        }));
    }
    let saved = PgCheckpointer::new(state.pool().clone())
        .get(thread_id.0, None)
        .await
        .map_err(ApiError::failed)?;
    Ok(saved.map(|saved| Latest {
        interrupts: saved
            .pending_interrupts()
            .into_iter()
            .map(|interrupt| {
                (
                    interrupt.task_id,
                    json!({"id": interrupt.id, "value": interrupt.value}),
                )
            })
            .collect(),
        values: saved.values,
    }))
}

/// A state as the `langgraph-sdk` reads it (`ThreadState`), of the thread's graph (namespace
/// `''`) or of a subgraph's task.
fn snapshot_answer(
    thread: &Thread,
    snapshot: &StateSnapshot,
    namespace: &str,
) -> wire::ThreadState {
    let checkpoint = |id: Option<Uuid>| {
        id.map(|checkpoint_id| wire::CheckpointRef {
            checkpoint_id,
            thread_id: thread.thread_id.0,
            checkpoint_ns: namespace.to_owned(),
        })
    };
    let interrupt = |i: &mostrador_graph::Interrupt| wire::Interrupt {
        id: i.id.clone(),
        value: i.value.clone(),
    };
    wire::ThreadState {
        values: snapshot.values.clone(),
        next: snapshot.next.clone(),
        tasks: snapshot
            .tasks
            .iter()
            .map(|task| wire::Task {
                id: task.id.clone(),
                name: task.name.clone(),
                path: Vec::new(),
                error: Value::Null,
                interrupts: task.interrupts.iter().map(interrupt).collect(),
                checkpoint: Value::Null,
                state: Value::Null,
                result: Value::Null,
            })
            .collect(),
        metadata: snapshot.metadata.clone(),
        created_at: snapshot.created_at,
        checkpoint: checkpoint(snapshot.checkpoint_id),
        parent_checkpoint: checkpoint(snapshot.parent_checkpoint_id),
        interrupts: snapshot.interrupts().map(interrupt).collect(),
        checkpoint_id: snapshot.checkpoint_id,
        parent_checkpoint_id: snapshot.parent_checkpoint_id,
    }
}

async fn snapshot(
    state: &AppState,
    thread: &Thread,
    checkpoint_id: Option<Uuid>,
) -> Result<StateSnapshot, ApiError> {
    let Some(graph) = graph_of(state, thread) else {
        return match checkpoint_id {
            Some(_) => Err(ApiError::not_found("Checkpoint not found")),
            None => Ok(StateSnapshot::empty()),
        };
    };
    graph
        .get_state(
            &PgCheckpointer::new(state.pool().clone()),
            thread.thread_id.0,
            checkpoint_id,
        )
        .await
        .map_err(graph_error)
}

/// The query of `GET /threads/{thread_id}/state[/{checkpoint_id}]`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(default)]
pub struct StateQuery {
    /// The states of waiting subgraphs in their tasks' `state` (Python graphs).
    #[param(value_type = Option<bool>, nullable = false)]
    subgraphs: Option<String>,
}

impl StateQuery {
    /// With the states of the subgraphs among the next tasks.
    fn subgraphs(&self) -> bool {
        matches!(self.subgraphs.as_deref(), Some("true" | "True"))
    }
}

/// `GET /threads/{thread_id}/state`.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    Params(query): Params<StateQuery>,
) -> Result<Json<Value>, ApiError> {
    let thread = visible_thread(&state, &caller, &thread_id).await?;
    state_json(&state, &thread, None, query.subgraphs())
        .await
        .map(Json)
}

/// A thread's state at a checkpoint (its latest for `None`), as `GET .../state` answers it.
///
/// # Errors
///
/// 404 for a checkpoint the thread does not have; 503 when the database failed.
pub(crate) async fn state_json(
    state: &AppState,
    thread: &Thread,
    checkpoint_id: Option<Uuid>,
    subgraphs: bool,
) -> Result<Value, ApiError> {
    if is_python(state, thread) {
        return python_state(state, thread, checkpoint_id, subgraphs).await;
    }
    let snapshot = snapshot(state, thread, checkpoint_id).await?;
    let mut answer = snapshot_answer(thread, &snapshot, "");
    if let Some(graph) = graph_of(state, thread) {
        with_subgraphs(state, thread, graph, &mut answer, "", subgraphs).await?;
    }
    serde_json::to_value(answer).map_err(ApiError::failed)
}

/// `GET /threads/{thread_id}/state/{checkpoint_id}`.
pub async fn get_at(
    State(state): State<AppState>,
    caller: Caller,
    Path((thread_id, checkpoint_id)): Path<(String, String)>,
    Params(query): Params<StateQuery>,
) -> Result<Json<Value>, ApiError> {
    let thread = visible_thread(&state, &caller, &thread_id).await?;
    let checkpoint_id =
        Uuid::parse_str(&checkpoint_id).map_err(|_| ApiError::not_found("Checkpoint not found"))?;
    state_json(&state, &thread, Some(checkpoint_id), query.subgraphs())
        .await
        .map(Json)
}

/// `GET /threads/{thread_id}/storage`: what the thread's checkpoints occupy, per table and per
/// channel, as officially (for one the caller may see).
pub async fn storage(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
) -> Result<Json<wire::ThreadStorage>, ApiError> {
    let thread = visible_thread(&state, &caller, &thread_id).await?;
    let storage = mostrador_queue::state::storage::of_thread(state.pool(), thread.thread_id.0)
        .await
        .map_err(ApiError::failed)?;
    Ok(Json(wire::ThreadStorage::of(thread.thread_id.0, &storage)))
}

/// `POST /threads/{thread_id}/history`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
#[schema(as = HistorySearch)]
pub struct History {
    #[schema(minimum = 1, maximum = 1000, default = 10)]
    limit: i64,
    /// A checkpoint id, or a checkpoint with one.
    #[schema(schema_with = before)]
    before: Option<Value>,
    /// Only checkpoints whose metadata contains this object.
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
    /// The thread's config, or one of its checkpoints by `checkpoint_id` (not a subgraph's).
    #[schema(value_type = Option<Object>)]
    checkpoint: Option<Value>,
    /// Which fields to answer with; all are answered.
    #[allow(
        dead_code,
        reason = "accepted as the client sends it; every field is answered"
    )]
    #[schema(value_type = Value)]
    select: Option<Value>,
}

impl Default for History {
    fn default() -> Self {
        Self {
            limit: 10,
            before: None,
            metadata: None,
            checkpoint: None,
            select: None,
        }
    }
}

/// The values of the thread's newest checkpoint whose metadata contains `metadata` (none when
/// no checkpoint has it), for a protocol served over the api's own calls (A2A).
pub(crate) async fn newest_values(
    state: &AppState,
    caller: &Caller,
    thread_id: &str,
    metadata: Value,
) -> Result<Option<Value>, ApiError> {
    let query = History {
        limit: 1,
        metadata: Some(metadata),
        ..History::default()
    };
    let mut states = history_of(state, caller, thread_id, query).await?;
    Ok(states.pop().map(|mut newest| newest["values"].take()))
}

pub async fn history(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    Body(query): Body<History>,
) -> Result<axum::response::Response, ApiError> {
    let states = history_of(&state, &caller, &thread_id, query).await?;
    history_page(&state, &states)
}

/// A history's states as one page, bounded as every page is.
fn history_page(state: &AppState, states: &[Value]) -> Result<axum::response::Response, ApiError> {
    let mut page = wire::Page::new(b"[", state.max_page_bytes());
    for found in states {
        page.push(found)?;
    }
    Ok(page.answer(b"]"))
}

/// `before` of a history search: a checkpoint id, or a checkpoint with one.
fn before() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
    crate::openapi::schema(json!({
        "anyOf": [
            {"type": "string", "format": "uuid"},
            {"type": "object", "properties": {"checkpoint_id": {"type": "string", "format": "uuid"}}},
            {"type": "null"},
        ],
    }))
}

/// `GET /threads/{thread_id}/history?limit=&before=`: the same, as the JS SDK's `useStream`
/// fetches it.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(default)]
pub struct HistoryQuery {
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000, default = 10, nullable = false)]
    limit: Option<String>,
    /// A checkpoint id.
    #[param(value_type = Option<String>, format = Uuid, nullable = false)]
    before: Option<String>,
}

pub async fn history_get(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    Params(query): Params<HistoryQuery>,
) -> Result<axum::response::Response, ApiError> {
    let limit = match query.limit.as_deref() {
        None | Some("") => History::default().limit,
        Some(limit) => limit
            .parse()
            .map_err(|_| ApiError::unprocessable("limit must be between 1 and 1000"))?,
    };
    let query = History {
        limit,
        before: query
            .before
            .filter(|before| !before.is_empty())
            .map(Value::String),
        ..History::default()
    };
    let states = history_of(&state, &caller, &thread_id, query).await?;
    history_page(&state, &states)
}

async fn history_of(
    state: &AppState,
    caller: &Caller,
    thread_id: &str,
    query: History,
) -> Result<Vec<Value>, ApiError> {
    let thread = visible_thread(state, caller, thread_id).await?;
    if !(1..=1000).contains(&query.limit) {
        return Err(ApiError::unprocessable("limit must be between 1 and 1000"));
    }
    // `metadata`: the checkpoints whose metadata contains it, as LangGraph's `list` filters.
    let metadata = match &query.metadata {
        None | Some(Value::Null) => None,
        Some(Value::Object(fields)) if fields.is_empty() => None,
        Some(metadata @ Value::Object(_)) => Some(metadata),
        Some(_) => return Err(ApiError::unprocessable("metadata must be an object")),
    };
    // `checkpoint`: the thread's config (RemoteGraph sends it so), or one checkpoint of it by
    // `checkpoint_id`; a subgraph's history (`checkpoint_ns`) is not served.
    let at = match &query.checkpoint {
        None | Some(Value::Null) => None,
        Some(Value::Object(fields)) => {
            if fields
                .get("checkpoint_ns")
                .and_then(Value::as_str)
                .is_some_and(|ns| !ns.is_empty())
            {
                return Err(ApiError::unprocessable(
                    "a subgraph's history (checkpoint_ns) is not served: ask for the thread's",
                ));
            }
            match fields.get("checkpoint_id") {
                None | Some(Value::Null) => None,
                Some(Value::String(id)) if id.is_empty() => None,
                Some(Value::String(id)) => Some(Uuid::parse_str(id).map_err(|_| {
                    ApiError::unprocessable("checkpoint.checkpoint_id must be a UUID")
                })?),
                Some(_) => {
                    return Err(ApiError::unprocessable(
                        "checkpoint.checkpoint_id must be a UUID",
                    ));
                }
            }
        }
        Some(_) => return Err(ApiError::unprocessable("checkpoint must be an object")),
    };
    let before = match &query.before {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id.as_str()),
        Some(Value::Object(checkpoint)) => checkpoint.get("checkpoint_id").and_then(Value::as_str),
        Some(_) => None,
    }
    .map(Uuid::parse_str)
    .transpose()
    .map_err(|_| ApiError::unprocessable("before must be a checkpoint id"))?;
    if is_python(state, &thread) {
        return python_states(state, &thread, at, before, query.limit, false, metadata).await;
    }
    let Some(graph) = graph_of(state, &thread) else {
        return Ok(Vec::new());
    };
    let limit = usize::try_from(query.limit).unwrap_or(10);
    let checkpointer = PgCheckpointer::new(state.pool().clone());
    let wanted = |snapshot: &StateSnapshot| {
        at.is_none_or(|id| snapshot.checkpoint_id == Some(id))
            && metadata.is_none_or(|wanted| contains(&snapshot.metadata, wanted))
    };
    let history = if at.is_none() && metadata.is_none() {
        graph
            .get_history(&checkpointer, thread.thread_id.0, limit, before)
            .await
            .map_err(graph_error)?
    } else {
        // Filtered: page through the history until the page is full or the history ends.
        let mut found = Vec::new();
        let mut below = before;
        loop {
            let page = graph
                .get_history(&checkpointer, thread.thread_id.0, 100, below)
                .await
                .map_err(graph_error)?;
            let last = page.last().and_then(|snapshot| snapshot.checkpoint_id);
            let ended = page.len() < 100;
            found.extend(page.into_iter().filter(|snapshot| wanted(snapshot)));
            if found.len() >= limit || ended || last.is_none() {
                break;
            }
            below = last;
        }
        found.truncate(limit);
        found
    };
    let mut answers = Vec::with_capacity(history.len());
    for snapshot in &history {
        let mut answer = snapshot_answer(&thread, snapshot, "");
        with_subgraphs(state, &thread, graph, &mut answer, "", false).await?;
        answers.push(serde_json::to_value(answer).map_err(ApiError::failed)?);
    }
    Ok(answers)
}

/// Whether JSON `value` contains `wanted` (objects key by key, the rest equal), as Postgres'
/// `@>` and LangGraph's metadata filter read it.
fn contains(value: &Value, wanted: &Value) -> bool {
    match (value, wanted) {
        (Value::Object(value), Value::Object(wanted)) => wanted
            .iter()
            .all(|(key, wanted)| value.get(key).is_some_and(|value| contains(value, wanted))),
        (value, wanted) => value == wanted,
    }
}

/// `POST /threads/{thread_id}/state/checkpoint`: the state at `checkpoint` (its
/// `checkpoint_id`), or the latest, as RemoteGraph reads it.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
#[schema(as = StateAtCheckpoint)]
pub struct AtCheckpoint {
    /// Which state: the latest without a `checkpoint_id`.
    #[schema(schema_with = fields::checkpoint)]
    checkpoint: Option<Value>,
    subgraphs: Option<bool>,
}

pub async fn post_at(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    Body(body): Body<AtCheckpoint>,
) -> Result<Json<Value>, ApiError> {
    let thread = visible_thread(&state, &caller, &thread_id).await?;
    let checkpoint = body.checkpoint.unwrap_or(Value::Null);
    if !checkpoint.is_null() && !checkpoint.is_object() {
        return Err(ApiError::unprocessable("checkpoint must be an object"));
    }
    if checkpoint["checkpoint_ns"]
        .as_str()
        .is_some_and(|ns| !ns.is_empty())
    {
        return Err(ApiError::unprocessable(
            "a subgraph's state is read with its parent's (subgraphs: true)",
        ));
    }
    let checkpoint_id = match &checkpoint["checkpoint_id"] {
        Value::Null => None,
        Value::String(id) => {
            Some(Uuid::parse_str(id).map_err(|_| ApiError::not_found("Checkpoint not found"))?)
        }
        _ => return Err(ApiError::unprocessable("checkpoint_id must be a string")),
    };
    state_json(
        &state,
        &thread,
        checkpoint_id,
        body.subgraphs.unwrap_or(false),
    )
    .await
    .map(Json)
}

/// `POST /threads/{thread_id}/state`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
#[schema(as = StateUpdate)]
pub struct Update {
    #[schema(value_type = Option<Object>)]
    values: Option<Value>,
    as_node: Option<String>,
    /// Update from this checkpoint (Python graphs; 422 for the others).
    #[schema(schema_with = fields::nullable_uuid)]
    checkpoint_id: Option<Value>,
    /// The same, as RemoteGraph sends it (the latest without an id).
    #[schema(schema_with = fields::checkpoint)]
    checkpoint: Option<Value>,
}

impl Update {
    /// No values, as `node` wrote them: `__end__` ends what the thread waited for.
    pub(crate) fn as_node(node: &str) -> Self {
        Self {
            as_node: Some(node.to_owned()),
            ..Self::default()
        }
    }
}

/// Whether a change names the thread's latest checkpoint, or none (the latest): a decider answers
/// a thread where it waits, and only its owner changes it from a past checkpoint (which would
/// rewrite its history).
pub(crate) fn from_latest(named: Option<Uuid>, latest: Option<Uuid>) -> bool {
    named.is_none() || named == latest
}

pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    Body(update): Body<Update>,
) -> Result<Json<Updated>, ApiError> {
    let thread = crate::authorize::thread_for(&state, &caller, &thread_id, "update").await?;
    // The checkpoint to update from: `checkpoint_id`, or `checkpoint` (RemoteGraph sends the
    // thread's config, without one for the latest).
    let checkpoint = update.checkpoint.clone().unwrap_or(Value::Null);
    if checkpoint["checkpoint_ns"]
        .as_str()
        .is_some_and(|ns| !ns.is_empty())
    {
        return Err(ApiError::unprocessable(
            "a subgraph's state is updated through its parent's",
        ));
    }
    let checkpoint_id = match (update.checkpoint_id.as_ref(), &checkpoint["checkpoint_id"]) {
        (Some(Value::String(id)), _) | (None | Some(Value::Null), Value::String(id)) => {
            Some(Uuid::parse_str(id).map_err(|_| ApiError::not_found("Checkpoint not found"))?)
        }
        (None | Some(Value::Null), Value::Null) => None,
        _ => return Err(ApiError::unprocessable("checkpoint_id must be a string")),
    };
    if is_python(&state, &thread) {
        let (latest, waits) = python_position(&state, &thread, None).await?;
        if waits && from_latest(checkpoint_id, latest) {
            may_decide(&state, &caller, &thread, "")?;
        } else {
            may_write(&caller, &thread)?;
        }
        return python_update(
            &state,
            &caller,
            &thread,
            update.values,
            update.as_node,
            checkpoint_id,
        )
        .await
        .map(Json);
    }
    let Some(graph) = graph_of(&state, &thread) else {
        // As the official server answers (400): without a run, no graph's reducers apply.
        return Err(ApiError::bad_request(format!(
            "Thread '{}' has no assigned graph ID. This usually occurs when no runs have been \
                 made on this particular thread. This operation requires a graph ID: make a run \
                 on the thread first.",
            thread.thread_id
        )));
    };
    // Changing the state of a thread that waits for an answer is answering: the graph's rule.
    let latest = snapshot(&state, &thread, None).await?;
    let waiting = latest.interrupts().next().is_some();
    if waiting && from_latest(checkpoint_id, latest.checkpoint_id) {
        may_decide(&state, &caller, &thread, "")?;
    } else {
        may_write(&caller, &thread)?;
    }
    let in_flight = || {
        ApiError::conflict("the thread has a run in flight: update its state when the run is over")
    };
    if thread.status == ThreadStatus::Busy {
        return Err(in_flight());
    }
    let values = update.values.unwrap_or(Value::Null);
    let values = if values.is_null() { json!({}) } else { values };
    // Written only while the thread has no run in flight and has not changed since the update
    // read it, checked in the write's transaction (a run enqueued meanwhile waits, or is seen).
    let checkpoint_id = graph
        .update_state(
            &IdleThreadCheckpointer::new(state.pool().clone()),
            thread.thread_id.0,
            values,
            update.as_node.as_deref(),
            checkpoint_id,
        )
        .await
        .map_err(|err| match &err {
            GraphError::Checkpointer(source)
                if matches!(
                    source.downcast_ref::<QueueError>(),
                    Some(QueueError::ThreadBusy(_))
                ) =>
            {
                in_flight()
            }
            _ => graph_error(err),
        })?;
    Ok(Json(Updated::at(json!({
        "thread_id": thread.thread_id.0,
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id,
    }))))
}

/// The answer of `POST /threads/{thread_id}/state`: the checkpoint the update wrote.
#[derive(Debug, Serialize, ToSchema)]
pub struct Updated {
    #[schema(value_type = Object)]
    checkpoint: Value,
    /// The same, as RemoteGraph reads it.
    #[schema(value_type = Object)]
    configurable: Value,
    #[schema(value_type = String, format = Uuid)]
    checkpoint_id: Value,
}

impl Updated {
    /// The answer for `checkpoint` (`thread_id`, `checkpoint_ns`, `checkpoint_id`).
    fn at(checkpoint: Value) -> Self {
        Self {
            configurable: checkpoint.clone(),
            checkpoint_id: checkpoint["checkpoint_id"].clone(),
            checkpoint,
        }
    }
}
