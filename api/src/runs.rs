//! Runs on a thread: create (in the background, streaming its events, or waiting for its end),
//! get, list, join, join its stream, cancel. The api never executes a graph: it validates,
//! authorizes the thread, and enqueues; workers do the rest.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mostrador_graph::checkpoint::INTERRUPT;
use mostrador_graph::{Checkpointer, StreamMode};
use mostrador_queue::event::EventFollower;
use mostrador_queue::run::{self, MultitaskStrategy, NewRun};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{
    CancelAction, Error as QueueError, PgCheckpointer, Run, RunId, RunStatus, Thread, ThreadId,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::app::AppState;
use crate::assistants::Assistant;
use crate::auth::{Caller, Role};
use crate::authorize::{unavailable, visible_thread};
use crate::error::ApiError;
use crate::extract::Body;
use crate::stream;

fn unprocessable(detail: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
}

/// A stream mode as clients name it: one name or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum StreamModes {
    One(String),
    Many(Vec<String>),
}

impl StreamModes {
    /// The engine's modes. `messages-tuple` is the engine's `messages`.
    fn parse(&self) -> Result<Vec<StreamMode>, ApiError> {
        let names: Vec<&str> = match self {
            StreamModes::One(name) => vec![name.as_str()],
            StreamModes::Many(names) => names.iter().map(String::as_str).collect(),
        };
        let mut modes = Vec::new();
        for name in names {
            let mode = match name {
                "messages-tuple" => StreamMode::Messages,
                other => StreamMode::from_name(other).ok_or_else(|| {
                    unprocessable(format!(
                        "stream_mode {other:?} is not supported: use values, updates, messages, \
                         messages-tuple, custom, tasks, checkpoints or debug"
                    ))
                })?,
            };
            if !modes.contains(&mode) {
                modes.push(mode);
            }
        }
        Ok(modes)
    }
}

/// The command of a run: only `resume` is supported.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RunCommand {
    resume: Option<Value>,
    goto: Option<Value>,
    update: Option<Value>,
}

/// The body of `POST /threads/{thread_id}/runs` (and of its `stream` and `wait` forms).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CreateRun {
    assistant_id: Option<String>,
    input: Option<Value>,
    command: Option<RunCommand>,
    stream_mode: Option<StreamModes>,
    stream_subgraphs: Option<bool>,
    metadata: Option<Map<String, Value>>,
    config: Option<Value>,
    context: Option<Map<String, Value>>,
    checkpoint: Option<Value>,
    checkpoint_id: Option<Value>,
    interrupt_before: Option<Value>,
    interrupt_after: Option<Value>,
    webhook: Option<Value>,
    multitask_strategy: Option<String>,
    if_not_exists: Option<String>,
    on_completion: Option<String>,
    after_seconds: Option<f64>,
    durability: Option<String>,
}

/// A validated run request.
#[derive(Debug)]
pub struct Accepted {
    pub thread: Thread,
    pub assistant: Assistant,
    pub run: Run,
}

/// Validates, authorizes and enqueues a run on a thread.
///
/// # Errors
///
/// 404 for a thread the caller may not see or an unknown assistant, 422 for what the body asks
/// that cannot be done, 403 for a resume by someone who may not decide, 409 for a resume of a
/// thread that waits for nothing or a conflicting run, 503 over the graph's queue limit.
pub async fn accept(
    state: &AppState,
    caller: &Caller,
    thread_id: &str,
    body: CreateRun,
) -> Result<Accepted, ApiError> {
    let thread = visible_thread(state.pool(), caller, thread_id).await?;
    let assistant_id = body
        .assistant_id
        .as_deref()
        .ok_or_else(|| unprocessable("assistant_id is required"))?;
    let assistant = state.assistant(assistant_id).cloned().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("assistant {assistant_id:?} not found"),
        )
    })?;
    let new = new_run(thread.thread_id, &assistant, body)?;
    if let Some(command) = &new.command {
        authorize_resume(state, caller, &thread, command).await?;
    }
    match run::enqueue(state.pool(), &new, Some(state.queue_limit())).await {
        Ok(enqueued) => {
            state.metrics().runs_created.inc();
            Ok(Accepted {
                thread,
                assistant,
                run: enqueued.run,
            })
        }
        Err(err) => {
            if matches!(err, QueueError::Backpressure { .. }) {
                state.metrics().backpressure_rejections.inc();
            }
            Err(queue_error(err))
        }
    }
}

fn resolve_assistant<'a>(state: &'a AppState, body: &CreateRun) -> Result<&'a Assistant, ApiError> {
    let assistant_id = body
        .assistant_id
        .as_deref()
        .ok_or_else(|| unprocessable("assistant_id is required"))?;
    state.assistant(assistant_id).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("assistant {assistant_id:?} not found"),
        )
    })
}

/// Whether a stateless run's thread goes when the run ends (`on_completion`, `delete` by default).
fn delete_on_completion(body: &CreateRun) -> Result<bool, ApiError> {
    match body.on_completion.as_deref() {
        None | Some("delete") => Ok(true),
        Some("keep") => Ok(false),
        Some(_) => Err(unprocessable("on_completion must be delete or keep")),
    }
}

/// Validates and enqueues stateless runs, each on a new thread of the caller bound to its graph,
/// all or nothing.
async fn accept_stateless(
    state: &AppState,
    caller: &Caller,
    bodies: Vec<CreateRun>,
) -> Result<Vec<Accepted>, ApiError> {
    let mut tx = state
        .pool()
        .begin()
        .await
        .map_err(|err| unavailable(&err.into()))?;
    let mut accepted = Vec::with_capacity(bodies.len());
    for body in bodies {
        let assistant = resolve_assistant(state, &body)?.clone();
        if body.command.as_ref().is_some_and(|c| c.resume.is_some()) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "You must provide a thread_id when resuming.",
            ));
        }
        delete_on_completion(&body)?;
        let new_thread = NewThread {
            graph_id: Some(assistant.graph_id.clone()),
            owner: caller.subject.clone(),
            store: caller.store.clone(),
            metadata: json!({}),
        };
        let thread = thread::create(&mut *tx, &new_thread)
            .await
            .map_err(|err| unavailable(&err))?;
        let new = new_run(thread.thread_id, &assistant, body)?;
        let run = match run::enqueue(&mut *tx, &new, Some(state.queue_limit())).await {
            Ok(enqueued) => enqueued.run,
            Err(err) => {
                if matches!(err, QueueError::Backpressure { .. }) {
                    state.metrics().backpressure_rejections.inc();
                }
                return Err(queue_error(err));
            }
        };
        accepted.push(Accepted {
            thread,
            assistant,
            run,
        });
    }
    tx.commit().await.map_err(|err| unavailable(&err.into()))?;
    state.metrics().runs_created.inc_by(accepted.len() as u64);
    Ok(accepted)
}

/// `POST /runs`: a background run on a new thread (kept: retention deletes it).
pub async fn create_stateless(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<CreateRun>,
) -> Result<Response, ApiError> {
    let accepted = accept_stateless(&state, &caller, vec![body]).await?;
    let run = &accepted[0].run;
    Ok((content_location(run), Json(run_json(run))).into_response())
}

/// `POST /runs/batch`: background runs, each on a new thread, enqueued all or nothing.
pub async fn batch(
    State(state): State<AppState>,
    caller: Caller,
    Body(bodies): Body<Vec<CreateRun>>,
) -> Result<Json<Vec<Value>>, ApiError> {
    if bodies.is_empty() || bodies.len() > 1000 {
        return Err(unprocessable("a batch holds 1 to 1000 runs"));
    }
    let accepted = accept_stateless(&state, &caller, bodies).await?;
    Ok(Json(accepted.iter().map(|a| run_json(&a.run)).collect()))
}

/// `POST /runs/wait`: a run on a new thread; the final state once it ended. The thread is then
/// deleted unless `on_completion` is `keep`.
pub async fn wait_stateless(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<CreateRun>,
) -> Result<Response, ApiError> {
    let delete = delete_on_completion(&body)?;
    let mut accepted = accept_stateless(&state, &caller, vec![body]).await?;
    let run = accepted.remove(0).run;
    Ok(waiting(state, run, delete))
}

/// `POST /runs/stream`: a run on a new thread, streamed. The thread stays (the stream may be
/// joined again after a disconnect); retention deletes it.
pub async fn stream_stateless(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<CreateRun>,
) -> Result<Response, ApiError> {
    let accepted = accept_stateless(&state, &caller, vec![body]).await?;
    let run = &accepted[0].run;
    Ok((content_location(run), stream::events(&state, run, 0, None)?).into_response())
}

fn new_run(
    thread_id: ThreadId,
    assistant: &Assistant,
    body: CreateRun,
) -> Result<NewRun, ApiError> {
    let unsupported = |what: &str| unprocessable(format!("{what} is not supported"));
    if body.checkpoint.is_some() || body.checkpoint_id.is_some() {
        return Err(unsupported("starting from a given checkpoint"));
    }
    if body.interrupt_before.is_some() || body.interrupt_after.is_some() {
        return Err(unsupported("interrupt_before/interrupt_after"));
    }
    if body.webhook.is_some() {
        return Err(unsupported("webhook"));
    }
    if body.stream_subgraphs == Some(true) {
        return Err(unsupported("stream_subgraphs"));
    }
    if body.if_not_exists.as_deref() == Some("create") {
        return Err(unprocessable(
            "threads are created with POST /threads (the server chooses their ids)",
        ));
    }
    if body
        .if_not_exists
        .as_deref()
        .is_some_and(|value| value != "reject")
    {
        return Err(unprocessable("if_not_exists must be create or reject"));
    }
    let command = match body.command {
        None => None,
        Some(command) if command.goto.is_some() || command.update.is_some() => {
            return Err(unsupported("command.goto and command.update"));
        }
        Some(RunCommand {
            resume: Some(resume),
            ..
        }) => Some(json!({"resume": resume})),
        Some(_) => None,
    };
    let multitask_strategy = match body.multitask_strategy.as_deref() {
        None => MultitaskStrategy::Enqueue,
        Some(name) => MultitaskStrategy::from_name(name).ok_or_else(|| {
            unprocessable("multitask_strategy must be reject, interrupt, rollback or enqueue")
        })?,
    };
    let after = match body.after_seconds {
        None => Duration::ZERO,
        Some(seconds) if seconds.is_finite() && seconds >= 0.0 => {
            Duration::try_from_secs_f64(seconds)
                .map_err(|_| unprocessable("after_seconds is out of range"))?
        }
        Some(_) => {
            return Err(unprocessable(
                "after_seconds must be a number of seconds ≥ 0",
            ));
        }
    };
    let stream_mode = match &body.stream_mode {
        None => vec![StreamMode::Values],
        Some(modes) => modes.parse()?,
    };
    let config = run_config(body.config, body.context, body.durability)?;
    let mut metadata = body.metadata.unwrap_or_default();
    metadata.insert("graph_id".into(), json!(assistant.graph_id));
    metadata.insert("assistant_id".into(), json!(assistant.assistant_id));
    Ok(NewRun {
        input: if command.is_some() { None } else { body.input },
        command,
        config,
        metadata: Value::Object(metadata),
        multitask_strategy,
        after,
        stream_mode,
        ..NewRun::new(thread_id, assistant.graph_id.clone())
    })
}

/// The run's `config` as the worker reads it: `configurable` (or `context`), `recursion_limit`,
/// `max_concurrency`, `durability`.
fn run_config(
    config: Option<Value>,
    context: Option<Map<String, Value>>,
    durability: Option<String>,
) -> Result<Value, ApiError> {
    let mut config = match config {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(config)) => config,
        Some(_) => return Err(unprocessable("config must be an object")),
    };
    if let Some(context) = context.filter(|context| !context.is_empty()) {
        if config.contains_key("configurable") {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "specify either config.configurable or context, not both",
            ));
        }
        config.insert("configurable".into(), Value::Object(context));
    }
    for field in ["recursion_limit", "max_concurrency"] {
        if let Some(value) = config.get(field)
            && value.as_u64().is_none_or(|n| n == 0)
        {
            return Err(unprocessable(format!(
                "config.{field} must be a positive integer"
            )));
        }
    }
    if config
        .get("configurable")
        .is_some_and(|configurable| !configurable.is_object())
    {
        return Err(unprocessable("config.configurable must be an object"));
    }
    match durability.as_deref() {
        None => {}
        Some(mode @ ("sync" | "async" | "exit")) => {
            config.insert("durability".into(), json!(mode));
        }
        Some(_) => return Err(unprocessable("durability must be sync, async or exit")),
    }
    Ok(Value::Object(config))
}

/// Resuming decides for the graph: managers only, and only a thread that waits for a decision.
async fn authorize_resume(
    state: &AppState,
    caller: &Caller,
    thread: &Thread,
    _command: &Value,
) -> Result<(), ApiError> {
    if caller.role != Role::Manager {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "only a manager may resume a thread with a decision",
        ));
    }
    let latest = PgCheckpointer::new(state.pool().clone())
        .get(thread.thread_id.0, None)
        .await
        .map_err(|err| {
            tracing::warn!(error = %err, "reading a checkpoint failed");
            unavailable(&QueueError::Invalid {
                field: "checkpoint",
                reason: err.to_string(),
            })
        })?;
    let waiting = latest.is_some_and(|saved| saved.writes.iter().any(|w| w.channel == INTERRUPT));
    if waiting {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::CONFLICT,
            "the thread is not waiting for a decision: there is nothing to resume",
        ))
    }
}

/// The api's answer to a queue error.
pub fn queue_error(err: QueueError) -> ApiError {
    match err {
        QueueError::ThreadNotFound(_) => ApiError::thread_not_found(),
        QueueError::RunNotFound(_) => ApiError::new(StatusCode::NOT_FOUND, "Run not found"),
        QueueError::Conflict { .. } => ApiError::new(
            StatusCode::CONFLICT,
            "Thread is already running a task: wait for it, or choose another multitask_strategy",
        ),
        QueueError::GraphMismatch {
            thread_graph_id, ..
        } => ApiError::new(
            StatusCode::CONFLICT,
            format!("the thread belongs to graph {thread_graph_id:?}"),
        ),
        QueueError::Backpressure {
            graph_id,
            retry_after,
            ..
        } => ApiError {
            retry_after: Some(retry_after.as_secs().max(1)),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("graph {graph_id:?} has too many runs waiting; try again later"),
            )
        },
        QueueError::Invalid { field, reason } => unprocessable(format!("{field}: {reason}")),
        other => unavailable(&other),
    }
}

/// A run as the `langgraph-sdk` reads it.
pub fn run_json(run: &Run) -> Value {
    let assistant = Assistant::for_graph(&run.graph_id);
    json!({
        "run_id": run.run_id.0,
        "thread_id": run.thread_id.0,
        "assistant_id": assistant.assistant_id,
        "metadata": run.metadata,
        "status": run.status.as_str(),
        "kwargs": {
            "input": run.input,
            "command": run.command,
            "config": run.config,
            "stream_mode": run.stream_mode,
            "durability": run.config.get("durability").cloned().unwrap_or(json!("sync")),
        },
        "multitask_strategy": run.multitask_strategy.as_str(),
        "created_at": run.created_at,
        "updated_at": run.updated_at,
    })
}

/// `Content-Location: /threads/{thread_id}/runs/{run_id}`: the client reads the run id from it.
pub fn content_location(run: &Run) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Ok(value) =
        HeaderValue::from_str(&format!("/threads/{}/runs/{}", run.thread_id, run.run_id))
    {
        headers.insert(header::CONTENT_LOCATION, value);
    }
    headers
}

/// `POST /threads/{thread_id}/runs`: enqueue a background run.
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    Body(body): Body<CreateRun>,
) -> Result<Response, ApiError> {
    let accepted = accept(&state, &caller, &thread_id, body).await?;
    Ok((
        content_location(&accepted.run),
        Json(run_json(&accepted.run)),
    )
        .into_response())
}

/// The run `run_id` of a thread the caller may see.
pub async fn visible_run(
    state: &AppState,
    caller: &Caller,
    thread_id: &str,
    run_id: &str,
) -> Result<Run, ApiError> {
    let thread = visible_thread(state.pool(), caller, thread_id).await?;
    let run_id = Uuid::parse_str(run_id)
        .map_err(|_| ApiError::new(StatusCode::NOT_FOUND, "Run not found"))?;
    run::get(state.pool(), thread.thread_id, RunId(run_id))
        .await
        .map_err(queue_error)
}

/// `GET /threads/{thread_id}/runs/{run_id}`.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let run = visible_run(&state, &caller, &thread_id, &run_id).await?;
    Ok(Json(run_json(&run)))
}

#[derive(Debug, Deserialize)]
#[serde(default)]
pub struct ListQuery {
    limit: i64,
    offset: i64,
    status: Option<String>,
}

impl Default for ListQuery {
    fn default() -> Self {
        Self {
            limit: 10,
            offset: 0,
            status: None,
        }
    }
}

/// `GET /threads/{thread_id}/runs`: newest first.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let Query(query) = query.map_err(|rejection| unprocessable(rejection.body_text()))?;
    let thread = visible_thread(state.pool(), &caller, &thread_id).await?;
    let status = match query.status.as_deref() {
        None | Some("") => None,
        Some(name) => Some(
            RunStatus::from_name(name)
                .ok_or_else(|| unprocessable(format!("unknown run status {name:?}")))?,
        ),
    };
    let runs = run::list(
        state.pool(),
        thread.thread_id,
        status,
        query.limit,
        query.offset,
    )
    .await
    .map_err(queue_error)?;
    Ok(Json(runs.iter().map(run_json).collect()))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CancelQuery {
    wait: Option<String>,
    action: Option<String>,
}

/// `POST /threads/{thread_id}/runs/{run_id}/cancel?action=interrupt|rollback&wait=0|1`: 202 at
/// once, or with `wait=1` the final state once the run has ended (204 when a rollback deleted it).
pub async fn cancel(
    State(state): State<AppState>,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: Result<Query<CancelQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|rejection| unprocessable(rejection.body_text()))?;
    let action = match query.action.as_deref() {
        None | Some("interrupt") => CancelAction::Interrupt,
        Some("rollback") => CancelAction::Rollback,
        Some(_) => return Err(unprocessable("action must be interrupt or rollback")),
    };
    let wait = match query.wait.as_deref() {
        None | Some("0" | "false" | "") => false,
        Some("1" | "true") => true,
        Some(_) => return Err(unprocessable("wait must be 0 or 1")),
    };
    let run = visible_run(&state, &caller, &thread_id, &run_id).await?;
    mostrador_queue::cancel(state.pool(), run.thread_id, run.run_id, action)
        .await
        .map_err(queue_error)?;
    if !wait {
        return Ok(StatusCode::ACCEPTED.into_response());
    }
    match final_state(&state, &run).await {
        Ok(result) => Ok(Json(result).into_response()),
        Err(err) if err.status == StatusCode::NOT_FOUND => {
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        Err(err) => Err(err),
    }
}

/// `POST /threads/{thread_id}/runs/stream`: enqueue, then stream the run's events.
pub async fn create_and_stream(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    Body(body): Body<CreateRun>,
) -> Result<Response, ApiError> {
    let accepted = accept(&state, &caller, &thread_id, body).await?;
    let headers = content_location(&accepted.run);
    Ok((headers, stream::events(&state, &accepted.run, 0, None)?).into_response())
}

/// `GET /threads/{thread_id}/runs/{run_id}/stream`: the run's events after `Last-Event-ID`,
/// of the `stream_mode`s asked for (all stored ones when none is).
pub async fn join_stream(
    State(state): State<AppState>,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let after = stream::last_event_id(&headers)?;
    let modes = stream_modes_query(query.as_deref())?;
    let run = visible_run(&state, &caller, &thread_id, &run_id).await?;
    Ok(stream::events(&state, &run, after, modes)?.into_response())
}

/// `stream_mode` query values (repeated keys, as the client sends a list); empty means all.
fn stream_modes_query(query: Option<&str>) -> Result<Option<Vec<String>>, ApiError> {
    let names: Vec<String> = query
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .filter(|(key, value)| *key == "stream_mode" && !value.is_empty())
        .map(|(_, value)| value.replace("%2D", "-").replace("%2d", "-"))
        .collect();
    if names.is_empty() {
        return Ok(None);
    }
    let modes = StreamModes::Many(names).parse()?;
    Ok(Some(
        modes
            .into_iter()
            .map(|mode| mode.as_str().to_owned())
            .collect(),
    ))
}

/// `POST /threads/{thread_id}/runs/wait`: enqueue, wait for the end, answer the final state.
pub async fn create_and_wait(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    Body(body): Body<CreateRun>,
) -> Result<Response, ApiError> {
    let accepted = accept(&state, &caller, &thread_id, body).await?;
    Ok(waiting(state, accepted.run, false))
}

/// `GET /threads/{thread_id}/runs/{run_id}/join`: wait for the end, answer the final state.
pub async fn join(
    State(state): State<AppState>,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let run = visible_run(&state, &caller, &thread_id, &run_id).await?;
    Ok(waiting(state, run, false))
}

/// How often a waiting answer sends a blank line, so the client (it gives up after 300 s of
/// silence) keeps waiting; JSON parsers skip leading whitespace.
const WAIT_KEEP_ALIVE: Duration = Duration::from_secs(5);

/// Answers `200` at once, then blank lines while the run goes on, then its final state (or
/// `{"__error__": ...}` if waiting failed); with `delete_thread`, the run's thread is deleted
/// once it ended.
fn waiting(state: AppState, run: Run, delete_thread: bool) -> Response {
    let headers = content_location(&run);
    let (sender, receiver) = tokio::sync::mpsc::channel::<axum::body::Bytes>(4);
    tokio::spawn(async move {
        let result = final_state(&state, &run);
        tokio::pin!(result);
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + WAIT_KEEP_ALIVE,
            WAIT_KEEP_ALIVE,
        );
        let answer = loop {
            tokio::select! {
                answer = &mut result => break answer,
                _ = tick.tick() => {
                    if sender.send(axum::body::Bytes::from_static(b"\n")).await.is_err() {
                        return;
                    }
                }
            }
        };
        let body = match answer {
            Ok(value) => value,
            Err(err) => json!({"__error__": {"error": "WaitFailed", "message": err.detail}}),
        };
        if delete_thread && let Err(err) = thread::delete(state.pool(), run.thread_id).await {
            tracing::warn!(error = %err, "deleting a stateless run's thread failed");
        }
        let _ = sender.send(axum::body::Bytes::from(body.to_string())).await;
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver
            .recv()
            .await
            .map(|bytes| (Ok::<_, std::convert::Infallible>(bytes), receiver))
    });
    (
        headers,
        [(header::CONTENT_TYPE, "application/json")],
        axum::body::Body::from_stream(stream),
    )
        .into_response()
}

/// Waits for the run's `end`, then answers as the official server does: the thread's values,
/// with `__interrupt__` when the graph waits, or `{"__error__": ...}` when the run failed.
async fn final_state(state: &AppState, run: &Run) -> Result<Value, ApiError> {
    let mut follower = EventFollower::start(state.pool().clone(), state.listener(), run.run_id, 0)
        .await
        .map_err(queue_error)?;
    let mut shutdown = state.shutdown_signal();
    loop {
        let next = tokio::select! {
            next = follower.next() => next,
            _ = shutdown.wait_for(|shutting_down| *shutting_down) => {
                return Err(ApiError {
                    retry_after: Some(1),
                    ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the server is shutting down: join the run again")
                });
            }
        };
        match next.map_err(queue_error)? {
            Some(event) if event.event == "end" => break,
            Some(_) => {}
            None => {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the server is shutting down: join the run again",
                ));
            }
        }
    }
    let ended = run::get(state.pool(), run.thread_id, run.run_id)
        .await
        .map_err(queue_error)?;
    if ended.status == RunStatus::Error || ended.status == RunStatus::Timeout {
        let error = ended
            .error
            .unwrap_or_else(|| json!({"error": "Timeout", "message": "the run timed out"}));
        return Ok(json!({"__error__": error}));
    }
    let saved = PgCheckpointer::new(state.pool().clone())
        .get(run.thread_id.0, None)
        .await
        .map_err(|err| {
            unavailable(&QueueError::Invalid {
                field: "checkpoint",
                reason: err.to_string(),
            })
        })?;
    let Some(saved) = saved else {
        return Ok(json!({}));
    };
    let interrupts: Vec<Value> = saved
        .writes
        .iter()
        .filter(|write| write.channel == INTERRUPT)
        .map(|write| write.value.clone())
        .collect();
    let mut values = saved.values;
    if !interrupts.is_empty() {
        values.insert(INTERRUPT.to_owned(), Value::Array(interrupts));
    }
    Ok(Value::Object(values))
}

/// `DELETE /threads/{thread_id}/runs/{run_id}`: 204; 409 for a run in flight.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let run = visible_run(&state, &caller, &thread_id, &run_id).await?;
    match run::delete(state.pool(), run.thread_id, run.run_id).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(QueueError::Invalid { reason, .. }) => Err(ApiError::new(StatusCode::CONFLICT, reason)),
        Err(err) => Err(queue_error(err)),
    }
}
