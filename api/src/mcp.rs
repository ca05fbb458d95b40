//! MCP, the Model Context Protocol, at `/mcp` over Streamable HTTP, as the official server serves
//! it: every assistant the caller may use is a tool whose input schema is its graph's, and a
//! call of it is a stateless run the call waits for, with the caller's authorization. Plain JSON
//! answers, no session, no server-sent stream (`GET` is a 405, `DELETE` a 404), as officially.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{Body, RunHeaders};
use crate::jsonrpc::{INVALID_PARAMS, METHOD_NOT_FOUND, Outcome, Reply, refused};

/// The protocol versions a client may ask for; another gets the latest.
const PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";
/// Tools a `tools/list` page holds; its `nextCursor` is the next page's offset.
const PAGE: i64 = 100;
/// The assistants a `tools/call` looks its tool up among.
const MOST_ASSISTANTS: i64 = 1000;

/// `GET /mcp`: no server-sent stream, as officially (its answer says so, where the official's
/// is empty).
pub async fn get(_caller: Caller) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "MCP here answers each POSTed message; it offers no server-sent stream",
    )
}

/// `DELETE /mcp`: there is no session to end, as officially (its answer says so, where the
/// official's is empty).
pub async fn delete(_caller: Caller) -> ApiError {
    ApiError::not_found("MCP here keeps no session to end")
}

/// `POST /mcp`: one JSON-RPC message. A request is answered (`initialize`, `ping`, `tools/list`,
/// `tools/call`); a notification or a response is taken with a 202.
pub async fn post(
    State(state): State<AppState>,
    caller: Caller,
    RunHeaders(run_headers): RunHeaders,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return Ok(refused("Invalid JSON"));
    };
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|accept| accept.to_str().ok())
        .unwrap_or_default();
    if !accept.contains("application/json") && !accept.contains("text/event-stream") {
        return Ok(refused(
            "Accept header must include application/json or text/event-stream",
        ));
    }
    let Value::Object(message) = message else {
        return Ok(refused("Invalid message format."));
    };
    if message.get("jsonrpc") != Some(&json!("2.0")) {
        return Ok(refused(
            "Invalid JSON-RPC message. Missing or invalid jsonrpc version.",
        ));
    }
    let id = message.get("id").filter(|id| !id.is_null());
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .filter(|method| !method.is_empty());
    let (id, method) = match (id, method) {
        (Some(id), Some(method)) => (id.clone(), method),
        // A response or a notification: nothing to answer.
        (Some(_), None) | (None, Some(_)) => return Ok(StatusCode::ACCEPTED.into_response()),
        (None, None) => {
            return Ok(refused(
                "Invalid message format. A message is to be either a JSON-RPC request, \
                 response, or notification.",
            ));
        }
    };
    let params = match message.get("params") {
        Some(Value::Object(params)) => params.clone(),
        _ => Map::new(),
    };
    let outcome = match method {
        "initialize" => Outcome::result(initialize(&params)),
        "ping" => Outcome::result(Map::new()),
        "tools/list" => tools_list(&state, &caller, &params).await?,
        "tools/call" => tools_call(&state, &caller, run_headers, &params).await?,
        other => Outcome::error(METHOD_NOT_FOUND, format!("Method not found: {other}")),
    };
    Ok(Json(Reply::new(id, outcome)).into_response())
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Initialized {
    protocol_version: &'static str,
    capabilities: Capabilities,
    server_info: ServerInfo,
}

#[derive(Serialize)]
struct Capabilities {
    tools: ToolCapabilities,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolCapabilities {
    list_changed: bool,
}

#[derive(Serialize)]
struct ServerInfo {
    name: &'static str,
    version: &'static str,
}

/// The version the client asked for when it is one of ours, else the latest.
fn initialize(params: &Map<String, Value>) -> Initialized {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    Initialized {
        protocol_version: PROTOCOL_VERSIONS
            .into_iter()
            .find(|version| Some(*version) == asked)
            .unwrap_or(LATEST_PROTOCOL_VERSION),
        capabilities: Capabilities {
            tools: ToolCapabilities {
                list_changed: false,
            },
        },
        server_info: ServerInfo {
            name: "mostrador",
            version: env!("CARGO_PKG_VERSION"),
        },
    }
}

/// A page of `tools/list`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tools {
    tools: Vec<Tool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<i64>,
}

/// An assistant as an MCP tool.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tool {
    name: String,
    title: String,
    description: String,
    input_schema: Value,
    annotations: Hints,
}

/// What a model may assume of a tool: a run may change anything and reach anything.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Hints {
    read_only_hint: bool,
    destructive_hint: bool,
    idempotent_hint: bool,
    open_world_hint: bool,
}

/// What `tools/call` answers: the run's final state, or its error.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Called {
    content: Vec<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_error: Option<bool>,
}

#[derive(Serialize)]
struct Text {
    r#type: &'static str,
    text: String,
}

impl Called {
    fn text(text: String, is_error: Option<bool>) -> Self {
        Self {
            content: vec![Text {
                r#type: "text",
                text,
            }],
            is_error,
        }
    }
}

/// The caller's assistants, `limit` from `offset`, as `POST /assistants/search` answers them.
async fn assistants(
    state: &AppState,
    caller: &Caller,
    offset: i64,
    limit: i64,
) -> Result<Vec<Value>, ApiError> {
    let search = serde_json::from_value(json!({"offset": offset, "limit": limit}))
        .map_err(ApiError::failed)?;
    let (_, Json(found)) =
        crate::assistants::search(State(state.clone()), caller.clone(), Body(search)).await?;
    Ok(found)
}

/// A page of tools: one per assistant whose name is a tool name no assistant before it took, with
/// its graph's input schema. An assistant whose graph has no input schema is left out.
async fn tools_list(
    state: &AppState,
    caller: &Caller,
    params: &Map<String, Value>,
) -> Result<Outcome, ApiError> {
    let cursor = match params.get("cursor") {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(text)) => text.parse().unwrap_or(0),
        _ => 0,
    }
    .max(0);
    let found = assistants(state, caller, cursor, PAGE).await?;
    let full = i64::try_from(found.len()).unwrap_or(i64::MAX) == PAGE;
    let mut names = Vec::new();
    let mut tools = Vec::new();
    for assistant in found {
        let title = assistant["name"].as_str().unwrap_or_default().to_owned();
        let name = tool_name(&title);
        if names.contains(&name) {
            tracing::warn!(
                assistant = title,
                "two assistants make one tool name: the second is not listed"
            );
            continue;
        }
        names.push(name.clone());
        let Some(id) = assistant["assistant_id"].as_str() else {
            continue;
        };
        let schemas =
            crate::assistants::schemas(State(state.clone()), caller.clone(), Path(id.to_owned()))
                .await;
        let mut input = match schemas.map(|Json(graph)| graph.schemas.input_schema) {
            Ok(Some(input)) if !input.is_null() => input,
            Ok(_) | Err(_) => {
                tracing::warn!(assistant = title, "no input schema: not listed as a tool");
                continue;
            }
        };
        simplify(&mut input);
        if let Value::Object(schema) = &mut input {
            schema.entry("type").or_insert(json!("object"));
        }
        let description = assistant["description"]
            .as_str()
            .filter(|text| !text.is_empty())
            .map_or_else(
                || format!("Tool based on the {title} assistant"),
                str::to_owned,
            );
        tools.push(Tool {
            name,
            title,
            description,
            input_schema: input,
            annotations: Hints {
                read_only_hint: false,
                destructive_hint: false,
                idempotent_hint: false,
                open_world_hint: true,
            },
        });
    }
    Ok(Outcome::result(Tools {
        tools,
        next_cursor: full.then_some(cursor + PAGE),
    }))
}

/// Runs the tool's assistant on `arguments` (its input) and `context`, as a stateless run the call
/// waits for: the run's final state as Python writes it (`repr`), or its error as a tool error.
async fn tools_call(
    state: &AppState,
    caller: &Caller,
    run_headers: Map<String, Value>,
    params: &Map<String, Value>,
) -> Result<Outcome, ApiError> {
    let Some(name) = params
        .get("name")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
    else {
        // As Python's `str` writes what was given.
        let given = match params.get("name") {
            None | Some(Value::Null) => "None".to_owned(),
            Some(Value::String(name)) => name.clone(),
            Some(other) => python_repr(other),
        };
        return Ok(Outcome::error(
            INVALID_PARAMS,
            format!("Unknown tool: {given}"),
        ));
    };
    let found = assistants(state, caller, 0, MOST_ASSISTANTS).await?;
    let matching: Vec<&Value> = found
        .iter()
        .filter(|assistant| {
            let title = assistant["name"].as_str().unwrap_or_default();
            let normalized = tool_name(title);
            !normalized.is_empty() && normalized == name
        })
        .collect();
    let assistant_id = match matching.as_slice() {
        [] => {
            return Ok(Outcome::error(
                INVALID_PARAMS,
                format!("Unknown tool: {name}"),
            ));
        }
        [one] => one["assistant_id"].as_str().unwrap_or_default().to_owned(),
        _ => {
            return Ok(Outcome::error(
                INVALID_PARAMS,
                "Multiple tools found with the same name.",
            ));
        }
    };
    let input = params
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    let context = match params.get("context") {
        None | Some(Value::Null) => None,
        Some(Value::Object(context)) => Some(context.clone()),
        Some(_) => {
            return Err(ApiError::unprocessable(
                "tools/call: context must be an object",
            ));
        }
    };
    let body = crate::runs::CreateRun::of(assistant_id, Some(input), context);
    let waited = crate::runs::wait_stateless(
        State(state.clone()),
        caller.clone(),
        RunHeaders(run_headers),
        Body(body),
    )
    .await?;
    let status = waited.status();
    let bytes = axum::body::to_bytes(waited.into_body(), usize::MAX)
        .await
        .map_err(ApiError::failed)?;
    let value: Value = serde_json::from_slice(bytes.trim_ascii()).map_err(|err| {
        ApiError::failed(format!("the run's answer ({status}) is no JSON: {err}"))
    })?;
    if let Some(error) = value.get("__error__") {
        let text = error["error"]
            .as_str()
            .map_or_else(|| error["error"].to_string(), str::to_owned);
        return Ok(Outcome::result(Called::text(text, Some(true))));
    }
    Ok(Outcome::result(Called::text(python_repr(&value), None)))
}

/// An assistant's name as an MCP tool name (`^[a-zA-Z0-9_\-.]{1,128}$`): runs of white space as
/// one `_`, other characters dropped, at most 128 characters, as officially.
fn tool_name(name: &str) -> String {
    let mut out = String::new();
    let mut space = false;
    for c in name.trim().chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space {
            out.push('_');
            space = false;
        }
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
            out.push(c);
        }
    }
    out.chars().take(128).collect()
}

/// LangChain's message types, whose definitions a tool's schema leaves out.
const MESSAGE_TYPES: [&str; 12] = [
    "AIMessage",
    "AIMessageChunk",
    "HumanMessage",
    "HumanMessageChunk",
    "ChatMessage",
    "ChatMessageChunk",
    "SystemMessage",
    "SystemMessageChunk",
    "FunctionMessage",
    "FunctionMessageChunk",
    "ToolMessage",
    "ToolMessageChunk",
];
const SUPPORT_TYPES: [&str; 6] = [
    "ToolCall",
    "ToolCallChunk",
    "InvalidToolCall",
    "UsageMetadata",
    "InputTokenDetails",
    "OutputTokenDetails",
];

/// A graph's input schema for a model to fill in, as officially: a list of LangChain messages is
/// a string (the user's message), and the messages' definitions go.
fn simplify(schema: &mut Value) {
    let Some(defs) = schema.get_mut("$defs").and_then(Value::as_object_mut) else {
        return;
    };
    if !MESSAGE_TYPES.iter().any(|name| defs.contains_key(*name)) {
        return;
    }
    for name in MESSAGE_TYPES.iter().chain(&SUPPORT_TYPES) {
        defs.remove(*name);
    }
    if defs.is_empty()
        && let Some(schema) = schema.as_object_mut()
    {
        schema.remove("$defs");
    }
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (key, property) in properties.iter_mut() {
        if lists_messages(property) {
            let title = property.get("title").cloned().unwrap_or_else(|| json!(key));
            *property = json!({
                "type": "string",
                "title": title,
                "description": "The user message to send to the agent.",
            });
        }
    }
}

fn lists_messages(property: &Value) -> bool {
    if property["type"] != "array" {
        return false;
    }
    let items = &property["items"];
    let options = items["oneOf"]
        .as_array()
        .filter(|options| !options.is_empty())
        .or_else(|| items["anyOf"].as_array());
    options.into_iter().flatten().any(|option| {
        option["$ref"]
            .as_str()
            .and_then(|reference| reference.strip_prefix("#/$defs/"))
            .is_some_and(|name| MESSAGE_TYPES.contains(&name))
    })
}

/// `value` as Python's `repr` writes the object `json.loads` makes of it, which is what the
/// official server answers a tool call with.
pub fn python_repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(value, &mut out);
    out
}

fn write_repr(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (None, Some(u), _) => out.push_str(&u.to_string()),
            (None, None, Some(f)) => out.push_str(&float_repr(f)),
            (None, None, None) => out.push_str(&n.to_string()),
        },
        Value::String(text) => string_repr(text, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(item, out);
            }
            out.push(']');
        }
        Value::Object(fields) => {
            out.push('{');
            for (i, (key, item)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                string_repr(key, out);
                out.push_str(": ");
                write_repr(item, out);
            }
            out.push('}');
        }
    }
}

/// Python's `repr` of a float: the shortest digits that read back, in positional notation when
/// the exponent is from -4 to 15, else as `d.ddde+XX`.
fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let scientific = format!("{f:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..16).contains(&exponent) {
        let positional = format!("{f}");
        if positional.contains('.') {
            positional
        } else {
            format!("{positional}.0")
        }
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

/// Python's `repr` of a string: in single quotes unless it holds one and no double quote; what is
/// not printable escaped.
fn string_repr(text: &str, out: &mut String) {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if printable(c) => out.push(c),
            c if u32::from(c) < 0x100 => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c if u32::from(c) < 0x10000 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08x}", u32::from(c))),
        }
    }
    out.push(quote);
}

/// Python's `str.isprintable`, for the characters a text usually holds: not a control or format
/// character, and no separator but the space.
fn printable(c: char) -> bool {
    !(c.is_control()
        || matches!(
            c,
            '\u{a0}'
                | '\u{ad}'
                | '\u{600}'..='\u{605}'
                | '\u{61c}'
                | '\u{6dd}'
                | '\u{70f}'
                | '\u{1680}'
                | '\u{180e}'
                | '\u{2000}'..='\u{200f}'
                | '\u{2028}'..='\u{202f}'
                | '\u{205f}'..='\u{2064}'
                | '\u{2066}'..='\u{206f}'
                | '\u{3000}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{e000}'..='\u{f8ff}'
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_written_as_python_writes_it() {
        let value = json!({
            "a": [1, -2, 1.5, 1.0, 1e16, 1e-5, 0.0001, 123456.789],
            "b": {"t": true, "f": false, "n": null},
            "s": ["it's", "say \"hi\"", "both ' \"", "tab\tline\n", "\u{7f}\u{a0}é😀", "back\\slash"],
        });
        assert_eq!(
            python_repr(&value),
            r#"{'a': [1, -2, 1.5, 1.0, 1e+16, 1e-05, 0.0001, 123456.789], 'b': {'f': False, 'n': None, 't': True}, 's': ["it's", 'say "hi"', 'both \' "', 'tab\tline\n', '\x7f\xa0é😀', 'back\\slash']}"#
        );
    }

    #[test]
    fn an_assistants_name_becomes_a_tool_name_as_officially() {
        assert_eq!(tool_name("  my  agent\tv2 "), "my_agent_v2");
        assert_eq!(tool_name("ação/x.y-z"), "aox.y-z");
        assert_eq!(tool_name(&"a".repeat(200)).len(), 128);
    }
}
