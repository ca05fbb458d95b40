//! JSON-RPC 2.0 over HTTP, as MCP and A2A frame it: a reply of the request's `id` with a
//! `result` or an `error`, and the 400 of a message that is no JSON-RPC message.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// A response: the request's `id` (null when it could not be read) and its outcome.
#[derive(Debug, Serialize)]
pub struct Reply {
    jsonrpc: &'static str,
    id: Value,
    #[serde(flatten)]
    outcome: Outcome,
}

impl Reply {
    pub fn new(id: Value, outcome: Outcome) -> Self {
        Self {
            jsonrpc: "2.0",
            id,
            outcome,
        }
    }
}

/// A method's `result`, or its `error`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Result(Value),
    Error(Fault),
}

impl Outcome {
    pub fn result(result: impl Serialize) -> Self {
        Self::Result(serde_json::to_value(result).expect("a result is JSON"))
    }

    pub fn error(code: i64, message: impl Into<String>) -> Self {
        Self::Error(Fault::new(code, message))
    }
}

/// An error: its code and what it says.
#[derive(Debug, Clone, Serialize)]
pub struct Fault {
    pub code: i64,
    pub message: String,
}

impl Fault {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<Fault> for Outcome {
    fn from(fault: Fault) -> Self {
        Self::Error(fault)
    }
}

/// Why a message is no JSON-RPC message the route answers: its 400, `{"error": why}`, as the
/// official server words it.
#[derive(Serialize)]
struct Refusal<'a> {
    error: &'a str,
}

pub fn refused(why: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(Refusal { error: why })).into_response()
}
