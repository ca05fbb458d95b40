//! A2A's methods over the api's own calls, with the caller's authorization: a message is a run
//! on its conversation's thread (created if need be), a task is read from its runs and its
//! thread, and a cancel is the run's.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use mostrador_queue::run::{self as queue_run};
use mostrador_queue::{CancelAction, Run, RunStatus};
use serde::Serialize;
use serde_json::{Map, Value};

use super::card::HISTORY_SCOPE_HEADER;
use super::task::{
    self, Artifact, ArtifactUpdate, Message, RunMessages, Scope, Status, StatusUpdate, Task,
    TaskState,
};
use super::{
    CONTENT_TYPE_NOT_SUPPORTED, Fault, Format, INTERNAL_ERROR, INVALID_PARAMS, Outcome, Reply,
    TASK_NOT_CANCELABLE, TASK_NOT_FOUND, UNSUPPORTED_OPERATION, written,
};
use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::Body;
use crate::runs::{CreateRun, Follow};

/// The longest history a client may ask for.
const MOST_HISTORY: u64 = 10;
/// The runs of a conversation a task is looked for among.
const MOST_RUNS: i64 = 1000;
/// The stream modes a streamed message's run stores: the answer's tokens and its states.
const STREAMED: [&str; 2] = ["messages", "values"];

/// One call of a method, by the caller, on the assistant of the route.
pub struct Call {
    pub state: AppState,
    pub caller: Caller,
    pub run_headers: Map<String, Value>,
    pub headers: HeaderMap,
    pub assistant_id: String,
}

/// A message, read and checked, as the run it makes.
struct Prepared {
    /// The conversation: the thread the run goes on (created if need be).
    context_id: String,
    /// The task it continues; none for a new task.
    task_id: Option<String>,
    body: CreateRun,
    /// The id a new task's first run is stamped with.
    start: Option<String>,
    /// Whether its input has messages.
    speaks: bool,
    /// Whether it resumes the task (a `command`).
    resumes: bool,
    tasks_by_start: HashMap<String, String>,
    history_length: Option<usize>,
    scope: Scope,
}

/// A task found by its id: its current run and state.
struct Found {
    task_id: String,
    context_id: String,
    run: Run,
    state: TaskState,
    tasks_by_start: HashMap<String, String>,
}

/// `historyLength`: none, or an integer from 0 to 10.
fn history_length(value: Option<&Value>) -> Result<Option<usize>, Fault> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_u64().is_some() => {
            let n = n.as_u64().unwrap_or_default();
            if n > MOST_HISTORY {
                Err(Fault::new(
                    INVALID_PARAMS,
                    format!("historyLength cannot exceed {MOST_HISTORY}"),
                ))
            } else {
                Ok(usize::try_from(n).ok())
            }
        }
        Some(_) => Err(Fault::new(
            INVALID_PARAMS,
            "historyLength must be a non-negative integer",
        )),
    }
}

/// Python's truth of a JSON value.
fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null | Value::Bool(false)) => false,
        Some(Value::String(text)) => !text.is_empty(),
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::Object(fields)) => !fields.is_empty(),
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::Bool(true)) => true,
    }
}

/// `(context_id, run_id)` of a task id: split at its first `:` (none: the run id alone).
fn parse_task_id(task_id: &str) -> (&str, &str) {
    task_id.split_once(':').unwrap_or(("", task_id))
}

fn a2a_of(metadata: &Value) -> &Value {
    &metadata["a2a"]
}

/// The id of the task a run is part of: the one it was stamped with, else its own.
fn task_of(context_id: &str, run: &Run) -> String {
    a2a_of(&run.metadata)["task_id"]
        .as_str()
        .filter(|id| !id.is_empty())
        .map_or_else(
            || task::task_id(context_id, &run.run_id.0.to_string()),
            str::to_owned,
        )
}

impl Call {
    /// `historyLength` and `historyScope`, as a call's options ask for them.
    fn history_asked(&self, options: &Map<String, Value>) -> Result<(Option<usize>, Scope), Fault> {
        Ok((
            history_length(options.get("historyLength"))?,
            self.scope(options.get("historyScope"))?,
        ))
    }

    fn scope(&self, asked: Option<&Value>) -> Result<Scope, Fault> {
        let header = self
            .headers
            .get(HISTORY_SCOPE_HEADER)
            .and_then(|value| value.to_str().ok());
        let asked = match asked {
            None | Some(Value::Null) => header.map(Value::from),
            Some(asked) => Some(asked.clone()),
        };
        match asked.as_ref().map(|asked| asked.as_str()) {
            None | Some(Some("context")) => Ok(Scope::Context),
            Some(Some("task")) => Ok(Scope::Task),
            Some(_) => Err(Fault::new(
                INVALID_PARAMS,
                "historyScope must be 'context' or 'task'",
            )),
        }
    }

    /// The route's assistant, if the caller may use it.
    pub(super) async fn assistant(
        &self,
    ) -> Result<Result<crate::assistants::Assistant, Fault>, ApiError> {
        if uuid::Uuid::parse_str(&self.assistant_id).is_err() {
            return Ok(Err(Fault::new(
                INVALID_PARAMS,
                format!(
                    "Failed to get assistant '{}': Invalid assistant ID: must be a UUID",
                    self.assistant_id
                ),
            )));
        }
        match crate::assistants::found(&self.state, &self.caller, &self.assistant_id).await {
            Ok(assistant) => Ok(Ok(assistant)),
            Err(err) if err.status == StatusCode::NOT_FOUND => Ok(Err(Fault::new(
                INVALID_PARAMS,
                format!("Assistant '{}' not found", self.assistant_id),
            ))),
            Err(err) if err.status.is_client_error() => Ok(Err(Fault::new(
                INVALID_PARAMS,
                format!(
                    "Failed to get assistant '{}': {}",
                    self.assistant_id, err.detail
                ),
            ))),
            Err(err) => Err(err),
        }
    }

    /// The graph's input schema (its state's when it has none), if it has one.
    pub(super) async fn input_schema(&self) -> Result<Option<Value>, ApiError> {
        let Json(schemas) = crate::assistants::schemas(
            State(self.state.clone()),
            self.caller.clone(),
            Path(self.assistant_id.clone()),
        )
        .await?;
        let schemas = schemas.schemas;
        Ok([schemas.input_schema, schemas.state_schema]
            .into_iter()
            .flatten()
            .find(truthy_schema))
    }

    /// The runs of a conversation, newest first, if the caller may see its thread.
    async fn runs(&self, context_id: &str) -> Result<Vec<Run>, ApiError> {
        let thread =
            crate::authorize::visible_thread(&self.state, &self.caller, context_id).await?;
        queue_run::list(self.state.pool(), thread.thread_id, None, MOST_RUNS, 0)
            .await
            .map_err(crate::runs::queue_error)
    }

    /// The tasks of a conversation's runs on this assistant, by the id their first run was
    /// stamped with.
    fn tasks_by_start(&self, context_id: &str, runs: &[Run]) -> HashMap<String, String> {
        runs.iter()
            .filter(|run| self.is_ours(run))
            .filter_map(|run| {
                let start = a2a_of(&run.metadata)["task_start_id"].as_str()?;
                Some((start.to_owned(), task_of(context_id, run)))
            })
            .collect()
    }

    fn is_ours(&self, run: &Run) -> bool {
        crate::runs::run_answer(run).assistant_id.as_str() == Some(self.assistant_id.as_str())
    }

    /// The thread's status, if the caller may see it.
    async fn thread_status(&self, context_id: &str) -> Result<&'static str, ApiError> {
        let Json(thread) = crate::threads::get(
            State(self.state.clone()),
            self.caller.clone(),
            Path(context_id.to_owned()),
        )
        .await?;
        Ok(thread.status)
    }

    /// The task `task_id` (in `context_id`, when given) of this assistant, as the caller sees it:
    /// none when there is no such task, or it is another's.
    async fn find(
        &self,
        task_id: &str,
        context_id: Option<&str>,
    ) -> Result<Option<Found>, ApiError> {
        let (parsed, run_id) = parse_task_id(task_id);
        if !parsed.is_empty() && context_id.is_some_and(|given| given != parsed) {
            return Ok(None);
        }
        let context_id = context_id.unwrap_or(parsed);
        if context_id.is_empty() {
            return Ok(None);
        }
        let unseen = |err: &ApiError| {
            matches!(
                err.status,
                StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND | StatusCode::UNPROCESSABLE_ENTITY
            )
        };
        let anchor =
            match crate::runs::visible_run(&self.state, &self.caller, context_id, run_id).await {
                Ok(run) => run,
                Err(err) if unseen(&err) => return Ok(None),
                Err(err) => return Err(err),
            };
        let thread_status = match self.thread_status(context_id).await {
            Ok(status) => status,
            Err(err) if unseen(&err) => return Ok(None),
            Err(err) => return Err(err),
        };
        if !self.is_ours(&anchor) {
            return Ok(None);
        }
        if a2a_of(&anchor.metadata)["task_id"]
            .as_str()
            .is_some_and(|stored| !stored.is_empty() && stored != task_id)
        {
            return Ok(None);
        }
        let runs = self.runs(context_id).await?;
        let newest_in_context = runs.first().map(|run| run.run_id);
        let current = runs
            .iter()
            .filter(|run| self.is_ours(run))
            .find(|run| run.run_id == anchor.run_id || a2a_of(&run.metadata)["task_id"] == task_id)
            .cloned();
        let (run, newest) = match current {
            Some(run) => {
                let newest = Some(run.run_id) == newest_in_context;
                (run, newest)
            }
            None => (anchor, false),
        };
        let mut state = TaskState::of_run(run.status);
        if run.status == RunStatus::Success && newest && thread_status == "interrupted" {
            state = TaskState::InputRequired;
        }
        Ok(Some(Found {
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            tasks_by_start: self.tasks_by_start(context_id, &runs),
            run,
            state,
        }))
    }

    /// The messages of a run's newest checkpoint, and which of them it added.
    async fn run_messages(&self, context_id: &str, run: &Run) -> Result<RunMessages, ApiError> {
        let run_id = run.run_id.0.to_string();
        let mut filter = Map::new();
        filter.insert("run_id".into(), run_id.into());
        let messages = |values: Option<Value>| {
            values.map(|mut values| match values["messages"].take() {
                Value::Array(messages) => messages,
                _ => Vec::new(),
            })
        };
        let last = messages(
            crate::state::newest_values(
                &self.state,
                &self.caller,
                context_id,
                Value::Object(filter.clone()),
            )
            .await?,
        );
        filter.insert("source".into(), "input".into());
        let before = messages(
            crate::state::newest_values(
                &self.state,
                &self.caller,
                context_id,
                Value::Object(filter),
            )
            .await?,
        );
        Ok(match (last, before) {
            (None, _) => RunMessages {
                messages: Vec::new(),
                added_from: None,
            },
            (Some(messages), None) => RunMessages {
                messages,
                added_from: None,
            },
            (Some(messages), Some(before)) => RunMessages::between(&before, messages),
        })
    }

    /// Reads and checks a message (`configured`: and its `configuration`), as the run it makes.
    async fn prepare(
        &self,
        params: &Map<String, Value>,
        configured: bool,
    ) -> Result<Result<Prepared, Fault>, ApiError> {
        macro_rules! refuse {
            ($code:expr, $message:expr) => {
                return Ok(Err(Fault::new($code, $message)))
            };
        }
        let (mut history_length_asked, mut scope) = (None, Scope::Context);
        if configured {
            let empty = Value::Object(Map::new());
            let configuration = match params.get("configuration") {
                None | Some(Value::Null) => &empty,
                Some(configuration) => configuration,
            };
            let Value::Object(configuration) = configuration else {
                refuse!(
                    INVALID_PARAMS,
                    "Invalid params: 'configuration' must be an object"
                );
            };
            (history_length_asked, scope) = match self.history_asked(configuration) {
                Ok(asked) => asked,
                Err(fault) => return Ok(Err(fault)),
            };
        }
        let message = params.get("message").cloned().unwrap_or_default();
        let message_id = message.get("messageId").cloned().unwrap_or_default();
        if !truthy(Some(&message_id)) {
            refuse!(INVALID_PARAMS, "Missing required 'messageId' in message");
        }
        let role = message.get("role");
        if !truthy(role) {
            refuse!(INVALID_PARAMS, "Missing required 'role' in message");
        }
        let parts = match message.get("parts") {
            None => Vec::new(),
            Some(Value::Array(parts)) => parts.clone(),
            Some(_) => refuse!(INVALID_PARAMS, "Invalid params: 'parts' must be an array"),
        };
        if parts.is_empty() {
            refuse!(INVALID_PARAMS, "Message must contain at least one part");
        }
        let assistant = match self.assistant().await? {
            Ok(assistant) => assistant,
            Err(fault) => return Ok(Err(fault)),
        };
        let speaks = parts
            .iter()
            .any(|part| part.get("text").is_some() || part.get("file").is_some());
        if speaks {
            let Some(schema) = self.input_schema().await? else {
                refuse!(
                    INVALID_PARAMS,
                    format!(
                        "Assistant '{}' has no input schema defined. A2A conversational agents \
                         using text or file parts must have an input schema with a 'messages' \
                         field.",
                        self.assistant_id
                    )
                );
            };
            let fields: Vec<Value> = schema["properties"]
                .as_object()
                .map(|properties| properties.keys().cloned().map(Value::from).collect())
                .unwrap_or_default();
            if !fields.iter().any(|field| field == "messages") {
                refuse!(
                    INVALID_PARAMS,
                    format!(
                        "Assistant '{}' (graph '{}') does not support A2A conversational \
                         messages. Graph input schema must include a 'messages' field to accept \
                         text or file parts. Available input fields: {}",
                        self.assistant_id,
                        assistant.graph_id,
                        crate::mcp::python_repr(&Value::Array(fields))
                    )
                );
            }
        }
        let asked_context = match message.get("contextId") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => Some(id.clone()),
            Some(_) => refuse!(INVALID_PARAMS, "contextId must be a string"),
        };
        let asked_task = match message.get("taskId") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => Some(id.clone()),
            Some(_) => refuse!(INVALID_PARAMS, "taskId must be a string"),
        };
        let mut stamp = Map::new();
        let start = asked_task
            .is_none()
            .then(|| uuid::Uuid::now_v7().to_string());
        let (context_id, task_id, tasks_by_start) = match (&asked_task, &start) {
            (None, start) => {
                stamp.insert("task_start_id".into(), start.clone().into());
                let context_id = asked_context
                    .clone()
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
                (context_id, None, HashMap::new())
            }
            (Some(asked), _) => {
                let Some(found) = self.find(asked, asked_context.as_deref()).await? else {
                    refuse!(TASK_NOT_FOUND, format!("Task not found: {asked}"));
                };
                if found.state.terminal() {
                    refuse!(
                        UNSUPPORTED_OPERATION,
                        "A terminal task cannot accept another message"
                    );
                }
                stamp.insert("task_id".into(), found.task_id.clone().into());
                (found.context_id, Some(found.task_id), found.tasks_by_start)
            }
        };
        let role = role.and_then(Value::as_str).unwrap_or("ROLE_USER");
        let mut input = match task::graph_input(&parts, role, &message_id, &stamp) {
            Ok(input) => input,
            Err(why) => refuse!(CONTENT_TYPE_NOT_SUPPORTED, why),
        };
        let mut command = message.get("command").filter(|c| !c.is_null()).cloned();
        let resumes = command
            .as_ref()
            .is_some_and(|command| truthy(command.get("resume")));
        if resumes && asked_context.is_none() {
            refuse!(
                INVALID_PARAMS,
                "contextId is required when resuming a task with command.resume"
            );
        }
        if resumes && asked_task.is_none() {
            refuse!(INVALID_PARAMS, "taskId is required when resuming a task");
        }
        if command.is_none() {
            match self
                .resume_of(&parts, &context_id, asked_task.is_some(), &mut input)
                .await?
            {
                Ok(resume) => command = resume,
                Err(fault) => return Ok(Err(fault)),
            }
        }
        let speaks = input.contains_key("messages");
        let context = match params.get("context") {
            Some(Value::Object(context)) => Some(context.clone()),
            _ => None,
        };
        let mut metadata = Map::new();
        metadata.insert("a2a".into(), Value::Object(stamp));
        let input = (!input.is_empty()).then_some(Value::Object(input));
        let run = CreateRun::of(self.assistant_id.clone(), input, context);
        let body = match run.creating_thread(command.clone(), metadata) {
            Ok(mut body) => {
                body.headers = self.run_headers.clone();
                body
            }
            Err(err) => return Ok(Err(self.refused_run(&err, &context_id))),
        };
        Ok(Ok(Prepared {
            context_id,
            task_id,
            body,
            start,
            speaks,
            resumes: command.is_some(),
            tasks_by_start,
            history_length: history_length_asked,
            scope,
        }))
    }

    /// A resume the parts carry for a task that waits for one: a data part's `resume`, or the
    /// texts of a message to an interrupted task (its messages then not sent as input).
    async fn resume_of(
        &self,
        parts: &[Value],
        context_id: &str,
        continues: bool,
        input: &mut Map<String, Value>,
    ) -> Result<Result<Option<Value>, Fault>, ApiError> {
        let resumes: Vec<&Value> = parts
            .iter()
            .filter_map(|part| part.get("data")?.as_object()?.get("resume"))
            .collect();
        if resumes.len() > 1 {
            return Ok(Err(Fault::new(
                INVALID_PARAMS,
                "Only one resume value is allowed in data parts",
            )));
        }
        let resume = resumes.first().filter(|resume| !resume.is_null());
        let texts: Vec<&str> = parts
            .iter()
            .filter_map(|part| part.get("text")?.as_str())
            .collect();
        if resume.is_none() && texts.is_empty() {
            return Ok(Ok(None));
        }
        if resume.is_some() && !continues {
            return Ok(Err(Fault::new(
                INVALID_PARAMS,
                "contextId and taskId are required when resuming a task",
            )));
        }
        let waits = continues && matches!(self.thread_status(context_id).await, Ok("interrupted"));
        let mut command = Map::new();
        if let Some(resume) = resume {
            if !waits {
                return Ok(Err(Fault::new(
                    INVALID_PARAMS,
                    "Task is not awaiting input",
                )));
            }
            input.remove("resume");
            command.insert("resume".into(), (*resume).clone());
        } else {
            if !waits {
                return Ok(Ok(None));
            }
            input.remove("messages");
            command.insert("resume".into(), texts.join("\n").into());
        }
        Ok(Ok(Some(Value::Object(command))))
    }

    /// A run the api refused, as the official server reports a refused `runs.create`.
    fn refused_run(&self, err: &ApiError, context_id: &str) -> Fault {
        let message = match err.status {
            StatusCode::NOT_FOUND if err.detail.to_ascii_lowercase().contains("thread") => {
                format!(
                    "Thread '{context_id}' not found. Please create the thread first before \
                     sending messages to it."
                )
            }
            StatusCode::NOT_FOUND => format!("Assistant '{}' not found", self.assistant_id),
            StatusCode::BAD_REQUEST => format!("Invalid request: {}", err.detail),
            StatusCode::FORBIDDEN => "Access denied to assistant or thread".into(),
            _ => format!("Failed to create run: {}", err.detail),
        };
        Fault::new(INVALID_PARAMS, message)
    }

    /// `message/send`: the message as a run on its conversation, waited for; the task it began
    /// or continued, with the run's answer or what it waits for.
    pub async fn send(&self, params: Map<String, Value>) -> Result<Outcome, ApiError> {
        let prepared = match self.prepare(&params, true).await? {
            Ok(prepared) => prepared,
            Err(fault) => return Ok(fault.into()),
        };
        let Prepared {
            context_id,
            task_id,
            body,
            start,
            speaks,
            resumes,
            mut tasks_by_start,
            history_length,
            scope,
        } = prepared;
        let (run, mut result) =
            match crate::runs::wait::create_and_join(&self.state, &self.caller, &context_id, body)
                .await
            {
                Ok(done) => done,
                Err(err) if err.status.is_client_error() => {
                    return Ok(self.refused_run(&err, &context_id).into());
                }
                Err(err) => return Err(err),
            };
        let context_id = run.thread_id.0.to_string();
        let task_id = match task_id {
            Some(task_id) => task_id,
            None => {
                let task_id = task::task_id(&context_id, &run.run_id.0.to_string());
                let runs = self.runs(&context_id).await?;
                tasks_by_start = self.tasks_by_start(&context_id, &runs);
                if let Some(start) = start {
                    tasks_by_start
                        .entry(start)
                        .or_insert_with(|| task_id.clone());
                }
                task_id
            }
        };
        let mut turn = None;
        // A turn of data alone: what the run added is read from its checkpoints; so is the
        // history of a task's own turn when it said nothing.
        let data_only = !speaks && !resumes;
        if data_only || (scope == Scope::Task && history_length != Some(0) && !speaks) {
            let messages = self.run_messages(&context_id, &run).await?;
            if data_only {
                turn = messages.added().map(<[Value]>::to_vec);
            }
            if let Value::Object(fields) = &mut result {
                fields.insert("messages".into(), Value::Array(messages.stamped(&task_id)));
            }
        }
        let messages = result["messages"].as_array().cloned().unwrap_or_default();
        let history = task::history(
            &messages,
            &task_id,
            &context_id,
            history_length,
            scope,
            Some(&tasks_by_start),
        );
        let (status, artifacts) = if let Some(error) = result.get("__error__") {
            let text = format!("Error executing assistant: {}", text_of(&error["error"]));
            let status = Status {
                state: TaskState::Failed,
                message: Some(Message::agent_text(text, &task_id, Some(&context_id))),
                timestamp: None,
            };
            (status, None)
        } else if let Some(interrupts) = result.get("__interrupt__") {
            (
                Status::now(TaskState::InputRequired),
                Some(vec![Artifact::interrupts(interrupts)]),
            )
        } else {
            let parts = task::answer_parts(&result, turn.as_deref());
            (
                Status::now(TaskState::Completed),
                Some(vec![Artifact::response(parts, &self.assistant_id)]),
            )
        };
        Ok(Outcome::result(Sent {
            task: Task {
                kind: "task",
                id: task_id,
                context_id,
                history: (history_length != Some(0)).then_some(history),
                status,
                artifacts,
            },
        }))
    }

    /// `tasks/get`: the task's state, from its current run and its thread, and its history.
    pub async fn get(&self, params: Map<String, Value>) -> Result<Outcome, ApiError> {
        let (task_id, context_id) = match ids(&params) {
            Ok(ids) => ids,
            Err(fault) => return Ok(fault.into()),
        };
        let Some(found) = self.find(&task_id, context_id.as_deref()).await? else {
            let place = context_id.map_or_else(String::new, |id| format!(" in context '{id}'"));
            return Ok(
                Fault::new(TASK_NOT_FOUND, format!("Task not found: {task_id}{place}")).into(),
            );
        };
        let (length, scope) = match self.history_asked(&params) {
            Ok(asked) => asked,
            Err(fault) => return Ok(fault.into()),
        };
        let history = if length == Some(0) {
            None
        } else {
            let messages = self
                .run_messages(&found.context_id, &found.run)
                .await?
                .stamped(&found.task_id);
            Some(task::history(
                &messages,
                &found.task_id,
                &found.context_id,
                length,
                scope,
                Some(&found.tasks_by_start),
            ))
        };
        let message = match found.state {
            TaskState::Completed => Some("Task completed successfully".to_owned()),
            TaskState::Failed => Some(format!(
                "Task failed with status: {}",
                found.run.status.as_str()
            )),
            _ => None,
        }
        .map(|text| Message::agent_text(text, &found.task_id, None));
        Ok(Outcome::result(Task {
            kind: "task",
            id: found.task_id,
            context_id: found.context_id,
            history,
            status: Status {
                state: found.state,
                message,
                timestamp: Some(task::iso(found.run.updated_at)),
            },
            artifacts: None,
        }))
    }

    /// `tasks/cancel`: the task's running run interrupted; a task that waits for input ended
    /// (its thread's interrupt closed); a finished one refused.
    pub async fn cancel(&self, params: Map<String, Value>) -> Result<Outcome, ApiError> {
        let (task_id, context_id) = match ids(&params) {
            Ok(ids) => ids,
            Err(fault) => return Ok(fault.into()),
        };
        let found = match self.find(&task_id, context_id.as_deref()).await {
            Ok(Some(found)) => found,
            Ok(None) => {
                return Ok(Fault::new(TASK_NOT_FOUND, format!("Task not found: {task_id}")).into());
            }
            Err(err) if err.status.is_server_error() => return Err(err),
            Err(err) => {
                tracing::warn!(error = err.detail, "resolving an A2A task to cancel failed");
                return Ok(Fault::new(INTERNAL_ERROR, "Failed to check task status").into());
            }
        };
        if found.state.terminal() {
            return Ok(Fault::new(
                TASK_NOT_CANCELABLE,
                "Task is not cancelable in its current state",
            )
            .into());
        }
        let cancelled = if found.state == TaskState::InputRequired {
            self.end_waiting(&found).await
        } else if !matches!(found.run.status, RunStatus::Pending | RunStatus::Running) {
            return Ok(Fault::new(TASK_NOT_CANCELABLE, "Task has no active run to cancel").into());
        } else {
            self.interrupt(&found.run).await
        };
        if let Err(err) = cancelled {
            if err.status.is_server_error() {
                return Err(err);
            }
            return Ok(Fault::new(
                INTERNAL_ERROR,
                format!("Failed to cancel task: {}", err.detail),
            )
            .into());
        }
        Ok(Outcome::result(Task {
            kind: "task",
            id: task_id.clone(),
            context_id: found.context_id,
            history: None,
            status: Status {
                message: Some(Message::agent_text(
                    "Task was canceled".into(),
                    &task_id,
                    None,
                )),
                ..Status::now(TaskState::Canceled)
            },
            artifacts: None,
        }))
    }

    /// `ListTasks`: the tasks of this assistant in the caller's conversations (or in one), newest
    /// first, a page at a time (`pageToken` an offset), as officially.
    pub async fn list(&self, params: Map<String, Value>) -> Result<Outcome, ApiError> {
        let page_size = match params.get("pageSize") {
            None | Some(Value::Null) => 50,
            Some(Value::Number(n)) if n.as_u64().is_some_and(|n| (1..=100).contains(&n)) => {
                usize::try_from(n.as_u64().unwrap_or(50)).unwrap_or(50)
            }
            Some(_) => {
                return Ok(Fault::new(
                    INVALID_PARAMS,
                    "pageSize must be an integer between 1 and 100.",
                )
                .into());
            }
        };
        let (length, scope) = match self.history_asked(&params) {
            Ok(asked) => asked,
            Err(fault) => return Ok(fault.into()),
        };
        let wanted = match params.get("status") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => match TaskState::named(name) {
                Some(state) => Some(state),
                None => {
                    return Ok(Fault::new(
                        INVALID_PARAMS,
                        format!("Invalid status value: '{name}'."),
                    )
                    .into());
                }
            },
            Some(other) => {
                return Ok(Fault::new(
                    INVALID_PARAMS,
                    format!("Invalid status value: '{}'.", text_of(other)),
                )
                .into());
            }
        };
        let after = match params.get("statusTimestampAfter") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) if chrono::DateTime::parse_from_rfc3339(text).is_ok() => {
                Some(text.clone())
            }
            Some(_) => {
                return Ok(Fault::new(
                    INVALID_PARAMS,
                    "statusTimestampAfter must be a valid ISO 8601 timestamp.",
                )
                .into());
            }
        };
        let offset = match params.get("pageToken") {
            None | Some(Value::Null) => 0,
            Some(Value::String(token)) if token.is_empty() => 0,
            Some(Value::String(token)) => match token.parse::<usize>() {
                Ok(offset) => offset,
                Err(_) => return Ok(Fault::new(INVALID_PARAMS, "Invalid pageToken.").into()),
            },
            Some(_) => return Ok(Fault::new(INVALID_PARAMS, "pageToken must be a string.").into()),
        };
        let with_artifacts = truthy(params.get("includeArtifacts"));
        let threads = match params.get("contextId") {
            None | Some(Value::Null) => {
                crate::threads::visible(&self.state, &self.caller, MOST_RUNS).await?
            }
            Some(Value::String(id)) => {
                match crate::authorize::visible_thread(&self.state, &self.caller, id).await {
                    Ok(thread) => vec![thread],
                    Err(err) if err.status.is_client_error() => Vec::new(),
                    Err(err) => return Err(err),
                }
            }
            Some(_) => return Ok(Fault::new(INVALID_PARAMS, "contextId must be a string.").into()),
        };
        let mut listed = Vec::new();
        for thread in threads {
            let context_id = thread.thread_id.0.to_string();
            let runs = queue_run::list(self.state.pool(), thread.thread_id, None, MOST_RUNS, 0)
                .await
                .map_err(crate::runs::queue_error)?;
            let newest = runs.first().map(|run| run.run_id);
            let tasks_by_start = self.tasks_by_start(&context_id, &runs);
            let mut seen = Vec::new();
            for run in runs.into_iter().filter(|run| self.is_ours(run)) {
                let task_id = task_of(&context_id, &run);
                if seen.contains(&task_id) {
                    continue;
                }
                seen.push(task_id.clone());
                let mut state = TaskState::of_run(run.status);
                if run.status == RunStatus::Success
                    && Some(run.run_id) == newest
                    && thread.status.as_str() == "interrupted"
                {
                    state = TaskState::InputRequired;
                }
                let timestamp = task::iso(run.updated_at);
                if wanted.is_some_and(|wanted| wanted != state)
                    || after.as_ref().is_some_and(|after| timestamp < *after)
                {
                    continue;
                }
                let found = Found {
                    task_id,
                    context_id: context_id.clone(),
                    run,
                    state,
                    tasks_by_start: tasks_by_start.clone(),
                };
                listed.push((timestamp, found));
            }
        }
        listed.sort_by(|(a, _), (b, _)| b.cmp(a));
        let total = listed.len();
        let mut tasks = Vec::new();
        for (timestamp, found) in listed.into_iter().skip(offset).take(page_size) {
            let Found {
                task_id,
                context_id,
                run,
                state,
                tasks_by_start,
            } = found;
            let history = if length == Some(0) {
                None
            } else {
                let messages = self
                    .run_messages(&context_id, &run)
                    .await?
                    .stamped(&task_id);
                Some(task::history(
                    &messages,
                    &task_id,
                    &context_id,
                    length,
                    scope,
                    Some(&tasks_by_start),
                ))
            };
            tasks.push(Task {
                kind: "task",
                id: task_id,
                context_id,
                history,
                status: Status {
                    state,
                    message: None,
                    timestamp: Some(timestamp),
                },
                artifacts: (!with_artifacts).then(Vec::new),
            });
        }
        let next = offset + tasks.len();
        Ok(Outcome::result(TaskPage {
            total_size: total,
            page_size: tasks.len(),
            next_page_token: if next < total {
                next.to_string()
            } else {
                String::new()
            },
            tasks,
        }))
    }

    /// Interrupts `run` and waits for its end.
    async fn interrupt(&self, run: &Run) -> Result<(), ApiError> {
        let run = crate::runs::writable_run(
            &self.state,
            &self.caller,
            &run.thread_id.0.to_string(),
            &run.run_id.0.to_string(),
        )
        .await?;
        let _slot = crate::stream::slot(&self.state, &self.caller)?;
        mostrador_queue::cancel(
            self.state.pool(),
            run.thread_id,
            run.run_id,
            CancelAction::Interrupt,
        )
        .await
        .map_err(crate::runs::queue_error)?;
        crate::runs::wait::final_state(&self.state, &run).await?;
        Ok(())
    }

    /// Ends a task that waits for input, as officially: an interrupted run on its thread marks
    /// it cancelled, and the thread's interrupt is closed (`__end__`). A failure deletes the
    /// marker.
    async fn end_waiting(&self, found: &Found) -> Result<(), ApiError> {
        let mut stamp = match a2a_of(&found.run.metadata) {
            Value::Object(stamp) => stamp.clone(),
            _ => Map::new(),
        };
        stamp.insert(
            "task_id".into(),
            task_of(&found.context_id, &found.run).into(),
        );
        let mut metadata = Map::new();
        metadata.insert("a2a".into(), Value::Object(stamp));
        let body = CreateRun::of(self.assistant_id.clone(), None, None)
            .creating_thread(None, metadata)?
            .after(3600.0);
        let accepted = crate::runs::accept(
            &self.state,
            &self.caller,
            &found.context_id,
            body,
            Follow::No,
        )
        .await?;
        let ended = async {
            self.interrupt(&accepted.run).await?;
            crate::state::update(
                State(self.state.clone()),
                self.caller.clone(),
                Path(found.context_id.clone()),
                Body(crate::state::Update::as_node("__end__")),
            )
            .await
            .map(drop)
        }
        .await;
        if ended.is_err()
            && let Err(err) = queue_run::delete(
                self.state.pool(),
                accepted.run.thread_id,
                accepted.run.run_id,
            )
            .await
        {
            tracing::warn!(error = %err, "deleting an A2A cancel's marker run failed");
        }
        ended
    }

    /// `message/stream`: the message as a run whose events are streamed as the task's: the task
    /// submitted, the agent's words as it says them, then its answer (or what it waits for) and
    /// its last status. Each event is a JSON-RPC reply of the request's `id`.
    pub async fn stream(self, id: Value, params: Map<String, Value>, format: Format) -> Response {
        let slot = match crate::stream::slot(&self.state, &self.caller) {
            Ok(slot) => slot,
            Err(err) => return err.into_response(),
        };
        let reply = move |outcome: Outcome| {
            let data = written(&Reply::new(id.clone(), outcome), format).to_string();
            Event::default().event("message").data(data)
        };
        crate::stream::respond(slot, move |sender| async move {
            if let Err(err) = self.streamed(params, &sender, &reply).await {
                tracing::warn!(error = err.detail, "an A2A stream failed");
                let failed = reply(Fault::new(INTERNAL_ERROR, "Internal server error").into());
                let _ = crate::stream::send(&self.state, &sender, failed).await;
            }
        })
        .into_response()
    }

    async fn streamed(
        &self,
        params: Map<String, Value>,
        sender: &tokio::sync::mpsc::Sender<Event>,
        reply: &(impl Fn(Outcome) -> Event + Sync),
    ) -> Result<(), ApiError> {
        let send = |outcome: Outcome| async move {
            crate::stream::send(&self.state, sender, reply(outcome))
                .await
                .is_ok()
        };
        let prepared = match self.prepare(&params, false).await? {
            Ok(prepared) => prepared,
            Err(fault) => {
                send(fault.into()).await;
                return Ok(());
            }
        };
        let new_task = prepared.task_id.is_none();
        let data_only = !prepared.speaks && !prepared.resumes;
        let body = prepared.body.streaming(&STREAMED);
        let mut accepted = match crate::runs::accept(
            &self.state,
            &self.caller,
            &prepared.context_id,
            body,
            Follow::Streams,
        )
        .await
        {
            Ok(accepted) => accepted,
            Err(err) if err.status.is_client_error() => {
                send(self.refused_run(&err, &prepared.context_id).into()).await;
                return Ok(());
            }
            Err(err) => return Err(err),
        };
        let run = accepted.run.clone();
        let context_id = run.thread_id.0.to_string();
        let task_id = match prepared.task_id {
            Some(task_id) if !new_task => task_id,
            _ => task::task_id(&context_id, &run.run_id.0.to_string()),
        };
        let mut sent = params.get("message").cloned().unwrap_or_default();
        if let Value::Object(message) = &mut sent {
            message.insert("kind".into(), "message".into());
            message.insert("taskId".into(), task_id.clone().into());
            message.insert("contextId".into(), context_id.clone().into());
        }
        let submitted = Task {
            kind: "task",
            id: task_id.clone(),
            context_id: context_id.clone(),
            history: None,
            status: Status::now(TaskState::Submitted),
            artifacts: None,
        };
        let mut submitted =
            serde_json::to_value(Sent { task: submitted }).map_err(ApiError::failed)?;
        submitted["task"]["history"] = Value::Array(vec![sent]);
        if !send(Outcome::Result(submitted)).await {
            return Ok(());
        }
        let mut follower = accepted
            .start()
            .follower(&self.state, &run)
            .await
            .map_err(crate::runs::queue_error)?;
        let mut accumulated = crate::stream::Accumulated::default();
        let (mut result, mut error) = (None::<Value>, None::<Value>);
        let mut shutdown = self.state.shutdown_signal();
        loop {
            let next = tokio::select! {
                next = follower.next() => next.map_err(crate::runs::queue_error)?,
                _ = shutdown.wait_for(|shutting_down| *shutting_down) => None,
                () = sender.closed() => return Ok(()),
            };
            let Some(event) = next else {
                break;
            };
            match event.event.as_str() {
                "end" => break,
                "error" => error = Some(event.data),
                "values" => {
                    error = None;
                    result = Some(event.data);
                }
                "messages" => {
                    error = None;
                    for (_, data) in accumulated.fold(&event.data) {
                        let Some(items) = data.as_array().filter(|items| !items.is_empty()) else {
                            continue;
                        };
                        let message = task::streamed_message(items, &task_id, &context_id);
                        if !task::says_something(&message) {
                            continue;
                        }
                        let update = StatusUpdate {
                            task_id: task_id.clone(),
                            context_id: context_id.clone(),
                            kind: "status-update",
                            status: Status {
                                message: Some(message),
                                ..Status::now(TaskState::Working)
                            },
                            r#final: false,
                        };
                        if !send(Outcome::result(update)).await {
                            return Ok(());
                        }
                    }
                }
                _ => {}
            }
        }
        let interrupts = result
            .as_ref()
            .and_then(|result| result.get("__interrupt__"))
            .cloned();
        let mut last = Status::now(match (&error, &interrupts) {
            (Some(_), _) => TaskState::Failed,
            (None, Some(_)) => TaskState::InputRequired,
            (None, None) => TaskState::Completed,
        });
        if let Some(error) = &error {
            let text = match error.get("__error__") {
                Some(inner) if inner.is_object() => text_of(&inner["error"]),
                _ => text_of(&error["message"]),
            };
            last.message = Some(Message::agent_text(text, &task_id, Some(&context_id)));
        }
        if last.state == TaskState::Completed
            && let Some(result) = &result
            && result.is_object()
        {
            let turn = if data_only {
                self.run_messages(&context_id, &run)
                    .await?
                    .added()
                    .map(<[Value]>::to_vec)
            } else {
                None
            };
            let parts = task::answer_parts(result, turn.as_deref());
            let update = ArtifactUpdate {
                task_id: task_id.clone(),
                context_id: context_id.clone(),
                kind: "artifact-update",
                artifact: Artifact::response(parts, &self.assistant_id),
                append: Some(false),
                last_chunk: Some(true),
            };
            if !send(Outcome::result(update)).await {
                return Ok(());
            }
        }
        if let Some(interrupts) = &interrupts {
            let update = ArtifactUpdate {
                task_id: task_id.clone(),
                context_id: context_id.clone(),
                kind: "artifact-update",
                artifact: Artifact::interrupts(interrupts),
                append: None,
                last_chunk: None,
            };
            if !send(Outcome::result(update)).await {
                return Ok(());
            }
        }
        send(Outcome::result(StatusUpdate {
            task_id,
            context_id,
            kind: "status-update",
            status: last,
            r#final: true,
        }))
        .await;
        Ok(())
    }
}

/// A task id and a conversation id, as `tasks/get` and `tasks/cancel` take them.
fn ids(params: &Map<String, Value>) -> Result<(String, Option<String>), Fault> {
    let id = params.get("id");
    if !truthy(id) {
        return Err(Fault::new(
            INVALID_PARAMS,
            "Missing required parameter: id (task_id)",
        ));
    }
    let context = params.get("contextId").filter(|id| !id.is_null());
    match (id, context) {
        (Some(Value::String(id)), None) => Ok((id.clone(), None)),
        (Some(Value::String(id)), Some(Value::String(context))) => {
            Ok((id.clone(), Some(context.clone())))
        }
        _ => Err(Fault::new(
            INVALID_PARAMS,
            "Task id and contextId must be strings",
        )),
    }
}

/// A value as Python's `str` writes it: a string as itself.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => crate::mcp::python_repr(other),
    }
}

/// Whether a schema is one (Python's truth: not empty).
fn truthy_schema(schema: &Value) -> bool {
    truthy(Some(schema))
}

/// A page of `ListTasks`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TaskPage {
    tasks: Vec<Task>,
    total_size: usize,
    page_size: usize,
    next_page_token: String,
}

/// A sent message's task, as the v1 format wraps it.
#[derive(Serialize)]
struct Sent {
    task: Task,
}
