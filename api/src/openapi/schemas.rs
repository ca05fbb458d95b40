//! The small JSON Schema builders the route table ([`io`](super::io)) and the request fields
//! ([`fields`](super::fields)) are written with: query and header parameters, and what a Rust
//! type does not say alone.

use serde_json::{Value, json};

/// Any JSON value. (utoipa reads a schema without a type from `"type": null`.)
pub(super) fn any() -> Value {
    json!({"type": null})
}

/// A field the server refuses (422) unless it is missing or null.
pub(super) fn unsupported() -> Value {
    json!({"type": "null", "description": "Not supported: omit it, or send null."})
}

pub(super) fn nullable_enum(names: &[&str]) -> Value {
    let mut values: Vec<Value> = names.iter().map(|name| json!(name)).collect();
    values.push(Value::Null);
    json!({"type": ["string", "null"], "enum": values})
}

pub fn limit(default: i64) -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": 1000, "default": default})
}

pub fn offset() -> Value {
    json!({"type": "integer", "format": "int64", "minimum": 0, "default": 0})
}

pub(super) fn stream_mode_name() -> Value {
    json!({
        "type": "string",
        "enum": [
            "values", "updates", "messages", "messages-tuple", "custom", "tasks", "checkpoints",
            "debug", "events",
        ],
    })
}

/// One stream mode or a list of them.
pub(super) fn stream_modes() -> Value {
    json!({
        "anyOf": [
            stream_mode_name(),
            {"type": "array", "items": stream_mode_name()},
            {"type": "null"},
        ],
    })
}

pub(super) fn run_status_filter() -> Value {
    let mut names: Vec<&str> = mostrador_queue::RunStatus::ALL
        .map(mostrador_queue::RunStatus::as_str)
        .to_vec();
    names.push("");
    json!({"type": "string", "enum": names, "description": "Runs of this status only; all when empty."})
}

pub fn array(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

pub fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

pub fn query(name: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "schema": schema})
}

pub(super) fn header(name: &str, schema: Value, description: &str) -> Value {
    json!({
        "name": name,
        "in": "header",
        "required": false,
        "schema": schema,
        "description": description,
    })
}

/// A path parameter: an id the handler parses as a UUID (anything else is a 404), except an
/// assistant's, which may also be its graph id.
pub(super) fn path_parameter(name: &str) -> Value {
    let schema = if name == "assistant_id" || name == "namespace" {
        json!({"type": "string"})
    } else {
        json!({"type": "string", "format": "uuid"})
    };
    json!({"name": name, "in": "path", "required": true, "schema": schema})
}
