//! Runs on a thread: create (in the background, streaming its events, or waiting for its end),
//! get, list, join, join its stream, cancel, delete; and stateless runs. The api never executes a
//! graph: it validates, authorizes the thread, and enqueues; workers do the rest.
//!
//! * [`accept`]: a run request, validated and enqueued (on a thread, or on a new one).
//! * [`wait`]: streaming a run's events, and waiting for its end.

pub mod accept;
pub mod config;
mod rust;
mod stateless;
pub(crate) mod wait;

use wait::final_state;

pub use accept::{Accepted, CreateRun, Follow, RunCommand, StreamModes, accept};
pub use stateless::{batch, create_stateless, stream_stateless, wait_stateless};
pub use wait::{create_and_stream, create_and_wait, join, join_stream};

use axum::Json;
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mostrador_queue::run::cancel::{self, Selection};
use mostrador_queue::run::{self};
use mostrador_queue::{CancelAction, Error as QueueError, Run, RunId, RunStatus};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::app::AppState;
use crate::assistants::Assistant;
use crate::auth::Caller;
use crate::authorize::{grant, visible_thread, writable_thread};
use crate::custom_auth::event::AnyThreads;
use crate::error::ApiError;
use crate::extract::{Body, RunHeaders};
use crate::openapi::fields;
use crate::wire;

/// The 429 of a caller over their share of the queue.
pub fn over_share(retry_after: std::time::Duration) -> ApiError {
    ApiError {
        retry_after: Some(retry_after.as_secs().max(1)),
        ..ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "you have too many runs waiting; try again when some have started",
        )
    }
}

/// The api's answer to a queue error.
pub fn queue_error(err: QueueError) -> ApiError {
    match err {
        QueueError::ThreadNotFound(_) => ApiError::thread_not_found(),
        QueueError::RunNotFound(_) => ApiError::not_found("Run not found"),
        QueueError::Conflict { .. } => ApiError::conflict(
            "Thread is already running a task: wait for it, or choose another multitask_strategy",
        ),
        QueueError::GraphMismatch {
            thread_graph_id, ..
        } => ApiError::conflict(format!("the thread belongs to graph {thread_graph_id:?}")),
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
        QueueError::CallerShare { retry_after, .. } => over_share(retry_after),
        QueueError::Invalid { field, reason } => {
            ApiError::unprocessable(format!("{field}: {reason}"))
        }
        other => ApiError::failed(other),
    }
}

/// A run as the `langgraph-sdk` reads it.
pub fn run_answer(run: &Run) -> wire::Run {
    // The assistant the run was created on (recorded in its metadata), else its graph's own.
    let assistant_id = run
        .metadata
        .get("assistant_id")
        .filter(|id| id.is_string())
        .cloned()
        .unwrap_or_else(|| json!(Assistant::for_graph(&run.graph_id).assistant_id));
    let mut config = run.config.clone();
    let context = config
        .as_object_mut()
        .and_then(|config| config.remove("context"))
        .unwrap_or_else(|| json!({}));
    wire::Run {
        run_id: run.run_id.0,
        thread_id: run.thread_id.0,
        assistant_id,
        metadata: run.metadata.clone(),
        status: run.status.as_str(),
        kwargs: wire::RunKwargs {
            input: run.input.clone(),
            command: run.command.clone(),
            config,
            context,
            stream_mode: run.stream_mode.clone(),
            durability: run
                .config
                .get("durability")
                .cloned()
                .unwrap_or(json!("sync")),
        },
        multitask_strategy: run.multitask_strategy.as_str(),
        created_at: run.created_at,
        updated_at: run.updated_at,
    }
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

/// [`content_location`], and `Location`: where to rejoin the run's answer (`stream` or `join`),
/// which the SDKs follow by themselves after a dropped connection.
pub fn rejoin_location(run: &Run, answer: &str) -> HeaderMap {
    let mut headers = content_location(run);
    if let Ok(value) = HeaderValue::from_str(&format!(
        "/threads/{}/runs/{}/{answer}",
        run.thread_id, run.run_id
    )) {
        headers.insert(header::LOCATION, value);
    }
    headers
}

/// `POST /threads/{thread_id}/runs`: enqueue a background run.
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    RunHeaders(headers): RunHeaders,
    Body(mut body): Body<CreateRun>,
) -> Result<Response, ApiError> {
    body.headers = headers;
    let accepted = accept(&state, &caller, &thread_id, body, Follow::No).await?;
    Ok((
        content_location(&accepted.run),
        Json(run_answer(&accepted.run)),
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
    let thread = visible_thread(state, caller, thread_id).await?;
    run_of(state, &thread, run_id).await
}

/// The run `run_id` of a thread the caller may change (cancel it, delete it).
pub async fn writable_run(
    state: &AppState,
    caller: &Caller,
    thread_id: &str,
    run_id: &str,
) -> Result<Run, ApiError> {
    let thread = writable_thread(state, caller, thread_id).await?;
    run_of(state, &thread, run_id).await
}

async fn run_of(
    state: &AppState,
    thread: &mostrador_queue::Thread,
    run_id: &str,
) -> Result<Run, ApiError> {
    let run_id = Uuid::parse_str(run_id).map_err(|_| ApiError::not_found("Run not found"))?;
    run::get(state.pool(), thread.thread_id, RunId(run_id))
        .await
        .map_err(queue_error)
}

/// `GET /threads/{thread_id}/runs/{run_id}`.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<Json<wire::Run>, ApiError> {
    let run = visible_run(&state, &caller, &thread_id, &run_id).await?;
    Ok(Json(run_answer(&run)))
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

/// The fields of a run a list may select, as officially.
const RUN_FIELDS: [&str; 9] = [
    "run_id",
    "thread_id",
    "assistant_id",
    "created_at",
    "updated_at",
    "status",
    "metadata",
    "kwargs",
    "multitask_strategy",
];

/// `GET /threads/{thread_id}/runs`: newest first; `select` (repeated, as the SDKs send it) keeps
/// only the fields it names.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let raw = raw.unwrap_or_default();
    let (select, rest): (Vec<&str>, Vec<&str>) = raw
        .split('&')
        .filter(|pair| !pair.is_empty())
        .partition(|pair| pair.starts_with("select="));
    let select: Vec<String> = select
        .iter()
        .filter_map(|pair| pair.split_once('='))
        .map(|(_, field)| field.to_owned())
        .filter(|field| !field.is_empty())
        .collect();
    if let Some(unknown) = select
        .iter()
        .find(|field| !RUN_FIELDS.contains(&field.as_str()))
    {
        return Err(ApiError::unprocessable(format!(
            "select: {unknown:?} is not a field of a run"
        )));
    }
    let uri: axum::http::Uri = format!("/?{}", rest.join("&"))
        .parse()
        .map_err(|_| ApiError::unprocessable("a query string that does not parse"))?;
    let Query(query) = Query::<ListQuery>::try_from_uri(&uri)
        .map_err(|rejection| ApiError::unprocessable(rejection.body_text()))?;
    let thread = visible_thread(&state, &caller, &thread_id).await?;
    let status = status_filter(query.status.as_deref())?;
    let runs = run::list(
        state.pool(),
        thread.thread_id,
        status,
        query.limit,
        query.offset,
    )
    .await
    .map_err(queue_error)?;
    let mut page = wire::Page::new(b"[", state.max_page_bytes());
    for run in &runs {
        let mut answer = serde_json::to_value(run_answer(run)).map_err(ApiError::failed)?;
        if let (false, Value::Object(fields)) = (select.is_empty(), &mut answer) {
            fields.retain(|field, _| select.contains(field));
        }
        page.push(&answer)?;
    }
    Ok(page.answer(b"]"))
}

fn status_filter(name: Option<&str>) -> Result<Option<RunStatus>, ApiError> {
    match name {
        None | Some("") => Ok(None),
        Some(name) => RunStatus::from_name(name)
            .map(Some)
            .ok_or_else(|| ApiError::unprocessable(format!("unknown run status {name:?}"))),
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(default, deny_unknown_fields)]
pub struct RecentQuery {
    #[param(minimum = 1, maximum = 1000, default = 20)]
    limit: i64,
    #[param(schema_with = fields::run_status_filter)]
    status: Option<String>,
}

impl Default for RecentQuery {
    fn default() -> Self {
        Self {
            limit: 20,
            status: None,
        }
    }
}

/// `GET /runs/recent?limit=20&status=`: the newest runs of every thread the caller may see, as
/// runs are listed per thread, with their graph, attempt, error and times besides.
pub async fn recent(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<RecentQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<wire::RecentRun>>, ApiError> {
    let Query(query) = query.map_err(|rejection| ApiError::unprocessable(rejection.body_text()))?;
    let status = status_filter(query.status.as_deref())?;
    let mut visible_to = state.visibility(&caller);
    visible_to.auth_filter = grant(&state, &caller, &AnyThreads {}).await?.filter_json();
    let runs = run::recent(state.pool(), &visible_to, status, query.limit)
        .await
        .map_err(queue_error)?;
    Ok(Json(
        runs.iter()
            .map(|run| wire::RecentRun {
                run: run_answer(run),
                graph_id: run.graph_id.clone(),
                attempt: run.attempt,
                error: run.error.clone(),
                worker_id: run.lease_owner.map(|worker| worker.0),
                started_at: run.started_at,
                finished_at: run.finished_at,
            })
            .collect(),
    ))
}

/// The query of a run's cancel.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(default)]
pub struct CancelQuery {
    /// Answer once the run has ended, with its final state.
    #[param(schema_with = fields::cancel_wait)]
    wait: Option<String>,
    /// `interrupt` (the default) or `rollback`.
    #[param(schema_with = fields::cancel_action)]
    action: Option<CancelAction>,
}

/// The query of `POST /runs/cancel`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(default)]
pub struct CancelManyQuery {
    /// `interrupt` (the default) or `rollback`.
    #[param(schema_with = fields::cancel_action)]
    action: Option<CancelAction>,
}

/// `POST /threads/{thread_id}/runs/{run_id}/cancel?action=interrupt|rollback&wait=0|1`: 202 at
/// once, or with `wait=1` the final state once the run has ended (204 when a rollback deleted it).
pub async fn cancel(
    State(state): State<AppState>,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: Result<Query<CancelQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|rejection| ApiError::unprocessable(rejection.body_text()))?;
    let action = query.action.unwrap_or(CancelAction::Interrupt);
    let wait = match query.wait.as_deref() {
        None | Some("0" | "false" | "") => false,
        Some("1" | "true") => true,
        Some(_) => return Err(ApiError::unprocessable("wait must be 0 or 1")),
    };
    let run = writable_run(&state, &caller, &thread_id, &run_id).await?;
    // A wait holds a slot, as streams do: taken before the cancel, so a refused one changed nothing.
    let slot = if wait {
        Some(crate::stream::slot(&state, &caller)?)
    } else {
        None
    };
    mostrador_queue::cancel(state.pool(), run.thread_id, run.run_id, action)
        .await
        .map_err(queue_error)?;
    let Some(_slot) = slot else {
        return Ok(StatusCode::ACCEPTED.into_response());
    };
    match final_state(&state, &run).await {
        Ok(result) => Ok(Json(result).into_response()),
        Err(err) if err.status == StatusCode::NOT_FOUND => {
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        Err(err) => Err(err),
    }
}

/// What `POST /runs/cancel` takes: `status`, or `thread_id` and `run_ids` (a 422 otherwise).
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = RunCancel)]
pub struct CancelMany {
    #[schema(schema_with = cancel_status)]
    status: Option<String>,
    #[schema(value_type = Option<String>, format = Uuid)]
    thread_id: Option<String>,
    #[schema(value_type = Option<Vec<String>>, format = Uuid)]
    run_ids: Option<Vec<String>>,
}

/// Which runs a cancel by `status` cancels.
fn cancel_status() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
    crate::openapi::schema(
        json!({"type": ["string", "null"], "enum": ["pending", "running", "all", null]}),
    )
}

/// `POST /runs/cancel?action=interrupt|rollback`: cancels the runs a body names (`thread_id` and
/// `run_ids`), or every run of the caller's threads in a status (`pending`, `running` or `all`
/// of them), each as a single cancel does; 204, or 404 when none of them is pending or running.
/// Cancelling is a change: the caller's own threads only.
pub async fn cancel_many(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<CancelManyQuery>, axum::extract::rejection::QueryRejection>,
    Body(body): Body<CancelMany>,
) -> Result<StatusCode, ApiError> {
    let Query(query) = query.map_err(|rejection| ApiError::unprocessable(rejection.body_text()))?;
    let action = query.action.unwrap_or(CancelAction::Interrupt);
    let selection = match (body.status, body.thread_id, body.run_ids) {
        (Some(status), None, None) => Selection::InFlight(match status.to_lowercase().as_str() {
            "pending" => vec![RunStatus::Pending],
            "running" => vec![RunStatus::Running],
            "all" => vec![RunStatus::Pending, RunStatus::Running],
            _ => {
                return Err(ApiError::unprocessable(
                    "Invalid status: must be 'pending', 'running', or 'all'",
                ));
            }
        }),
        (Some(_), _, _) => {
            return Err(ApiError::unprocessable(
                "When providing a 'status', 'thread_id' and 'run_ids' must be omitted. The \
                 'status' parameter cancels all runs with the given status, regardless of thread \
                 or run ID.",
            ));
        }
        (None, Some(thread_id), Some(run_ids)) => {
            let run_ids = run_ids
                .iter()
                .map(|run_id| Uuid::parse_str(run_id).map(RunId))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| ApiError::unprocessable("Invalid run ID: must be a UUID"))?;
            if Uuid::parse_str(&thread_id).is_err() {
                return Err(ApiError::unprocessable("Invalid thread ID: must be a UUID"));
            }
            let thread = writable_thread(&state, &caller, &thread_id).await?;
            Selection::Runs {
                thread_id: thread.thread_id,
                run_ids,
            }
        }
        (None, _, _) => {
            return Err(ApiError::unprocessable(
                "Must provide either a status or both 'thread_id' and 'run_ids'",
            ));
        }
    };
    let done = cancel::cancel_many(state.pool(), &caller.subject, &selection, action)
        .await
        .map_err(queue_error)?;
    // As the official server words them.
    if done.matched == 0 {
        return Err(ApiError::not_found("No runs found to cancel."));
    }
    if done.cancelled == 0 {
        return Err(ApiError::not_found(
            "No matching runs to cancel. Please verify the thread ID and run IDs are correct, and \
             the runs haven't been deleted or completed.",
        ));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /threads/{thread_id}/runs/stream`: enqueue, then stream the run's events.
/// `DELETE /threads/{thread_id}/runs/{run_id}`: 204; 409 for a run in flight.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let run = writable_run(&state, &caller, &thread_id, &run_id).await?;
    match run::delete(state.pool(), run.thread_id, run.run_id).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(QueueError::Invalid { reason, .. }) => Err(ApiError::conflict(reason)),
        Err(err) => Err(queue_error(err)),
    }
}
