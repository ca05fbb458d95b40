//! A2A, the Agent2Agent protocol, at `/a2a/{assistant_id}`, as the official server serves it:
//! an assistant is an agent with a card, a conversation (`contextId`) is a thread, and a task is
//! the run that began it (`{thread_id}:{run_id}`), continued by the runs that answer its
//! interrupts. JSON-RPC over HTTP: every reply is a 200 whatever its outcome; only a message that
//! is no JSON-RPC request at all for its route (an `Accept` it cannot be answered in) is a 400.
//! Every call is the caller's: the thread, run and assistant routes' authorization applies.
//!
//! The methods (`message/send`, `message/stream`, `tasks/get`, `tasks/cancel`, also by their v1
//! names) are in [`methods`]; the protocol's objects and their mapping onto LangGraph's in
//! [`task`]; the agent card in [`card`].

mod card;
mod methods;
mod task;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::IntoParams;

use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{Params, RunHeaders};
use crate::jsonrpc::{
    Fault, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, Outcome, PARSE_ERROR,
    Reply, refused,
};

const TASK_NOT_FOUND: i64 = -32001;
const TASK_NOT_CANCELABLE: i64 = -32002;
const UNSUPPORTED_OPERATION: i64 = -32004;
const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;

/// The methods, by their v1 names; the slash names of A2A 0.3 (the SDK's) are the same methods
/// answered in that version's format ([`Format::Spec`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    CancelTask,
    ListTasks,
    GetExtendedAgentCard,
}

impl Method {
    fn named(name: &str) -> Option<(Self, Format)> {
        Some(match name {
            "message/send" => (Self::SendMessage, Format::Spec),
            "message/stream" => (Self::SendStreamingMessage, Format::Spec),
            "tasks/get" => (Self::GetTask, Format::Spec),
            "tasks/cancel" => (Self::CancelTask, Format::Spec),
            "SendMessage" => (Self::SendMessage, Format::V1),
            "SendStreamingMessage" => (Self::SendStreamingMessage, Format::V1),
            "GetTask" => (Self::GetTask, Format::V1),
            "CancelTask" => (Self::CancelTask, Format::V1),
            "ListTasks" => (Self::ListTasks, Format::V1),
            "GetExtendedAgentCard" => (Self::GetExtendedAgentCard, Format::V1),
            _ => return None,
        })
    }
}

/// How roles and states are written: `ROLE_AGENT` and `TASK_STATE_COMPLETED` (v1), or `agent`
/// and `completed` with a sent task unwrapped from `{"task": ...}` (the 0.3 spec), as officially.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    V1,
    Spec,
}

impl Format {
    /// `value` in this format: every `role` and `state` string rewritten, `{"task": T}` as T.
    fn write(self, mut value: Value) -> Value {
        if self == Format::Spec {
            to_spec(&mut value);
        }
        value
    }
}

fn to_spec(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            if let Some(Value::Object(result)) = fields.get_mut("result")
                && result.len() == 1
                && let Some(task) = result.remove("task")
            {
                fields.insert("result".into(), task);
            }
            for (key, item) in fields.iter_mut() {
                match (key.as_str(), &item) {
                    ("role", Value::String(role)) => {
                        let spec = task::Role::spec_name(role);
                        *item = Value::String(spec);
                    }
                    ("state", Value::String(state)) => {
                        let spec = task::TaskState::spec_name(state);
                        *item = Value::String(spec);
                    }
                    _ => to_spec(item),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(to_spec),
        _ => {}
    }
}

/// A reply as a JSON value in `format`.
fn written(reply: &Reply, format: Format) -> Value {
    format.write(serde_json::to_value(reply).expect("a reply is JSON"))
}

/// A reply of HTTP 200, as every JSON-RPC reply is.
fn replied(id: Value, outcome: Outcome, format: Format) -> Response {
    Json(written(&Reply::new(id, outcome), format)).into_response()
}

fn failed(id: Value, code: i64, message: &str) -> Response {
    replied(id, Fault::new(code, message).into(), Format::V1)
}

/// Whether an `Accept` header takes `media` (`*/*` and `type/*` do).
fn accepts(accept: &str, media: &str) -> bool {
    let (kind, _) = media.split_once('/').unwrap_or((media, ""));
    accept.split(',').any(|range| {
        let range = range
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        range == "*/*" || range == media || range.strip_suffix("/*") == Some(kind)
    })
}

/// `POST /a2a/{assistant_id}`: one JSON-RPC message, answered as the official server answers it.
pub async fn post(
    State(state): State<AppState>,
    caller: Caller,
    RunHeaders(run_headers): RunHeaders,
    Path(assistant_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return Ok(failed(Value::Null, PARSE_ERROR, "Invalid JSON payload"));
    };
    let Value::Object(mut message) = message else {
        return Ok(failed(
            Value::Null,
            INVALID_REQUEST,
            "Invalid message format: expected object",
        ));
    };
    let id = message.remove("id").unwrap_or(Value::Null);
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Ok(failed(
            id,
            INVALID_REQUEST,
            "Invalid JSON-RPC message: missing or invalid jsonrpc version",
        ));
    }
    // Python's `bool` is an `int`: `true` passes as an id there, and here.
    if matches!(id, Value::Object(_) | Value::Array(_)) {
        return Ok(failed(
            Value::Null,
            INVALID_REQUEST,
            "Invalid JSON-RPC request: 'id' must be a string, number, or null",
        ));
    }
    let method = match message.get("method") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => match Method::named(name) {
            Some(named) => Some(named),
            None => {
                return Ok(failed(
                    id,
                    METHOD_NOT_FOUND,
                    &format!("Method not found: {name}"),
                ));
            }
        },
        Some(_) => {
            return Ok(failed(
                id,
                METHOD_NOT_FOUND,
                "Method not found: method must be a string",
            ));
        }
    };
    let params = message.remove("params");
    let sends = matches!(
        method,
        Some((Method::SendMessage | Method::SendStreamingMessage, _))
    );
    if sends {
        let empty = Value::Object(Map::new());
        let Value::Object(params) = params.as_ref().unwrap_or(&empty) else {
            return Ok(failed(
                id,
                INVALID_PARAMS,
                "Invalid params: must be an object",
            ));
        };
        if !matches!(params.get("message"), Some(Value::Object(message)) if !message.is_empty()) {
            return Ok(failed(
                id,
                INVALID_PARAMS,
                "Missing or invalid 'message' in params",
            ));
        }
    }
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|accept| accept.to_str().ok())
        .unwrap_or_default();
    let (media, refusal) = if matches!(method, Some((Method::SendStreamingMessage, _))) {
        (
            "text/event-stream",
            "Accept header must include text/event-stream for streaming",
        )
    } else {
        (
            "application/json",
            "Accept header must include application/json",
        )
    };
    if !accepts(accept, media) {
        return Ok(refused(refusal));
    }
    let (method, format) = match (id.is_null(), method) {
        (false, Some(method)) => method,
        (false, None) if message.contains_key("result") || message.contains_key("error") => {
            return Ok(StatusCode::ACCEPTED.into_response());
        }
        (false, None) => {
            return Ok(failed(
                id,
                INVALID_REQUEST,
                "Invalid JSON-RPC request: missing 'method' field",
            ));
        }
        (true, _) => {
            return Ok(failed(
                Value::Null,
                INVALID_REQUEST,
                "Invalid message format: must be a JSON-RPC request or notification",
            ));
        }
    };
    let Ok(assistant_id) = uuid::Uuid::parse_str(&assistant_id) else {
        return Ok(failed(
            id,
            INVALID_PARAMS,
            "Invalid assistant ID: must be a UUID",
        ));
    };
    let params = match params {
        Some(Value::Object(params)) => params,
        _ => Map::new(),
    };
    let call = methods::Call {
        state,
        caller,
        run_headers,
        headers,
        assistant_id: assistant_id.to_string(),
    };
    let outcome = match method {
        Method::SendStreamingMessage => return Ok(call.stream(id, params, format).await),
        Method::SendMessage => call.send(params).await?,
        Method::GetTask => call.get(params).await?,
        Method::CancelTask => call.cancel(params).await?,
        Method::GetExtendedAgentCard => match call.card().await? {
            Ok(card) => Outcome::result(card),
            Err(fault) => fault.into(),
        },
        Method::ListTasks => call.list(params).await?,
    };
    Ok(replied(id, outcome, format))
}

/// `GET /a2a/{assistant_id}` and its `.well-known/agent-card.json` (or `agent.json`): the
/// assistant's agent card; a 400 with a JSON-RPC error when there is no such assistant.
pub async fn agent_card(
    State(state): State<AppState>,
    caller: Caller,
    RunHeaders(run_headers): RunHeaders,
    Path(assistant_id): Path<String>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let call = methods::Call {
        state,
        caller,
        run_headers,
        headers,
        assistant_id,
    };
    Ok(match call.card_at(uri.path()).await? {
        Ok(card) => Json(card).into_response(),
        Err(fault) => (StatusCode::BAD_REQUEST, Json(CardError { error: fault })).into_response(),
    })
}

/// The root card's query.
#[derive(Debug, Deserialize, IntoParams)]
pub struct CardQuery {
    /// The assistant whose card it is.
    #[param(format = Uuid)]
    assistant_id: Option<String>,
}

/// `GET /.well-known/agent-card.json?assistant_id=`: the card of the assistant the query names
/// (a 400 when it names none), as officially. The official server's fallbacks (an environment
/// variable, a file of its test kit) are not read.
pub async fn root_card(
    state: State<AppState>,
    caller: Caller,
    run_headers: RunHeaders,
    Params(query): Params<CardQuery>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let Some(assistant_id) = query.assistant_id.filter(|id| !id.is_empty()) else {
        let fault = Fault::new(
            INVALID_PARAMS,
            "Missing required query parameter: assistant_id",
        );
        return Ok((StatusCode::BAD_REQUEST, Json(CardError { error: fault })).into_response());
    };
    agent_card(state, caller, run_headers, Path(assistant_id), headers, uri).await
}

/// Why there is no card: `{"error": {code, message}}`.
#[derive(Serialize)]
struct CardError {
    error: Fault,
}

/// `DELETE /a2a/{assistant_id}`: a 405, as officially (its answer says why, where the official's
/// is empty).
pub async fn delete(_caller: Caller) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "an A2A agent answers POSTed JSON-RPC messages and GETs of its card; nothing is deleted",
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_spec_format_writes_roles_and_states_in_lower_case_and_unwraps_a_sent_task() {
        let reply = Reply::new(
            json!(1),
            Outcome::result(
                json!({"task": {"status": {"state": "TASK_STATE_INPUT_REQUIRED"},
                "history": [{"role": "ROLE_USER"}, {"role": "ROLE_AGENT"}]}}),
            ),
        );
        assert_eq!(
            written(&reply, Format::Spec),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"status": {"state": "input-required"},
                "history": [{"role": "user"}, {"role": "agent"}]}})
        );
        assert_eq!(
            written(&reply, Format::V1)["result"]["task"]["status"]["state"],
            "TASK_STATE_INPUT_REQUIRED"
        );
    }

    #[test]
    fn an_accept_header_takes_a_media_type_by_name_or_by_wildcard() {
        assert!(accepts("*/*", "application/json"));
        assert!(accepts(
            "text/html, application/*;q=0.8",
            "application/json"
        ));
        assert!(accepts(
            "application/json, text/event-stream",
            "text/event-stream"
        ));
        assert!(!accepts("text/html", "application/json"));
        assert!(!accepts("", "application/json"));
    }
}
