//! Scheduled runs, as the `langgraph-sdk`'s `client.crons` speaks them: create (on a thread, or
//! stateless: each run on a new thread of the creator), get, update, search, count, delete. The
//! workers execute them (`queue::data::cron::tick`). A caller sees, changes and deletes only their own
//! crons; another's is a 404, like one that does not exist.
//!
//! Schedules are five-field cron expressions, read in UTC or in the IANA `timezone` a cron names.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use mostrador_queue::data::cron::{self, Cron, NewCron, RunTemplate};
use mostrador_queue::run::MultitaskStrategy;
use mostrador_queue::{Error as QueueError, ThreadId};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::app::AppState;
use crate::assistants::Assistant;
use crate::assistants::owner_scope;
use crate::auth::Caller;
use crate::authorize::{grant, writable_thread_for};
use crate::custom_auth::Event;
use crate::custom_auth::event::{CronsCreate, CronsSearch, CronsUpdate, OnCron};
use crate::error::ApiError;
use crate::extract::Body;
use crate::openapi::fields;
use crate::runs::queue_error;
use crate::wire;

/// The body of `POST /runs/crons` and `POST /threads/{thread_id}/runs/crons`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = CronRequest)]
pub struct CreateCron {
    /// An assistant id or a graph id.
    #[schema(value_type = String, required = true)]
    assistant_id: Option<String>,
    /// Five fields, read in `timezone`.
    #[schema(value_type = String, required = true, example = "*/5 * * * *")]
    schedule: Option<String>,
    #[schema(value_type = Option<Object>)]
    input: Option<Value>,
    #[schema(value_type = Option<Object>)]
    config: Option<Map<String, Value>>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Map<String, Value>>,
    /// What the runs' graph reads as `runtime.context` (`config.configurable` when absent).
    #[schema(value_type = Option<Object>)]
    context: Option<Value>,
    end_time: Option<DateTime<Utc>>,
    enabled: Option<bool>,
    /// IANA (Europe/Madrid); null: UTC.
    #[schema(example = "Europe/Madrid")]
    timezone: Option<String>,
    #[schema(schema_with = fields::stream_modes)]
    stream_mode: Option<crate::runs::accept::StreamModes>,
    #[schema(schema_with = fields::multitask_strategy)]
    multitask_strategy: Option<String>,
    #[schema(schema_with = fields::on_run_completed)]
    on_run_completed: Option<String>,
    #[schema(schema_with = fields::webhook)]
    webhook: Option<String>,
    #[schema(schema_with = fields::unsupported)]
    interrupt_before: Option<Value>,
    #[schema(schema_with = fields::unsupported)]
    interrupt_after: Option<Value>,
}

/// `POST /runs/crons`: each run on a new thread of the caller.
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<CreateCron>,
) -> Result<Json<wire::Cron>, ApiError> {
    let new = new_cron(&state, &caller, body, None).await?;
    let cron = cron::create(state.pool(), &new, state.max_crons_per_caller())
        .await
        .map_err(cron_error)?;
    Ok(Json(cron_answer(&cron)))
}

/// `POST /threads/{thread_id}/runs/crons`: every run on this thread.
pub async fn create_for_thread(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    Body(body): Body<CreateCron>,
) -> Result<Json<wire::Cron>, ApiError> {
    let thread = writable_thread_for(&state, &caller, &thread_id, "read").await?;
    let new = new_cron(&state, &caller, body, Some(thread.thread_id)).await?;
    if thread
        .graph_id
        .as_ref()
        .is_some_and(|graph_id| *graph_id != new.graph_id)
    {
        return Err(ApiError::conflict(format!(
            "the thread belongs to graph {:?}",
            thread.graph_id.unwrap_or_default()
        )));
    }
    let cron = cron::create(state.pool(), &new, state.max_crons_per_caller())
        .await
        .map_err(cron_error)?;
    Ok(Json(cron_answer(&cron)))
}

async fn new_cron(
    state: &AppState,
    caller: &Caller,
    body: CreateCron,
    thread_id: Option<ThreadId>,
) -> Result<NewCron, ApiError> {
    let completed = on_run_completed(body.on_run_completed.as_deref())?;
    let requested = Requested {
        input: body.input,
        config: body.config,
        context: body.context,
        stream_mode: body.stream_mode,
        webhook: body.webhook,
        interrupt_before: body.interrupt_before,
        interrupt_after: body.interrupt_after,
    };
    let assistant_id = body
        .assistant_id
        .as_deref()
        .ok_or_else(|| ApiError::unprocessable("assistant_id is required"))?;
    let assistant = crate::assistants::runnable(state, caller, assistant_id).await?;
    let mut payload = requested.template(state, caller)?;
    if assistant.assistant_id != Assistant::for_graph(&assistant.graph_id).assistant_id {
        // One the caller created: each run takes its config as it is then (`queue::data::cron`).
        payload.assistant_id = Some(assistant.assistant_id);
    }
    crate::authorize::may_schedule(state, caller, &assistant.graph_id)?;
    let schedule = body
        .schedule
        .ok_or_else(|| ApiError::unprocessable("schedule is required"))?;
    cron::zone(body.timezone.as_deref()).map_err(ApiError::unprocessable)?;
    let strategy = match body.multitask_strategy.as_deref() {
        None => None,
        Some(name) => Some(MultitaskStrategy::from_name(name).ok_or_else(|| {
            ApiError::unprocessable(
                "multitask_strategy must be reject, enqueue, interrupt or rollback",
            )
        })?),
    };
    // The project's handler may stamp the metadata (an owner, say), as officially.
    let granted = grant(
        state,
        caller,
        &CronsCreate {
            payload: payload.to_value(),
            schedule: &schedule,
            cron_id: None,
            thread_id: thread_id.map(|id| id.0),
            user_id: &caller.subject,
            end_time: body.end_time,
            metadata: body.metadata.clone().unwrap_or_default(),
        },
    )
    .await?;
    let metadata = crate::threads::granted_metadata(granted.value, body.metadata)?;
    payload.metadata = Some(metadata.clone());
    payload.multitask_strategy = strategy;
    Ok(NewCron {
        graph_id: assistant.graph_id.clone(),
        thread_id,
        owner: caller.subject.clone(),
        tenant: caller.tenant.clone(),
        schedule,
        timezone: body.timezone,
        payload,
        metadata: Value::Object(metadata),
        enabled: body.enabled.unwrap_or(true),
        end_time: body.end_time,
        on_run_completed: completed.unwrap_or_else(|| "delete".to_owned()),
        api_key: caller.api_key,
    })
}

/// What becomes of a stateless cron's thread when its run ends (`on_run_completed`): `delete`
/// (the official default) or `keep`; a cron on a thread keeps its thread whatever this says.
fn on_run_completed(given: Option<&str>) -> Result<Option<String>, ApiError> {
    match given {
        None => Ok(None),
        Some(what @ ("delete" | "keep")) => Ok(Some(what.to_owned())),
        Some(_) => Err(ApiError::unprocessable(
            "on_run_completed must be delete or keep",
        )),
    }
}

/// What a cron's runs are made of, as a create or an update names it.
struct Requested {
    input: Option<Value>,
    config: Option<Map<String, Value>>,
    context: Option<Value>,
    stream_mode: Option<crate::runs::accept::StreamModes>,
    webhook: Option<String>,
    interrupt_before: Option<Value>,
    interrupt_after: Option<Value>,
}

impl Requested {
    /// The template's parts it sets (`input`, `config`, `context`, `stream_mode`, `webhook`); a
    /// `config` acts for `caller`.
    fn template(self, state: &AppState, caller: &Caller) -> Result<RunTemplate, ApiError> {
        let unsupported =
            |what: &str| ApiError::unprocessable(format!("{what} is not supported on crons"));
        if self.interrupt_before.is_some() || self.interrupt_after.is_some() {
            return Err(unsupported("interrupt_before/interrupt_after"));
        }
        let context = match self.context {
            None | Some(Value::Null) => None,
            Some(Value::Object(context)) => Some(context),
            Some(_) => return Err(ApiError::unprocessable("context must be an object")),
        };
        let mut template = RunTemplate {
            webhook: crate::webhooks::checked(state, self.webhook)?,
            ..RunTemplate::default()
        };
        if let Some(input) = self.input {
            if !(input.is_object() || input.is_null()) {
                return Err(ApiError::unprocessable("input must be an object"));
            }
            template.input = Some(input);
        }
        // The runs' context as a run's is read (`context`, or `config.configurable`), kept when
        // the template names one; a cron's runs act for the caller who made it.
        let config = self.config.map(Value::Object);
        let names_context = context.is_some()
            || config
                .as_ref()
                .is_some_and(|config| config.get("configurable").is_some());
        let own = crate::runs::config::own_context(context.as_ref(), config.as_ref());
        let config = crate::runs::config::run_config(config, context, None)?;
        // Held to a run's limits: each run it makes takes this config.
        let mut config = crate::runs::config::typed(config, state.max_recursion_limit())?;
        if names_context {
            template.context = Some(own);
        }
        crate::runs::config::acting_for(&mut config.configurable, caller);
        template.config = Some(config);
        if let Some(modes) = &self.stream_mode {
            template.stream_mode = Some(modes.parse()?);
        }
        Ok(template)
    }
}

/// The body of `PATCH /runs/crons/{cron_id}`: what changes.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = CronPatch, min_properties = 1)]
pub struct PatchCron {
    #[schema(example = "0 9 * * mon-fri")]
    schedule: Option<String>,
    #[schema(example = "Europe/Madrid")]
    timezone: Option<String>,
    /// `null` clears the end time; absent leaves it.
    #[serde(deserialize_with = "present")]
    #[schema(value_type = Option<DateTime<Utc>>)]
    end_time: Option<Option<DateTime<Utc>>>,
    #[schema(value_type = Option<Object>)]
    input: Option<Value>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Map<String, Value>>,
    #[schema(value_type = Option<Object>)]
    config: Option<Map<String, Value>>,
    /// What the runs' graph reads as `runtime.context` (`config.configurable` when absent).
    #[schema(value_type = Option<Object>)]
    context: Option<Value>,
    enabled: Option<bool>,
    #[schema(schema_with = fields::stream_modes)]
    stream_mode: Option<crate::runs::accept::StreamModes>,
    #[schema(schema_with = fields::on_run_completed)]
    on_run_completed: Option<String>,
    #[schema(schema_with = fields::webhook)]
    webhook: Option<String>,
    #[schema(schema_with = fields::unsupported)]
    interrupt_before: Option<Value>,
    #[schema(schema_with = fields::unsupported)]
    interrupt_after: Option<Value>,
}

/// A field that is present, `null` included.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// `GET /runs/crons/{cron_id}`.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(cron_id): Path<String>,
) -> Result<Json<wire::Cron>, ApiError> {
    let id = Uuid::parse_str(&cron_id).map_err(|_| cron_not_found())?;
    let owner = reachable(
        &state,
        &caller,
        id,
        &OnCron {
            action: "read",
            cron_id: id,
        },
    )
    .await?;
    match cron::get(state.pool(), id, owner).await {
        Ok(Some(cron)) => Ok(Json(cron_answer(&cron))),
        Ok(None) => Err(cron_not_found()),
        Err(err) => Err(cron_error(err)),
    }
}

/// `PATCH /runs/crons/{cron_id}`: changes what the body names; the rest stays. The runs' payload
/// takes the keys given (their `config` acting for the caller), the metadata is merged, a new
/// schedule or time zone (or enabling it again) moves the next run. 400 for a body that changes
/// nothing, as the official server answers.
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(cron_id): Path<String>,
    Body(body): Body<Value>,
) -> Result<Json<wire::Cron>, ApiError> {
    let id = Uuid::parse_str(&cron_id).map_err(|_| cron_not_found())?;
    let Value::Object(body) = body else {
        return Err(ApiError::unprocessable("the body must be a JSON object"));
    };
    if body.is_empty() {
        return Err(ApiError::bad_request("Request body cannot be empty"));
    }
    let owner = reachable(
        &state,
        &caller,
        id,
        &CronsUpdate {
            cron_id: id,
            payload: &body,
            schedule: body.get("schedule"),
        },
    )
    .await?;
    let patch: PatchCron = serde_json::from_value(Value::Object(body))
        .map_err(|err| ApiError::unprocessable(err.to_string()))?;
    if let Some(timezone) = patch.timezone.as_deref() {
        cron::zone(Some(timezone)).map_err(ApiError::unprocessable)?;
    }
    let changes_config = patch.config.is_some() || patch.context.is_some();
    let completed = on_run_completed(patch.on_run_completed.as_deref())?;
    let requested = Requested {
        input: patch.input,
        config: patch.config,
        context: patch.context,
        stream_mode: patch.stream_mode,
        webhook: patch.webhook,
        interrupt_before: patch.interrupt_before,
        interrupt_after: patch.interrupt_after,
    };
    let mut payload = requested.template(&state, &caller)?;
    if !changes_config {
        // The stored config already acts for its maker.
        payload.config = None;
    }
    payload.metadata.clone_from(&patch.metadata);
    let change = cron::CronUpdate {
        schedule: patch.schedule,
        timezone: patch.timezone,
        end_time: patch.end_time,
        enabled: patch.enabled,
        payload,
        metadata: patch.metadata.unwrap_or_default(),
        on_run_completed: completed,
    };
    if change == cron::CronUpdate::default() {
        return Err(ApiError::bad_request("No fields to update"));
    }
    match cron::update(state.pool(), id, owner, caller.api_key, &change).await {
        Ok(Some(cron)) => Ok(Json(cron_answer(&cron))),
        Ok(None) => Err(cron_not_found()),
        Err(err) => Err(cron_error(err)),
    }
}

/// Whose cron `id` the statements reach: the caller's own, or, under a project's auth handlers
/// (`auth.path`), anyone's that its `action` handler allows and whose metadata passes its filter.
///
/// # Errors
///
/// The handler's refusal, or the 404 of a cron it hides.
async fn reachable<'a>(
    state: &AppState,
    caller: &'a Caller,
    id: Uuid,
    event: &impl Event,
) -> Result<Option<&'a str>, ApiError> {
    if state.custom_auth().is_none() {
        return Ok(Some(&caller.subject));
    }
    let granted = grant(state, caller, event).await?;
    match cron::get(state.pool(), id, None).await {
        Ok(Some(cron)) if granted.admits(&cron.metadata) => Ok(None),
        Ok(_) => Err(cron_not_found()),
        Err(err) => Err(cron_error(err)),
    }
}

fn cron_not_found() -> ApiError {
    ApiError::not_found("cron not found")
}

fn cron_error(err: QueueError) -> ApiError {
    match err {
        QueueError::Invalid { field, reason } => {
            ApiError::unprocessable(format!("{field}: {reason}"))
        }
        other => queue_error(other),
    }
}

/// A cron as the `langgraph-sdk` reads it.
fn cron_answer(cron: &Cron) -> wire::Cron {
    let mut payload = cron.payload.clone();
    payload["schedule"] = json!(cron.schedule);
    let assistant_id = match payload.get("assistant_id") {
        Some(configured) if configured.is_string() => configured.clone(),
        _ => {
            payload["assistant_id"] = json!(cron.graph_id);
            json!(Assistant::for_graph(&cron.graph_id).assistant_id)
        }
    };
    wire::Cron {
        cron_id: cron.cron_id,
        assistant_id,
        thread_id: cron.thread_id,
        user_id: cron.owner.clone(),
        schedule: cron.schedule.clone(),
        timezone: cron.timezone.clone(),
        payload,
        metadata: cron.metadata.clone(),
        enabled: cron.enabled,
        end_time: cron.end_time,
        next_run_date: cron.enabled.then_some(cron.next_run_at),
        on_run_completed: cron.on_run_completed.clone(),
        created_at: cron.created_at,
        updated_at: cron.updated_at,
    }
}

/// The body of `POST /runs/crons/search` and `/count`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = CronSearch)]
pub struct SearchCrons {
    assistant_id: Option<String>,
    thread_id: Option<String>,
    enabled: Option<bool>,
    /// Crons whose metadata contains these keys and values.
    #[schema(value_type = Option<Object>)]
    metadata: Option<Map<String, Value>>,
    #[schema(minimum = 1, maximum = 1000, default = 10)]
    limit: i64,
    #[schema(minimum = 0, default = 0)]
    offset: i64,
    #[schema(schema_with = fields::unsupported)]
    sort_by: Option<String>,
    #[schema(schema_with = fields::unsupported)]
    sort_order: Option<String>,
    #[schema(schema_with = fields::unsupported)]
    select: Option<Value>,
}

impl Default for SearchCrons {
    fn default() -> Self {
        Self {
            assistant_id: None,
            thread_id: None,
            enabled: None,
            metadata: None,
            limit: 10,
            offset: 0,
            sort_by: None,
            sort_order: None,
            select: None,
        }
    }
}

/// What `search` asks of the caller's crons; `None` when nothing can match (an assistant or a
/// thread that is not one of theirs).
async fn filter_of(
    state: &AppState,
    caller: &Caller,
    search: &SearchCrons,
) -> Result<Option<cron::CronFilter>, ApiError> {
    if search.select.is_some() || search.sort_by.is_some() || search.sort_order.is_some() {
        return Err(ApiError::unprocessable(
            "select, sort_by and sort_order are not supported: crons come oldest first",
        ));
    }
    let assistant = match search.assistant_id.as_deref() {
        None => None,
        Some(id) => match crate::assistants::runnable(state, caller, id).await {
            Ok(assistant) => Some(assistant),
            // No such assistant (or another caller's): no crons of it.
            Err(err) if err.status == StatusCode::NOT_FOUND => return Ok(None),
            Err(err) => return Err(err),
        },
    };
    let of = assistant.map(|assistant| {
        if assistant.assistant_id == Assistant::for_graph(&assistant.graph_id).assistant_id {
            cron::OfAssistant::Graph(assistant.graph_id)
        } else {
            cron::OfAssistant::Created(assistant.assistant_id)
        }
    });
    let thread_id = match search.thread_id.as_deref() {
        None => None,
        Some(id) => match Uuid::parse_str(id) {
            Ok(id) => Some(id),
            Err(_) => return Ok(None),
        },
    };
    let granted = grant(
        state,
        caller,
        &CronsSearch {
            assistant_id: search.assistant_id.as_deref(),
            thread_id: search.thread_id.as_deref(),
            limit: search.limit,
            offset: search.offset,
        },
    )
    .await?;
    Ok(Some(cron::CronFilter {
        assistant: of,
        thread_id,
        enabled: search.enabled,
        auth_filter: granted.filter_json(),
        metadata: search
            .metadata
            .clone()
            .filter(|metadata| !metadata.is_empty())
            .map(Value::Object),
    }))
}

/// The caller's crons that `search` finds, oldest first.
async fn find(
    state: &AppState,
    caller: &Caller,
    search: &SearchCrons,
    limit: i64,
    offset: i64,
) -> Result<Vec<Cron>, ApiError> {
    let Some(filter) = filter_of(state, caller, search).await? else {
        return Ok(Vec::new());
    };
    cron::search(
        state.pool(),
        owner_scope(state, caller),
        &filter,
        limit,
        offset,
    )
    .await
    .map_err(cron_error)
}

/// `POST /runs/crons/search`: the caller's crons, oldest first, with the official pagination
/// headers (one more is read to tell whether another page follows).
pub async fn search(
    State(state): State<AppState>,
    caller: Caller,
    Body(search): Body<SearchCrons>,
) -> Result<(axum::http::HeaderMap, Json<Vec<wire::Cron>>), ApiError> {
    if !(1..=1000).contains(&search.limit) {
        return Err(ApiError::unprocessable("limit must be from 1 to 1000"));
    }
    let mut crons = find(
        &state,
        &caller,
        &search,
        (search.limit + 1).min(1000),
        search.offset,
    )
    .await?;
    let limit = usize::try_from(search.limit).unwrap_or(usize::MAX);
    let more = crons.len() > limit;
    crons.truncate(limit);
    let headers = wire::pagination(search.offset, crons.len(), more);
    Ok((headers, Json(crons.iter().map(cron_answer).collect())))
}

/// `POST /runs/crons/count`.
pub async fn count(
    State(state): State<AppState>,
    caller: Caller,
    Body(search): Body<SearchCrons>,
) -> Result<Json<usize>, ApiError> {
    let Some(filter) = filter_of(&state, &caller, &search).await? else {
        return Ok(Json(0));
    };
    let count = cron::count(state.pool(), owner_scope(&state, &caller), &filter)
        .await
        .map_err(cron_error)?;
    Ok(Json(usize::try_from(count).unwrap_or_default()))
}

/// `DELETE /runs/crons/{cron_id}`.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(cron_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = Uuid::parse_str(&cron_id).map_err(|_| cron_not_found())?;
    let owner = reachable(
        &state,
        &caller,
        id,
        &OnCron {
            action: "delete",
            cron_id: id,
        },
    )
    .await?;
    if cron::delete(state.pool(), id, owner)
        .await
        .map_err(cron_error)?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(cron_not_found())
    }
}
