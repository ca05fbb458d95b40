//! The protocol's commands (`POST /threads/{thread_id}/commands`): `run.start` and
//! `input.respond` make runs through the api's own run creation, as the caller; the rest are
//! answered as a command sent alone is officially.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use mostrador_queue::Thread;
use mostrador_queue::run::MultitaskStrategy;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use super::supported;
use crate::app::AppState;
use crate::auth::Caller;
use crate::authorize::visible_thread;
use crate::error::ApiError;
use crate::extract::RunHeaders;
use crate::runs::{CreateRun, Follow};

/// A command, as the client sends it (the body of `POST /threads/{thread_id}/commands`).
#[derive(Debug, ToSchema)]
#[expect(
    dead_code,
    reason = "the body's documentation: it is read by hand, as officially"
)]
pub struct ProtocolCommand {
    id: i64,
    /// `run.start` or `input.respond`.
    method: String,
    #[schema(value_type = Option<Object>)]
    params: Option<Value>,
}

/// A command's answer: HTTP 200, success or the protocol's error (HTTP 400 for a command that
/// is none).
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Answer {
    Success {
        /// The command's.
        #[schema(value_type = i64)]
        id: Value,
        result: Done,
        meta: Meta,
    },
    Error {
        /// The command's, as it was sent (null when there was none).
        #[schema(value_type = Value)]
        id: Value,
        /// `invalid_argument`, `unknown_command`, `no_such_interrupt`, `no_such_run` or
        /// `unknown_error` (the api's refusal, as `<status>: <detail>`).
        error: &'static str,
        message: String,
    },
}

/// What a command did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum Done {
    /// `run.start`: the run it made.
    Started { run_id: Uuid },
    /// `subscription.subscribe`.
    Subscribed {
        subscription_id: Uuid,
        replayed_events: u64,
    },
    /// `input.respond`: nothing to say.
    Answered {},
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Meta {
    /// The highest `seq` this answer's connection handed out: on a socket, its subscriptions'
    /// highest; a command sent over HTTP reads no events, so 0, as officially.
    applied_through_seq: i64,
}

impl Answer {
    /// The same answer, sent on a socket that has handed out events up to `seq`.
    pub(super) fn applied_through(mut self, seq: i64) -> Self {
        if let Answer::Success { meta, .. } = &mut self {
            meta.applied_through_seq = seq;
        }
        self
    }

    pub(super) fn success(id: Value, result: Done) -> Self {
        Self::Success {
            id,
            result,
            meta: Meta {
                applied_through_seq: 0,
            },
        }
    }

    pub(super) fn error(id: Value, error: &'static str, message: impl Into<String>) -> Self {
        Self::Error {
            id,
            error,
            message: message.into(),
        }
    }

    /// A refusal of the api's own run creation, as the official server words one: its status
    /// and detail.
    fn refused(id: Value, refused: &ApiError) -> Self {
        Self::error(
            id,
            "unknown_error",
            format!("{}: {}", refused.status.as_u16(), refused.detail),
        )
    }
}

/// `run.start`'s params.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RunStart {
    assistant_id: Option<Value>,
    input: Option<Value>,
    config: Option<Value>,
    metadata: Option<Map<String, Value>>,
    #[serde(rename = "multitaskStrategy")]
    multitask_strategy: Option<Value>,
}

/// `input.respond`'s params: one answer, or several (`responses`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct InputRespond {
    interrupt_id: Option<Value>,
    namespace: Option<Value>,
    response: Option<Value>,
    responses: Option<Value>,
    update: Option<Value>,
    goto: Option<Value>,
    config: Option<Value>,
    metadata: Option<Map<String, Value>>,
}

/// `POST /threads/{thread_id}/commands`.
pub async fn command(
    State(state): State<AppState>,
    caller: Caller,
    run_headers: RunHeaders,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Response {
    let Ok(command) = serde_json::from_slice::<Value>(&body) else {
        return ApiError::bad_request("Invalid JSON body").into_response();
    };
    let (id, method, params) = match read(&command) {
        Ok(read) => read,
        Err(malformed) => return (StatusCode::BAD_REQUEST, Json(malformed)).into_response(),
    };
    let answer = match method.as_str() {
        // A command sent alone has no connection of events to subscribe: answered as officially,
        // with a subscription nothing will use.
        "subscription.subscribe" => match subscription(&method, id.clone(), &params) {
            Ok(()) => Answer::success(
                id,
                Done::Subscribed {
                    subscription_id: Uuid::new_v4(),
                    replayed_events: 0,
                },
            ),
            Err(refused) => refused,
        },
        "subscription.unsubscribe" => unsubscribed(id, &params, false),
        // Commands of a session, which a command sent alone has none of.
        "subscription.reconnect" | "agent.getTree" => no_session(id),
        _ => {
            let commands = Commands {
                state,
                caller,
                run_headers,
                thread_id,
            };
            commands.run(id, &method, params).await
        }
    };
    Json(answer).into_response()
}

/// A command's id, method and params; or the protocol's refusal of a command that is none.
pub(super) fn read(command: &Value) -> Result<(Value, String, Value), Answer> {
    let id = command.get("id").cloned().unwrap_or(Value::Null);
    match command.get("method").and_then(Value::as_str) {
        Some(method) if id.is_i64() || id.is_u64() => Ok((
            id,
            method.to_owned(),
            command.get("params").cloned().unwrap_or(Value::Null),
        )),
        _ => Err(Answer::error(
            id,
            "invalid_argument",
            "Protocol commands must include an integer id and string method.",
        )),
    }
}

/// Whether `subscription.subscribe` or `subscription.reconnect` (`method`) names channels a
/// subscriber may ask for (and, for a reconnection, where it is).
pub(super) fn subscription(method: &str, id: Value, params: &Value) -> Result<(), Answer> {
    let refused = |message: String| Err(Answer::error(id.clone(), "invalid_argument", message));
    let Some(channels) = params
        .get("channels")
        .and_then(Value::as_array)
        .filter(|channels| !channels.is_empty())
    else {
        return refused(format!("{method} requires a non-empty channels array."));
    };
    if !channels
        .iter()
        .all(|channel| channel.as_str().is_some_and(supported))
    {
        return refused(format!("{method} received an unsupported channel."));
    }
    if method == "subscription.reconnect" && !params.get("since").is_some_and(Value::is_u64) {
        return refused(format!("{method} requires a non-negative integer since."));
    }
    Ok(())
}

/// `subscription.unsubscribe`'s answer: `known` when the subscription it names was there.
pub(super) fn unsubscribed(id: Value, params: &Value, known: bool) -> Answer {
    match params.get("subscription_id").and_then(Value::as_str) {
        None => Answer::error(
            id,
            "invalid_argument",
            "subscription.unsubscribe requires a subscription_id.",
        ),
        Some(_) if known => Answer::success(id, Done::Answered {}),
        Some(unknown) => Answer::error(
            id,
            "no_such_subscription",
            format!("Unknown subscription: {unknown}"),
        ),
    }
}

/// The answer to a command of a run's session where there is none.
pub(super) fn no_session(id: Value) -> Answer {
    Answer::error(id, "no_such_run", "No active run is bound to this thread.")
}

/// A param that is a string with something in it.
fn non_empty(param: Option<&Value>) -> Option<&str> {
    param
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
}

/// The commands that make runs, as the caller, on their thread.
pub(super) struct Commands {
    pub(super) state: AppState,
    pub(super) caller: Caller,
    pub(super) run_headers: RunHeaders,
    pub(super) thread_id: String,
}

impl Commands {
    /// `run.start`, `input.respond`, or a command the protocol does not have.
    pub(super) async fn run(&self, id: Value, method: &str, params: Value) -> Answer {
        match method {
            "run.start" => self.run_start(id, params).await,
            "input.respond" => self.input_respond(id, params).await,
            other => Answer::error(
                id,
                "unknown_command",
                format!("Unknown protocol command: {other}"),
            ),
        }
    }

    async fn run_start(&self, id: Value, params: Value) -> Answer {
        let params: RunStart = serde_json::from_value(params).unwrap_or_default();
        let Some(assistant_id) = non_empty(params.assistant_id.as_ref()) else {
            return Answer::error(
                id,
                "invalid_argument",
                "run.start requires an assistant_id.",
            );
        };
        if let Some(checkpoint_id) = params
            .config
            .as_ref()
            .and_then(|config| config.get("configurable"))
            .and_then(|configurable| configurable.get("checkpoint_id"))
        {
            match non_empty(Some(checkpoint_id)) {
                None => {
                    return Answer::error(
                        id,
                        "invalid_argument",
                        "config.configurable.checkpoint_id must be a non-empty string.",
                    );
                }
                Some(text) if Uuid::parse_str(text).is_err() => {
                    return Answer::error(
                        id,
                        "invalid_argument",
                        format!("Invalid config.configurable.checkpoint_id: '{text}'."),
                    );
                }
                Some(_) => {}
            }
        }
        // Anything but the four strategies queues, as officially.
        let multitask_strategy = params
            .multitask_strategy
            .as_ref()
            .and_then(Value::as_str)
            .map(|name| {
                MultitaskStrategy::ALL
                    .into_iter()
                    .find(|strategy| strategy.as_str() == name)
                    .unwrap_or(MultitaskStrategy::Enqueue)
            });
        // An input to a thread that waits for a decision is that decision.
        let input = params.input.filter(|input| !input.is_null());
        let waits = match &input {
            Some(_) => match visible_thread(&self.state, &self.caller, &self.thread_id).await {
                Ok(thread) => !self.pending_interrupts(&thread).await.is_empty(),
                Err(_) => false,
            },
            None => false,
        };
        let (input, command) = match input {
            Some(input) if waits => {
                let mut command = Map::new();
                command.insert("resume".into(), input);
                (None, Some(Value::Object(command)))
            }
            input => (input, None),
        };
        let body = CreateRun::for_thread_stream(
            assistant_id.to_owned(),
            input,
            command,
            params.config,
            params.metadata,
            multitask_strategy,
        );
        self.create(id, body).await
    }

    async fn input_respond(&self, id: Value, params: Value) -> Answer {
        let params: InputRespond = serde_json::from_value(params).unwrap_or_default();
        let mut answers = Map::new();
        match &params.responses {
            Some(Value::Array(responses)) if !responses.is_empty() => {
                for response in responses {
                    let Some(response) = response.as_object() else {
                        return Answer::error(
                            id,
                            "invalid_argument",
                            "input.respond responses entries must be objects.",
                        );
                    };
                    let Some(interrupt_id) = response.get("interrupt_id").and_then(Value::as_str)
                    else {
                        return Answer::error(
                            id,
                            "invalid_argument",
                            "input.respond responses entries require an interrupt_id.",
                        );
                    };
                    let answer = response.get("response").cloned().unwrap_or(Value::Null);
                    answers.insert(interrupt_id.to_owned(), answer);
                }
            }
            Some(Value::Array(_)) => {
                return Answer::error(
                    id,
                    "invalid_argument",
                    "input.respond requires at least one response.",
                );
            }
            _ => {
                let Some(interrupt_id) = non_empty(params.interrupt_id.as_ref()) else {
                    return Answer::error(
                        id,
                        "invalid_argument",
                        "input.respond requires an interrupt_id.",
                    );
                };
                let namespace_ok = match &params.namespace {
                    None | Some(Value::Null) => true,
                    Some(Value::Array(parts)) => parts.iter().all(Value::is_string),
                    Some(_) => false,
                };
                if !namespace_ok {
                    return Answer::error(
                        id,
                        "invalid_argument",
                        "input.respond requires namespace to be a list of strings.",
                    );
                }
                answers.insert(
                    interrupt_id.to_owned(),
                    params.response.clone().unwrap_or(Value::Null),
                );
            }
        }
        let thread = match visible_thread(&self.state, &self.caller, &self.thread_id).await {
            Ok(thread) => thread,
            Err(_) => {
                return Answer::error(
                    id,
                    "no_such_run",
                    "No interrupted run is bound to this thread.",
                );
            }
        };
        let Some(assistant_id) = thread
            .metadata
            .get("assistant_id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| thread.graph_id.clone())
        else {
            return Answer::error(
                id,
                "no_such_run",
                "No interrupted run is bound to this thread.",
            );
        };
        let pending = self.pending_interrupts(&thread).await;
        if let Some(unknown) = answers.keys().find(|id| !pending.contains(*id)) {
            return Answer::error(
                id,
                "no_such_interrupt",
                format!("Unknown or already-consumed interrupt: {unknown}"),
            );
        }
        let mut command = Map::new();
        command.insert("resume".into(), Value::Object(answers));
        for (key, value) in [("update", params.update), ("goto", params.goto)] {
            if let Some(value) = value.filter(|value| !value.is_null()) {
                command.insert(key.into(), value);
            }
        }
        let body = CreateRun::for_thread_stream(
            assistant_id,
            None,
            Some(Value::Object(command)),
            params.config,
            params.metadata,
            None,
        );
        match self.create(id.clone(), body).await {
            Answer::Success { .. } => Answer::success(id, Done::Answered {}),
            refused => refused,
        }
    }

    /// The ids of the interrupts `thread` waits on (none when its state cannot be read).
    async fn pending_interrupts(&self, thread: &Thread) -> Vec<String> {
        let latest =
            crate::state::latest(&self.state, thread.thread_id, thread.graph_id.as_deref()).await;
        latest
            .ok()
            .flatten()
            .map(|latest| {
                latest
                    .interrupts
                    .iter()
                    .filter_map(|(_, interrupt)| interrupt["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    async fn create(&self, id: Value, body: Result<CreateRun, ApiError>) -> Answer {
        let mut body = match body {
            Ok(body) => body,
            Err(refused) => return Answer::refused(id, &refused),
        };
        body.headers = self.run_headers.0.clone();
        match crate::runs::accept(&self.state, &self.caller, &self.thread_id, body, Follow::No)
            .await
        {
            Ok(accepted) => Answer::success(
                id,
                Done::Started {
                    run_id: accepted.run.run_id.0,
                },
            ),
            Err(refused) => Answer::refused(id, &refused),
        }
    }
}
