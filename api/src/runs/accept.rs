//! A run request: validated, authorized, and enqueued on its thread or on a new one.

use std::time::Duration;

use axum::http::StatusCode;
use mostrador_graph::{Breakpoints, Durability, Graph, StreamMode};
use mostrador_queue::data::assistants::context_under;
use mostrador_queue::listener::RunSubscription;
use mostrador_queue::run::{self, MultitaskStrategy, NewRun, RunId};
use mostrador_queue::thread::NewThread;
use mostrador_queue::{Error as QueueError, Run, Thread, ThreadId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use super::config::{acting_for, own_context, run_config, typed, under};
use super::queue_error;
use super::rust::{known_node, rust_checkpoint_exists, rust_command, rust_head, rust_thread_waits};
use crate::app::AppState;
use crate::assistants::Assistant;
use crate::auth::Caller;
use crate::authorize::{
    grant, may_decide, may_start, may_write, visible_thread, visible_thread_granted,
};
use crate::custom_auth::Grant;
use crate::custom_auth::event::{RunKwargs, RunsCreate};
use crate::error::ApiError;
use crate::openapi::fields;
use crate::stream::{self, Start};

/// One stream mode or a list of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum StreamModes {
    One(String),
    Many(Vec<String>),
}

impl StreamModes {
    fn names(&self) -> Vec<&str> {
        match self {
            StreamModes::One(name) => vec![name.as_str()],
            StreamModes::Many(names) => names.iter().map(String::as_str).collect(),
        }
    }

    /// The engine's modes. `messages-tuple` is the engine's `messages`.
    pub(crate) fn parse(&self) -> Result<Vec<StreamMode>, ApiError> {
        let mut modes = Vec::new();
        for name in self.names() {
            let mode = match name {
                "messages-tuple" => StreamMode::Messages,
                other => StreamMode::from_name(other).ok_or_else(|| {
                    ApiError::unprocessable(format!(
                        "stream_mode {other:?} is not supported: use values, updates, messages, \
                         messages-tuple, custom, tasks, checkpoints, debug or events"
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

/// `resume`, on a thread that waits for a decision (by those the policy lets decide); `goto` and
/// `update` for Python graphs only (422 otherwise).
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub struct RunCommand {
    #[schema(value_type = Value)]
    resume: Option<Value>,
    #[schema(value_type = Value)]
    goto: Option<Value>,
    #[schema(value_type = Value)]
    update: Option<Value>,
}

/// What a run on a thread that does not exist does: is refused with a 404 (`reject`, the
/// default) or creates it (`create`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum IfNotExists {
    Reject,
    Create,
}

/// What happens to a stateless run's thread when the run ends: deleted (`delete`, the default)
/// or kept (`keep`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnCompletion {
    Delete,
    Keep,
}

/// The body of `POST /threads/{thread_id}/runs` (and of its `stream` and `wait` forms).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = RunRequest)]
pub struct CreateRun {
    /// An assistant id or a graph id.
    #[schema(value_type = String, required = true)]
    assistant_id: Option<String>,
    #[schema(value_type = Value)]
    input: Option<Value>,
    #[schema(inline)]
    command: Option<RunCommand>,
    #[schema(schema_with = fields::stream_modes)]
    stream_mode: Option<StreamModes>,
    /// Namespaced events (`mode|<node>:<task id>`) from subgraphs.
    stream_subgraphs: Option<bool>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Map<String, Value>>,
    #[schema(schema_with = fields::run_config)]
    config: Option<Value>,
    /// `config.configurable`, when config has none (400 with both).
    #[schema(value_type = Option<Object>)]
    context: Option<Map<String, Value>>,
    /// Start from this checkpoint of the thread (Python graphs; 422 for the others when it
    /// names one).
    #[schema(schema_with = fields::checkpoint)]
    checkpoint: Option<CheckpointRef>,
    /// The same, by id.
    checkpoint_id: Option<Uuid>,
    #[schema(schema_with = fields::interrupt_nodes)]
    interrupt_before: Option<Breakpoints>,
    #[schema(schema_with = fields::interrupt_nodes)]
    interrupt_after: Option<Breakpoints>,
    #[schema(schema_with = fields::webhook)]
    webhook: Option<String>,
    #[schema(schema_with = fields::multitask_strategy)]
    multitask_strategy: Option<MultitaskStrategy>,
    if_not_exists: Option<IfNotExists>,
    on_completion: Option<OnCompletion>,
    on_disconnect: Option<stream::OnDisconnect>,
    #[schema(minimum = 0)]
    after_seconds: Option<f64>,
    #[schema(schema_with = fields::durability)]
    durability: Option<Durability>,
    /// The request's headers a run's `configurable` gets (`http.configurable_headers`).
    #[serde(skip)]
    #[schema(ignore)]
    pub(crate) headers: Map<String, Value>,
}

impl CreateRun {
    /// A run of `assistant_id` on `input` with `context`, as a protocol served over the api's own
    /// calls (MCP, A2A) asks for one.
    pub(crate) fn of(
        assistant_id: String,
        input: Option<Value>,
        context: Option<Map<String, Value>>,
    ) -> Self {
        Self {
            assistant_id: Some(assistant_id),
            input,
            context,
            ..Self::default()
        }
    }

    /// The same run, with `command` and `metadata`, on a thread it creates if need be (A2A's
    /// conversation). A `command` that is no command is the body's 422.
    pub(crate) fn creating_thread(
        self,
        command: Option<Value>,
        metadata: Map<String, Value>,
    ) -> Result<Self, ApiError> {
        let command = command
            .map(serde_json::from_value)
            .transpose()
            .map_err(|err| ApiError::unprocessable(format!("command: {err}")))?;
        Ok(Self {
            command,
            metadata: Some(metadata),
            if_not_exists: Some(IfNotExists::Create),
            ..self
        })
    }

    /// A run the thread-centric stream protocol asks for (`run.start`, `input.respond`), as the
    /// official server creates it: on a thread created if need be, kept after it ends, its
    /// subgraphs' events included, and marked (`configurable.__event_streaming_v2`) so its
    /// runner stores the protocol's events. `config.configurable.checkpoint_id` is where it
    /// starts. A `config` or `command` that is none is the body's 422.
    pub(crate) fn for_thread_stream(
        assistant_id: String,
        input: Option<Value>,
        command: Option<Value>,
        config: Option<Value>,
        metadata: Option<Map<String, Value>>,
        multitask_strategy: Option<MultitaskStrategy>,
    ) -> Result<Self, ApiError> {
        let mut config = match config {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(config)) => config,
            Some(_) => return Err(ApiError::unprocessable("config must be an object")),
        };
        let configurable = config
            .entry("configurable")
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(configurable) = configurable else {
            return Err(ApiError::unprocessable(
                "config.configurable must be an object",
            ));
        };
        let checkpoint_id = configurable
            .remove("checkpoint_id")
            .map(serde_json::from_value::<Uuid>)
            .transpose()
            .map_err(|err| {
                ApiError::unprocessable(format!("config.configurable.checkpoint_id: {err}"))
            })?;
        configurable.insert(stream::protocol::MARKER.into(), Value::Bool(true));
        let command = command
            .map(serde_json::from_value)
            .transpose()
            .map_err(|err| ApiError::unprocessable(format!("command: {err}")))?;
        Ok(Self {
            assistant_id: Some(assistant_id),
            input,
            command,
            config: Some(Value::Object(config)),
            metadata,
            checkpoint_id,
            multitask_strategy,
            if_not_exists: Some(IfNotExists::Create),
            on_completion: Some(OnCompletion::Keep),
            stream_subgraphs: Some(true),
            stream_mode: Some(StreamModes::Many(
                [
                    "values",
                    "updates",
                    "messages",
                    "custom",
                    "tasks",
                    "checkpoints",
                ]
                .map(String::from)
                .into(),
            )),
            ..Self::default()
        })
    }

    /// The same run, its events stored in these modes (for a follower of them).
    pub(crate) fn streaming(self, modes: &[&str]) -> Self {
        Self {
            stream_mode: Some(StreamModes::Many(
                modes.iter().map(|mode| (*mode).to_owned()).collect(),
            )),
            ..self
        }
    }

    /// The same run, due after `seconds`.
    pub(crate) fn after(self, seconds: f64) -> Self {
        Self {
            after_seconds: Some(seconds),
            ..self
        }
    }

    /// Whether it answers an interrupt (`command.resume`).
    pub(super) fn resumes(&self) -> bool {
        self.command.as_ref().is_some_and(|c| c.resume.is_some())
    }

    /// Whether a stateless run's thread goes when the run ends (`on_completion`, `delete` by
    /// default).
    pub(super) fn deletes_on_completion(&self) -> bool {
        self.on_completion != Some(OnCompletion::Keep)
    }

    /// What the client's going away does to the run it streams or waits for.
    pub fn on_disconnect(&self) -> stream::OnDisconnect {
        self.on_disconnect.unwrap_or_default()
    }

    /// The form of `messages` events the client asked for.
    pub fn messages_form(&self) -> stream::Messages {
        self.stream_mode
            .as_ref()
            .map_or(stream::Messages::Tuple, |modes| {
                stream::Messages::asked(modes.names().into_iter())
            })
    }
}

/// A checkpoint of the thread, as the SDKs name one (RemoteGraph sends the thread's whole config).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CheckpointRef {
    checkpoint_id: Option<Uuid>,
    checkpoint_ns: Option<String>,
}

/// A validated run request.
#[derive(Debug)]
pub struct Accepted {
    pub thread: Thread,
    pub assistant: Assistant,
    pub run: Run,
    /// Its events, subscribed to before it was enqueued when the request follows it: a follower
    /// of them reads no log first.
    pub events: Option<RunSubscription>,
}

impl Accepted {
    /// Where a follower of the run's events starts.
    pub fn start(&mut self) -> Start {
        self.events.take().map_or(Start::After(0), Start::New)
    }
}

/// What the request that creates a run does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// Nothing: a background run.
    No,
    /// Waits for its end.
    Waits,
    /// Streams its events as they come.
    Streams,
}

/// Validates, authorizes and enqueues a run on a thread; `follow` says what the request does
/// with the run it creates.
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
    mut body: CreateRun,
    follow: Follow,
) -> Result<Accepted, ApiError> {
    let create = body.if_not_exists == Some(IfNotExists::Create);
    let found = match run_grant(state, caller, Some(thread_id), &mut body).await? {
        Some(grant) => visible_thread_granted(state, thread_id, &grant).await,
        None => visible_thread(state, caller, thread_id).await,
    };
    let thread = match found {
        Ok(thread) => Some(thread),
        // `if_not_exists: create` (RemoteGraph, client-chosen ids): the caller's new thread.
        Err(err) if create && err.status == StatusCode::NOT_FOUND => None,
        Err(err) => return Err(err),
    };
    // After the thread: another's thread is missing, whatever the caller's share.
    state.within_share(caller)?;
    let assistant = resolve_assistant(state, caller, &body).await?;
    let python = state.is_python(&assistant.graph_id);
    let Some(thread) = thread else {
        let thread_id = Uuid::parse_str(thread_id).map_err(|_| ApiError::thread_not_found())?;
        let new = new_run(
            state,
            caller,
            ThreadId(thread_id),
            &assistant,
            body,
            rust_graph(state, python, &assistant),
            None,
        )?;
        if resumes(&new) {
            return Err(nothing_to_resume());
        }
        return create_and_enqueue(state, caller, assistant, new, follow).await;
    };
    let names_one = body.checkpoint_id.is_some() || body.checkpoint.is_some();
    let head = rust_head(state, &thread, python, names_one).await?;
    // The run's metadata holds its thread's, under the request's, as officially.
    if let Value::Object(thread_metadata) = &thread.metadata {
        let mut metadata = thread_metadata.clone();
        metadata.extend(body.metadata.take().unwrap_or_default());
        body.metadata = Some(metadata);
    }
    let mut new = new_run(
        state,
        caller,
        thread.thread_id,
        &assistant,
        body,
        rust_graph(state, python, &assistant),
        head,
    )?;
    // A thread of one Python graph runs another, as on the official server: LangGraph reads the
    // thread's checkpoints whichever graph wrote them. A Rust graph's thread stays its graph's.
    new.rebinds = python
        && thread
            .graph_id
            .as_deref()
            .is_some_and(|graph_id| state.is_python(graph_id));
    let named = new.config.checkpoint_id;
    if !python && let Some(checkpoint_id) = named {
        rust_checkpoint_exists(state, &thread, checkpoint_id).await?;
    }
    // Where the thread is, read when the run answers it or names a checkpoint: whether it waits
    // for an answer, and its latest checkpoint (a Rust graph's run names one only when it is not
    // its head: `new_run`).
    let (latest, waits) = if new.command.is_none() && named.is_none() {
        (None, false)
    } else if python {
        crate::state::python_position(state, &thread, named).await?
    } else {
        (head, rust_thread_waits(state, &thread).await?)
    };
    // Answering the thread's interrupts is the graph's rule (`may_decide`); any other run on it,
    // its owner's.
    let mut answers = false;
    if new.command.is_some() {
        if resumes(&new) {
            may_decide(state, caller, &thread, &assistant.graph_id)?;
        }
        match (resumes(&new), waits) {
            (true, false) => return Err(nothing_to_resume()),
            // A `goto` or `update` that changes a thread waiting for an answer answers it.
            (false, true) => may_decide(state, caller, &thread, &assistant.graph_id)?,
            _ => {}
        }
        answers = resumes(&new) || waits;
    }
    // Whoever answers the thread answers it where it waits: only its owner takes it back to a
    // past checkpoint (a decider would rewrite its history).
    if !answers || !crate::state::from_latest(named, latest) {
        may_write(caller, &thread)?;
    }
    let (new, events) = subscribed(state, new, follow);
    let enqueued = run::enqueue(state.pool(), &new, Some(state.queue_limit())).await;
    let run = enqueued.map_err(|err| refused(state, caller, err))?.run;
    state.metrics().runs_created.inc();
    Ok(Accepted {
        thread,
        assistant,
        run,
        events,
    })
}

/// The run `new` will be, and, when the request follows it, its events subscribed to before it
/// is enqueued, with an id chosen here. (A subscription holds a channel: none for a run nobody
/// follows.) A streamed run's worker writes its first event at once.
pub(super) fn subscribed(
    state: &AppState,
    new: NewRun,
    follow: Follow,
) -> (NewRun, Option<RunSubscription>) {
    if follow == Follow::No {
        return (new, None);
    }
    let run_id = RunId(Uuid::now_v7());
    let events = state.listener().subscribe_run(run_id);
    let new = NewRun {
        run_id: Some(run_id),
        streamed: follow == Follow::Streams,
        ..new
    };
    (new, Some(events))
}

/// Whether the run answers an interrupt (`command.resume`).
fn resumes(new: &NewRun) -> bool {
    new.command
        .as_ref()
        .is_some_and(|command| command.resume.as_ref().is_some_and(|r| !r.is_null()))
}

/// The graph of a Rust assistant, for checking what a run names of it.
pub(super) fn rust_graph<'a>(
    state: &'a AppState,
    python: bool,
    assistant: &Assistant,
) -> Option<&'a Graph> {
    (!python)
        .then(|| state.graph(&assistant.graph_id))
        .flatten()
}

fn nothing_to_resume() -> ApiError {
    ApiError::conflict("the thread is not waiting for a decision: there is nothing to resume")
}

pub(crate) fn refused(state: &AppState, caller: &Caller, err: QueueError) -> ApiError {
    match &err {
        QueueError::Backpressure { .. } => {
            state.metrics().backpressure_rejections.inc();
        }
        QueueError::CallerShare { .. } => state.over_share(caller),
        _ => {}
    }
    queue_error(err)
}

/// What the project's `threads.create_run` handler makes of a run (`auth.path`; `None` without
/// the project's handlers): it may refuse it, stamp its metadata (which a thread the run creates
/// takes too, as officially) and filter the thread it runs on.
///
/// # Errors
///
/// The handler's refusal.
pub(super) async fn run_grant(
    state: &AppState,
    caller: &Caller,
    thread_id: Option<&str>,
    body: &mut CreateRun,
) -> Result<Option<Grant>, ApiError> {
    if state.custom_auth().is_none() {
        return Ok(None);
    }
    let granted = grant(
        state,
        caller,
        &RunsCreate {
            thread_id,
            assistant_id: body.assistant_id.as_deref(),
            run_id: None,
            status: "pending",
            metadata: body.metadata.clone().unwrap_or_default(),
            prevent_insert_if_inflight: true,
            multitask_strategy: body.multitask_strategy,
            if_not_exists: body.if_not_exists,
            after_seconds: body.after_seconds,
            kwargs: RunKwargs {
                input: body.input.as_ref(),
                command: body.command.as_ref(),
                config: body.config.as_ref(),
                context: body.context.as_ref(),
                webhook: body.webhook.as_deref(),
            },
        },
    )
    .await?;
    body.metadata = Some(crate::threads::granted_metadata(
        granted.value.clone(),
        body.metadata.take(),
    )?);
    Ok(Some(granted))
}

/// The metadata of a thread a run creates: under a project's auth handlers, the run's (which
/// their stamp is in), as officially; else none.
pub(super) fn new_thread_metadata(state: &AppState, run: &NewRun) -> Value {
    if state.custom_auth().is_some() {
        run.metadata.clone()
    } else {
        json!({})
    }
}

/// Creates the caller's thread with the id the client chose and enqueues its first run, together
/// or not at all: a run refused leaves no thread behind. An id a thread has already (whoever's)
/// is the same conflict.
async fn create_and_enqueue(
    state: &AppState,
    caller: &Caller,
    assistant: Assistant,
    new: NewRun,
    follow: Follow,
) -> Result<Accepted, ApiError> {
    let (new, events) = subscribed(state, new, follow);
    let owned = NewThread {
        graph_id: None,
        owner: caller.subject.clone(),
        tenant: caller.tenant.clone(),
        metadata: new_thread_metadata(state, &new),
        temporary: false,
        ttl: state.default_thread_ttl(),
        quota: state.thread_quota(),
    };
    let mut created =
        run::enqueue_on_new_threads(state.pool(), &[(owned, new)], Some(state.queue_limit()))
            .await
            .map_err(|err| refused(state, caller, err))?
            .ok_or_else(crate::threads::thread_taken)?;
    let (thread, enqueued) = created.pop().expect("one run");
    state.metrics().runs_created.inc();
    Ok(Accepted {
        thread,
        assistant,
        run: enqueued.run,
        events,
    })
}

/// The assistant a run names: a graph's own, or one the caller created.
pub(super) async fn resolve_assistant(
    state: &AppState,
    caller: &Caller,
    body: &CreateRun,
) -> Result<Assistant, ApiError> {
    let assistant_id = body
        .assistant_id
        .as_deref()
        .ok_or_else(|| ApiError::unprocessable("assistant_id is required"))?;
    if Uuid::parse_str(assistant_id).is_err() && state.assistant(assistant_id).is_none() {
        // As officially: an id that can name nothing is the request's fault.
        let graphs: Vec<&str> = state
            .assistants()
            .map(|assistant| assistant.graph_id.as_str())
            .collect();
        return Err(ApiError::unprocessable(format!(
            "Invalid assistant: '{assistant_id}'. Must be either:\n- A valid assistant UUID, or\n- \
             One of the registered graphs: {}",
            graphs.join(", ")
        )));
    }
    let assistant = crate::assistants::runnable(state, caller, assistant_id).await?;
    may_start(state, caller, &assistant.graph_id)?;
    Ok(assistant)
}

/// `rust`: the graph, when the Rust engine runs it (the nodes and channels a run names must be
/// its own); else LangGraph does, and says what it refuses. A run that names a past checkpoint
/// starts a new branch there; naming a Rust graph's latest checkpoint, `head`, is the same as
/// naming none.
pub(super) fn new_run(
    state: &AppState,
    caller: &Caller,
    thread_id: ThreadId,
    assistant: &Assistant,
    body: CreateRun,
    rust: Option<&Graph>,
    head: Option<Uuid>,
) -> Result<NewRun, ApiError> {
    let python = rust.is_none();
    let start_at = start_at(body.checkpoint_id, body.checkpoint.as_ref())?
        .filter(|checkpoint_id| python || Some(*checkpoint_id) != head);
    if start_at.is_some() && !python && body.command.is_some() {
        return Err(ApiError::unprocessable(
            "a resume goes on from the thread's latest checkpoint: name none",
        ));
    }
    let interrupt_before = breakpoints(body.interrupt_before, "interrupt_before", rust)?;
    let interrupt_after = breakpoints(body.interrupt_after, "interrupt_after", rust)?;
    let webhook = crate::webhooks::checked(state, body.webhook)?;
    let command = match (body.command, rust) {
        (None, _) => None,
        (Some(command), None) => Some(run::RunCommand {
            resume: command.resume,
            goto: command.goto,
            update: command.update,
            update_state: None,
        }),
        (Some(command), Some(graph)) => {
            rust_command(graph, command.resume, command.goto, command.update)?
        }
    };
    let multitask_strategy = body
        .multitask_strategy
        .unwrap_or(MultitaskStrategy::Enqueue);
    let after = match body.after_seconds {
        None => Duration::ZERO,
        Some(seconds) if seconds.is_finite() && seconds >= 0.0 => {
            Duration::try_from_secs_f64(seconds)
                .map_err(|_| ApiError::unprocessable("after_seconds is out of range"))?
        }
        Some(_) => {
            return Err(ApiError::unprocessable(
                "after_seconds must be a number of seconds ≥ 0",
            ));
        }
    };
    let stream_mode = match &body.stream_mode {
        None => vec![StreamMode::Values],
        Some(modes) => modes.parse()?,
    };
    if !python && stream_mode.contains(&StreamMode::Events) {
        return Err(ApiError::unprocessable(
            "stream_mode events is LangChain's callback events, which Python graphs emit; \
             the Rust engine has none",
        ));
    }
    let context = own_context(body.context.as_ref(), body.config.as_ref());
    let config = under(
        &assistant.config,
        run_config(body.config, body.context, body.durability)?,
    );
    let mut config = typed(config, state.max_recursion_limit())?;
    // The request headers the project copies (`http.configurable_headers`), as the official
    // server adds them: over the run's own keys, under the caller's.
    config.configurable.extend(body.headers);
    acting_for(&mut config.configurable, caller);
    config.context = context_under(&assistant.context, context);
    // The worker names a subgraph's events with its namespace for clients that ask.
    config.stream_subgraphs |= body.stream_subgraphs == Some(true);
    if let Some(nodes) = interrupt_before {
        config.interrupt_before = nodes;
    }
    if let Some(nodes) = interrupt_after {
        config.interrupt_after = nodes;
    }
    if start_at.is_some() {
        config.checkpoint_id = start_at;
    }
    // As the official server's: the assistant's metadata (`created_by: system` for a graph's
    // own), the request's over it (with its thread's: `accept`), and the graph and assistant it
    // ran on.
    let mut metadata = assistant.metadata.as_object().cloned().unwrap_or_default();
    metadata.extend(body.metadata.unwrap_or_default());
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
        trace_id: crate::trace::current(),
        webhook,
        ..NewRun::new(thread_id, assistant.graph_id.clone())
    })
}

/// The nodes a request's `interrupt_before` or `interrupt_after` names (`None`: it names none, or
/// null): those of `rust` when the Rust engine runs the graph.
fn breakpoints(
    breakpoints: Option<Breakpoints>,
    field: &str,
    rust: Option<&Graph>,
) -> Result<Option<Breakpoints>, ApiError> {
    let Some(breakpoints) = breakpoints.filter(|breakpoints| !breakpoints.is_none()) else {
        return Ok(None);
    };
    if let (Some(graph), Breakpoints::Nodes(nodes)) = (rust, &breakpoints) {
        for node in nodes {
            known_node(graph, node, field)?;
        }
    }
    Ok(Some(breakpoints))
}

/// The checkpoint a run starts from (regenerate, edit, time travel): `checkpoint_id`, or the
/// `checkpoint_id` of `checkpoint`, as the SDKs send them; `None` (the latest) when neither names
/// one, null included.
fn start_at(
    checkpoint_id: Option<Uuid>,
    checkpoint: Option<&CheckpointRef>,
) -> Result<Option<Uuid>, ApiError> {
    if checkpoint.is_some_and(|c| c.checkpoint_ns.as_deref().is_some_and(|ns| !ns.is_empty())) {
        return Err(ApiError::unprocessable(
            "a run starts from a checkpoint of the thread's root graph",
        ));
    }
    Ok(checkpoint_id.or_else(|| checkpoint.and_then(|c| c.checkpoint_id)))
}
