//! Scheduled runs, as the `langgraph-sdk`'s `client.crons` speaks them: create (on a thread, or
//! stateless: each run on a new thread of the creator), search, count, delete. The workers
//! execute them (`queue::cron::tick`). A caller sees and deletes only their own crons; another's
//! is a 404, like one that does not exist.
//!
//! Schedules are five-field cron expressions in UTC (`timezone` may be omitted, `UTC` or
//! `Etc/UTC`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use mostrador_queue::cron::{self, Cron, NewCron};
use mostrador_queue::{Error as QueueError, ThreadId};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::app::AppState;
use crate::assistants::Assistant;
use crate::auth::Caller;
use crate::authorize::writable_thread;
use crate::error::ApiError;
use crate::extract::Body;
use crate::runs::queue_error;

fn unprocessable(detail: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
}

/// The body of `POST /runs/crons` and `POST /threads/{thread_id}/runs/crons`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CreateCron {
    assistant_id: Option<String>,
    schedule: Option<String>,
    input: Option<Value>,
    config: Option<Map<String, Value>>,
    metadata: Option<Map<String, Value>>,
    context: Option<Value>,
    end_time: Option<DateTime<Utc>>,
    enabled: Option<bool>,
    timezone: Option<String>,
    stream_mode: Option<crate::runs::accept::StreamModes>,
    multitask_strategy: Option<String>,
    on_run_completed: Option<String>,
    webhook: Option<String>,
    interrupt_before: Option<Value>,
    interrupt_after: Option<Value>,
}

/// `POST /runs/crons`: each run on a new thread of the caller.
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<CreateCron>,
) -> Result<Json<Value>, ApiError> {
    let new = new_cron(&state, &caller, body, None)?;
    let cron = cron::create(state.pool(), &new, state.max_crons_per_caller())
        .await
        .map_err(cron_error)?;
    Ok(Json(cron_json(&cron)))
}

/// `POST /threads/{thread_id}/runs/crons`: every run on this thread.
pub async fn create_for_thread(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    Body(body): Body<CreateCron>,
) -> Result<Json<Value>, ApiError> {
    let thread = writable_thread(&state, &caller, &thread_id).await?;
    let new = new_cron(&state, &caller, body, Some(thread.thread_id))?;
    if thread
        .graph_id
        .as_ref()
        .is_some_and(|graph_id| *graph_id != new.graph_id)
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "the thread belongs to graph {:?}",
                thread.graph_id.unwrap_or_default()
            ),
        ));
    }
    let cron = cron::create(state.pool(), &new, state.max_crons_per_caller())
        .await
        .map_err(cron_error)?;
    Ok(Json(cron_json(&cron)))
}

fn new_cron(
    state: &AppState,
    caller: &Caller,
    body: CreateCron,
    thread_id: Option<ThreadId>,
) -> Result<NewCron, ApiError> {
    let unsupported = |what: &str| unprocessable(format!("{what} is not supported on crons"));
    if body.webhook.is_some() {
        return Err(unsupported("webhook"));
    }
    if body.interrupt_before.is_some() || body.interrupt_after.is_some() {
        return Err(unsupported("interrupt_before/interrupt_after"));
    }
    if body.context.as_ref().is_some_and(|c| !c.is_null()) {
        return Err(unsupported("context"));
    }
    if let Some(zone) = body.timezone.as_deref()
        && !["UTC", "Etc/UTC", "utc"].contains(&zone)
    {
        return Err(unprocessable(format!(
            "schedules are in UTC here; timezone {zone:?} is not supported (write the schedule in UTC)"
        )));
    }
    match body.on_run_completed.as_deref() {
        None | Some("keep") => {}
        Some(_) => {
            return Err(unprocessable(
                "on_run_completed must be keep: the threads of cron runs stay until retention deletes them",
            ));
        }
    }
    let assistant_id = body
        .assistant_id
        .as_deref()
        .ok_or_else(|| unprocessable("assistant_id is required"))?;
    let assistant = state.assistant(assistant_id).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("assistant {assistant_id:?} not found"),
        )
    })?;
    crate::authorize::may_schedule(state, caller, &assistant.graph_id)?;
    let schedule = body
        .schedule
        .ok_or_else(|| unprocessable("schedule is required"))?;
    if let Some(input) = &body.input
        && !(input.is_object() || input.is_null())
    {
        return Err(unprocessable("input must be an object"));
    }
    // A cron's runs act for the caller who made it.
    let mut config = body.config.map(Value::Object).unwrap_or_else(|| json!({}));
    crate::runs::config::acting_for(&mut config, caller);
    let mut payload = json!({
        "input": body.input,
        "config": config,
        "metadata": body.metadata.clone().map(Value::Object),
        "multitask_strategy": body.multitask_strategy,
    });
    if let Some(strategy) = payload["multitask_strategy"].as_str()
        && mostrador_queue::MultitaskStrategy::from_name(strategy).is_none()
    {
        return Err(unprocessable(
            "multitask_strategy must be reject, enqueue, interrupt or rollback",
        ));
    }
    if let Some(modes) = &body.stream_mode {
        let modes = modes.parse()?;
        payload["stream_mode"] = json!(modes.iter().map(|m| m.as_str()).collect::<Vec<_>>());
    }
    Ok(NewCron {
        graph_id: assistant.graph_id.clone(),
        thread_id,
        owner: caller.subject.clone(),
        tenant: caller.tenant.clone(),
        schedule,
        payload,
        metadata: Value::Object(body.metadata.unwrap_or_default()),
        enabled: body.enabled.unwrap_or(true),
        end_time: body.end_time,
    })
}

fn cron_error(err: QueueError) -> ApiError {
    match err {
        QueueError::Invalid { field, reason } => unprocessable(format!("{field}: {reason}")),
        other => queue_error(other),
    }
}

/// A cron as the `langgraph-sdk` reads it.
fn cron_json(cron: &Cron) -> Value {
    let mut payload = cron.payload.clone();
    payload["schedule"] = json!(cron.schedule);
    payload["assistant_id"] = json!(cron.graph_id);
    json!({
        "cron_id": cron.cron_id,
        "assistant_id": Assistant::for_graph(&cron.graph_id).assistant_id,
        "thread_id": cron.thread_id,
        "user_id": cron.owner,
        "schedule": cron.schedule,
        "timezone": "UTC",
        "payload": payload,
        "metadata": cron.metadata,
        "enabled": cron.enabled,
        "end_time": cron.end_time,
        "next_run_date": cron.enabled.then_some(cron.next_run_at),
        "on_run_completed": cron.on_run_completed,
        "created_at": cron.created_at,
        "updated_at": cron.updated_at,
    })
}

/// The body of `POST /runs/crons/search` and `/count`.
#[derive(Debug, Deserialize)]
#[serde(default)]
pub struct SearchCrons {
    assistant_id: Option<String>,
    thread_id: Option<String>,
    enabled: Option<bool>,
    limit: i64,
    offset: i64,
    sort_by: Option<String>,
    sort_order: Option<String>,
    select: Option<Value>,
}

impl Default for SearchCrons {
    fn default() -> Self {
        Self {
            assistant_id: None,
            thread_id: None,
            enabled: None,
            limit: 10,
            offset: 0,
            sort_by: None,
            sort_order: None,
            select: None,
        }
    }
}

async fn find(
    state: &AppState,
    caller: &Caller,
    search: &SearchCrons,
    limit: i64,
    offset: i64,
) -> Result<Vec<Cron>, ApiError> {
    if search.select.is_some() || search.sort_by.is_some() || search.sort_order.is_some() {
        return Err(unprocessable(
            "select, sort_by and sort_order are not supported: crons come oldest first",
        ));
    }
    let graph_id = match search.assistant_id.as_deref() {
        None => None,
        Some(id) => match state.assistant(id) {
            Some(assistant) => Some(assistant.graph_id.clone()),
            // No such assistant: no crons of it.
            None => return Ok(Vec::new()),
        },
    };
    let thread_id = match search.thread_id.as_deref() {
        None => None,
        Some(id) => match Uuid::parse_str(id) {
            Ok(id) => Some(id),
            Err(_) => return Ok(Vec::new()),
        },
    };
    cron::search(
        state.pool(),
        &caller.subject,
        graph_id.as_deref(),
        thread_id,
        search.enabled,
        limit,
        offset,
    )
    .await
    .map_err(cron_error)
}

/// `POST /runs/crons/search`: the caller's crons, oldest first.
pub async fn search(
    State(state): State<AppState>,
    caller: Caller,
    Body(search): Body<SearchCrons>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let crons = find(&state, &caller, &search, search.limit, search.offset).await?;
    Ok(Json(crons.iter().map(cron_json).collect()))
}

/// `POST /runs/crons/count`.
pub async fn count(
    State(state): State<AppState>,
    caller: Caller,
    Body(search): Body<SearchCrons>,
) -> Result<Json<usize>, ApiError> {
    let mut total = 0;
    loop {
        let page = find(&state, &caller, &search, 1000, total as i64).await?;
        total += page.len();
        if page.len() < 1000 {
            return Ok(Json(total));
        }
    }
}

/// `DELETE /runs/crons/{cron_id}`.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(cron_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let not_found = || ApiError::new(StatusCode::NOT_FOUND, "cron not found");
    let id = Uuid::parse_str(&cron_id).map_err(|_| not_found())?;
    if cron::delete(state.pool(), id, &caller.subject)
        .await
        .map_err(cron_error)?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_found())
    }
}
