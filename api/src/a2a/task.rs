//! A2A's objects (tasks, messages, parts, artifacts, the stream's updates) and how LangGraph's
//! map onto them, as officially: a message's parts become the graph's input, the thread's
//! messages a task's history, the last agent message of a turn its answer.

use std::collections::HashMap;

use mostrador_queue::RunStatus;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::mcp::python_repr;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Role {
    #[serde(rename = "ROLE_USER")]
    User,
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

impl Role {
    /// A role as the 0.3 spec writes it (`user`, `agent`); another name unchanged.
    pub fn spec_name(name: &str) -> String {
        match name {
            "ROLE_USER" => "user".into(),
            "ROLE_AGENT" => "agent".into(),
            other => other.into(),
        }
    }
}

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskState {
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
}

impl TaskState {
    /// A state as the 0.3 spec writes it (`input-required`); another name unchanged.
    pub fn spec_name(name: &str) -> String {
        match name.strip_prefix("TASK_STATE_") {
            Some(state) => state.to_ascii_lowercase().replace('_', "-"),
            None => name.into(),
        }
    }

    /// A state by its v1 name (`TASK_STATE_WORKING`) or its 0.3 one (`working`).
    pub fn named(name: &str) -> Option<Self> {
        [
            Self::Submitted,
            Self::Working,
            Self::Completed,
            Self::Failed,
            Self::Canceled,
            Self::InputRequired,
        ]
        .into_iter()
        .find(|state| {
            let v1 = serde_json::to_value(state).unwrap_or_default();
            v1 == name || Self::spec_name(v1.as_str().unwrap_or_default()) == name
        })
    }

    /// The state of a task whose current run is in `status`: an interrupted run was cancelled
    /// (a graph's own interrupt ends its run successfully and leaves its thread `interrupted`).
    pub fn of_run(status: RunStatus) -> Self {
        match status {
            RunStatus::Pending => Self::Submitted,
            RunStatus::Running => Self::Working,
            RunStatus::Success => Self::Completed,
            RunStatus::Interrupted => Self::Canceled,
            RunStatus::Error | RunStatus::Timeout => Self::Failed,
        }
    }

    /// Whether the task takes no more messages.
    pub fn terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Canceled)
    }
}

/// A task: a conversation's (`context_id`'s) unit of work.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub kind: &'static str,
    pub id: String,
    pub context_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Message>>,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<Artifact>>,
}

#[derive(Debug, Serialize)]
pub struct Status {
    pub state: TaskState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

impl Status {
    /// `state`, now.
    pub fn now(state: TaskState) -> Self {
        Self {
            state,
            message: None,
            timestamp: Some(now()),
        }
    }
}

/// The time now as Python's `datetime.now(UTC).isoformat()` writes it.
pub fn now() -> String {
    iso(chrono::Utc::now())
}

/// A time as Python's `isoformat` writes it.
pub fn iso(time: chrono::DateTime<chrono::Utc>) -> String {
    time.format("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string()
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub kind: &'static str,
    pub role: Role,
    pub parts: Vec<Part>,
    pub message_id: String,
    pub task_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
}

impl Message {
    /// The agent's message of one text, with a new id.
    pub fn agent_text(text: String, task_id: &str, context_id: Option<&str>) -> Self {
        Self {
            kind: "message",
            role: Role::Agent,
            parts: vec![Part::Text { text }],
            message_id: uuid::Uuid::new_v4().to_string(),
            task_id: task_id.into(),
            context_id: context_id.map(Into::into),
        }
    }
}

/// A part of a message or an artifact.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Part {
    Text { text: String },
    Data { data: Value },
    File { file: Map<String, Value> },
}

impl Part {
    fn has_content(&self) -> bool {
        match self {
            Part::Text { text } => !text.is_empty(),
            Part::Data { .. } | Part::File { .. } => true,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    pub name: &'static str,
    pub description: String,
    pub parts: Vec<Part>,
}

impl Artifact {
    /// What the assistant answered.
    pub fn response(parts: Vec<Part>, assistant_id: &str) -> Self {
        Self {
            artifact_id: uuid::Uuid::new_v4().to_string(),
            name: "Assistant Response",
            description: format!("Response from assistant {assistant_id}"),
            parts,
        }
    }

    /// The graph's interrupts: what it waits for.
    pub fn interrupts(interrupts: &Value) -> Self {
        let parts = interrupts
            .as_array()
            .into_iter()
            .flatten()
            .map(|interrupt| {
                let mut data = Map::new();
                data.insert("id".into(), interrupt["id"].clone());
                data.insert("value".into(), interrupt["value"].clone());
                if let Some(schema) = interrupt.get("response_schema").filter(|s| !s.is_null()) {
                    data.insert("response_schema".into(), schema.clone());
                }
                Part::Data {
                    data: Value::Object(data),
                }
            })
            .collect();
        Self {
            artifact_id: uuid::Uuid::new_v4().to_string(),
            name: "Interrupt",
            description: "Agent requires input to continue".into(),
            parts,
        }
    }
}

/// A change of a streamed task's status.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusUpdate {
    pub task_id: String,
    pub context_id: String,
    pub kind: &'static str,
    pub status: Status,
    pub r#final: bool,
}

/// An artifact of a streamed task.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactUpdate {
    pub task_id: String,
    pub context_id: String,
    pub kind: &'static str,
    pub artifact: Artifact,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub append: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_chunk: Option<bool>,
}

/// A task's id: its thread and the run that began it.
pub fn task_id(context_id: &str, run_id: &str) -> String {
    format!("{context_id}:{run_id}")
}

/// A LangChain message's label as LangChain compares them: lower case, no `_` or `-`.
fn label(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_default()
        .to_ascii_lowercase()
        .replace(['_', '-'], "")
}

/// Who wrote a LangChain message, by its `type` and `role`; none for a tool's, a system's or a
/// message whose two say different things.
pub fn role_of(message: &Value) -> Option<Role> {
    let (kind, role) = (label(&message["type"]), label(&message["role"]));
    let by_kind = match kind.as_str() {
        "" | "chat" | "chatmessage" | "chatmessagechunk" => None,
        "human" | "humanmessage" | "humanmessagechunk" => Some(Role::User),
        "ai" | "aimessage" | "aimessagechunk" => Some(Role::Agent),
        _ => return None,
    };
    let by_role = match role.as_str() {
        "" => None,
        "human" | "user" => Some(Role::User),
        "agent" | "assistant" => Some(Role::Agent),
        _ => return None,
    };
    match (by_kind, by_role) {
        (Some(a), Some(b)) if a != b => None,
        (a, b) => a.or(b),
    }
}

/// A message's content as text: its text blocks joined.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| match block {
                Value::String(text) => Some(text.as_str()),
                Value::Object(block) if block.get("type") == Some(&"text".into()) => {
                    block.get("text").and_then(Value::as_str)
                }
                _ => None,
            })
            .collect(),
        other => python_repr(other),
    }
}

/// A message's content as parts: text (runs of text blocks joined) and files (media blocks).
pub fn content_parts(content: &Value) -> Vec<Part> {
    let blocks = match content {
        Value::String(text) => return vec![Part::Text { text: text.clone() }],
        Value::Null => return Vec::new(),
        Value::Array(blocks) => blocks,
        other => {
            return vec![Part::Text {
                text: python_repr(other),
            }];
        }
    };
    let mut parts = Vec::new();
    let mut text = String::new();
    for block in blocks {
        match block {
            Value::String(more) => text.push_str(more),
            Value::Object(block) => match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    text.push_str(block.get("text").and_then(Value::as_str).unwrap_or(""))
                }
                Some("audio" | "file" | "image" | "video") => {
                    if !text.is_empty() {
                        parts.push(Part::Text {
                            text: std::mem::take(&mut text),
                        });
                    }
                    parts.push(Part::File {
                        file: media_file(block),
                    });
                }
                _ => {}
            },
            _ => {}
        }
    }
    if !text.is_empty() {
        parts.push(Part::Text { text });
    }
    parts
}

/// A media block as an A2A file: its bytes (base64) or its address, its type and name.
fn media_file(block: &Map<String, Value>) -> Map<String, Value> {
    let mut file = Map::new();
    let present = |key: &str| block.get(key).filter(|value| !value.is_null());
    if let Some(bytes) = present("base64").or_else(|| present("data")) {
        file.insert("bytes".into(), bytes.clone());
    } else if let Some(url) = present("url") {
        file.insert("uri".into(), url.clone());
    }
    if let Some(mime) = block
        .get("mime_type")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
    {
        file.insert("mimeType".into(), mime.into());
    }
    let name = block.get("filename").or_else(|| {
        block
            .get("extras")
            .and_then(|extras| extras.get("filename"))
    });
    if let Some(name) = name.and_then(Value::as_str).filter(|name| !name.is_empty()) {
        file.insert("name".into(), name.into());
    }
    file
}

/// A tool's result, for a message that answers a tool call.
pub fn tool_result(message: &Value) -> Option<Value> {
    let id = message["tool_call_id"]
        .as_str()
        .filter(|id| !id.is_empty())?;
    let mut result = Map::new();
    result.insert("toolCallId".into(), id.into());
    let content = &message["content"];
    if !content.is_null() && content != "" {
        result.insert("content".into(), content.clone());
    }
    for key in ["name", "status"] {
        if let Some(value) = message[key].as_str().filter(|value| !value.is_empty()) {
            result.insert(key.into(), value.into());
        }
    }
    Some(Value::Object(result))
}

fn tool_results(results: Vec<Value>) -> Part {
    let mut data = Map::new();
    data.insert("tool_results".into(), Value::Array(results));
    Part::Data {
        data: Value::Object(data),
    }
}

/// The agent's message a streamed `messages/*` event's messages make: their text joined, the
/// tool results in one data part.
pub fn streamed_message(items: &[Value], task_id: &str, context_id: &str) -> Message {
    let mut text = String::new();
    let mut results = Vec::new();
    for item in items.iter().filter(|item| item.is_object()) {
        if role_of(item).is_none() {
            results.extend(tool_result(item));
            continue;
        }
        text.push_str(&content_text(&item["content"]));
    }
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(Part::Text { text });
    }
    if !results.is_empty() {
        parts.push(tool_results(results));
    }
    if parts.is_empty() {
        parts.push(Part::Text {
            text: String::new(),
        });
    }
    Message {
        parts,
        ..Message::agent_text(String::new(), task_id, Some(context_id))
    }
}

/// Whether a streamed message says anything (a text, or data).
pub fn says_something(message: &Message) -> bool {
    message.parts.iter().any(|part| match part {
        Part::Text { text } => !text.is_empty(),
        Part::Data { data } => !data.is_null(),
        Part::File { .. } => false,
    })
}

/// The messages after the last of the user's.
fn current_turn(messages: &[Value]) -> &[Value] {
    match messages
        .iter()
        .rposition(|message| role_of(message) == Some(Role::User))
    {
        Some(last) => &messages[last + 1..],
        None => messages,
    }
}

/// The answer of a run whose final state is `result`: the last agent message of its turn that
/// says something; `str(result)`, as Python writes it, for a state without messages or an error.
pub fn answer_parts(result: &Value, turn: Option<&[Value]>) -> Vec<Part> {
    let whole = || {
        vec![Part::Text {
            text: python_repr(result),
        }]
    };
    if result.get("__error__").is_some() {
        return whole();
    }
    let Some(messages) = result
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
    else {
        return whole();
    };
    let turn = turn.unwrap_or_else(|| current_turn(messages));
    for message in turn.iter().rev() {
        if role_of(message) == Some(Role::Agent) && message.get("content").is_some() {
            let parts = content_parts(&message["content"]);
            if parts.iter().any(Part::has_content) {
                return parts;
            }
        }
    }
    vec![Part::Text {
        text: String::new(),
    }]
}

/// Which part of a conversation a task's history shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The whole conversation.
    Context,
    /// The task's own messages.
    Task,
}

/// A task's history: the thread's messages the user and the agent said (a tool's result as
/// data), each attributed to the task of the turn it is in, the last `length` of them.
pub fn history(
    messages: &[Value],
    task_id: &str,
    context_id: &str,
    length: Option<usize>,
    scope: Scope,
    tasks_by_start: Option<&HashMap<String, String>>,
) -> Vec<Message> {
    let mut current = (scope == Scope::Context).then(|| task_id.to_owned());
    let mut out = Vec::new();
    for message in messages.iter().filter(|message| message.is_object()) {
        let stamp = &message["additional_kwargs"]["a2a"];
        if let Some(stamped) = stamp["task_id"].as_str().filter(|id| !id.is_empty()) {
            let known = tasks_by_start.is_none_or(|tasks| {
                stamped == task_id || tasks.values().any(|task| task == stamped)
            });
            current = known.then(|| stamped.to_owned());
        } else if let Some(start) = stamp["task_start_id"].as_str().filter(|id| !id.is_empty()) {
            match tasks_by_start {
                Some(tasks) => current = tasks.get(start).cloned(),
                None if scope == Scope::Task => current = None,
                None => {}
            }
        }
        let Some(current) = &current else {
            continue;
        };
        let (role, parts) = match role_of(message) {
            None => match tool_result(message) {
                Some(result) => (Role::Agent, vec![tool_results(vec![result])]),
                None => continue,
            },
            Some(role) => {
                let parts = content_parts(&message["content"]);
                if role == Role::Agent && !parts.iter().any(Part::has_content) {
                    continue;
                }
                if parts.is_empty() {
                    (
                        role,
                        vec![Part::Text {
                            text: String::new(),
                        }],
                    )
                } else {
                    (role, parts)
                }
            }
        };
        out.push(Message {
            kind: "message",
            role,
            parts,
            message_id: message["id"]
                .as_str()
                .filter(|id| !id.is_empty())
                .map_or_else(|| uuid::Uuid::now_v7().to_string(), str::to_owned),
            task_id: current.clone(),
            context_id: Some(context_id.to_owned()),
        });
    }
    if scope == Scope::Task {
        out.retain(|message| message.task_id == task_id);
    }
    match length {
        None => out,
        Some(length) => {
            let skip = out.len().saturating_sub(length);
            out.split_off(skip)
        }
    }
}

/// The messages a run added, beside all of them: after those its input checkpoint had.
pub struct RunMessages {
    pub messages: Vec<Value>,
    pub added_from: Option<usize>,
}

impl RunMessages {
    /// `messages` (the run's last), after `before` (its input's).
    pub fn between(before: &[Value], messages: Vec<Value>) -> Self {
        if messages.len() >= before.len() && messages[..before.len()] == *before {
            return Self {
                added_from: Some(before.len()),
                messages,
            };
        }
        let ids: Vec<&str> = before.iter().filter_map(|m| m["id"].as_str()).collect();
        let unique = ids.len() == before.len()
            && ids.iter().enumerate().all(|(i, id)| !ids[..i].contains(id));
        if !unique {
            return Self {
                messages,
                added_from: None,
            };
        }
        let last_kept = messages
            .iter()
            .rposition(|m| m["id"].as_str().is_some_and(|id| ids.contains(&id)));
        Self {
            added_from: Some(last_kept.map_or(0, |i| i + 1)),
            messages,
        }
    }

    /// The messages the run added.
    pub fn added(&self) -> Option<&[Value]> {
        self.added_from
            .map(|from| &self.messages[from.min(self.messages.len())..])
    }

    /// The messages, the first the run added stamped with `task_id` unless it has a stamp.
    pub fn stamped(mut self, task_id: &str) -> Vec<Value> {
        let Some(first) = self.added_from.and_then(|from| self.messages.get_mut(from)) else {
            return self.messages;
        };
        let Value::Object(first) = first else {
            return self.messages;
        };
        let kwargs = first
            .entry("additional_kwargs")
            .or_insert_with(|| Value::Object(Map::new()));
        if !kwargs.is_object() {
            *kwargs = Value::Object(Map::new());
        }
        let stamp = kwargs
            .as_object_mut()
            .expect("an object")
            .entry("a2a")
            .or_insert_with(|| Value::Object(Map::new()));
        if !stamp.is_object() {
            *stamp = Value::Object(Map::new());
        }
        let stamp = stamp.as_object_mut().expect("an object");
        let stamped = ["task_id", "task_start_id"].iter().any(|key| {
            stamp
                .get(*key)
                .and_then(Value::as_str)
                .is_some_and(|id| !id.is_empty())
        });
        if !stamped {
            stamp.insert("task_id".into(), task_id.into());
        }
        self.messages
    }
}

/// A message's parts as the graph's input: each text its own message (one message of content
/// blocks when a file is among them), each data part's keys at the top; the LangGraph role of
/// an A2A role. An error says why the parts cannot be read.
pub fn graph_input(
    parts: &[Value],
    role: &str,
    message_id: &Value,
    stamp: &Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let role = if matches!(role, "ROLE_USER" | "user") {
        "human"
    } else {
        "assistant"
    };
    let blocks_wanted = parts.iter().any(|part| part.get("file").is_some());
    let mut messages = Vec::new();
    let mut blocks = Vec::new();
    let mut data = Map::new();
    let message = |content: Value| {
        let mut message = Map::new();
        message.insert("role".into(), role.into());
        message.insert("content".into(), content);
        message.insert("id".into(), message_id.clone());
        message
    };
    for part in parts {
        let Value::Object(part) = part else {
            return Err(
                "Each message part must be an object. A2A agents support 'text', \
                        'data', and 'file' parts only."
                    .into(),
            );
        };
        let present: Vec<&str> = ["text", "file", "data"]
            .into_iter()
            .filter(|key| part.contains_key(*key))
            .collect();
        if present.len() > 1 {
            return Err(format!(
                "Each message part must contain exactly one of 'text', 'file', or 'data'. Got \
                 multiple: {}.",
                python_repr(&Value::from(present))
            ));
        }
        if let Some(text) = part.get("text") {
            if blocks_wanted {
                let mut block = Map::new();
                block.insert("type".into(), "text".into());
                block.insert("text".into(), text.clone());
                blocks.push(Value::Object(block));
            } else {
                messages.push(message(text.clone()));
            }
        } else if let Some(file) = part.get("file") {
            blocks.push(Value::Object(file_block(file)?));
        } else if let Some(more) = part.get("data") {
            let Value::Object(more) = more else {
                return Err("DataPart must contain a JSON object in the 'data' field".into());
            };
            data.extend(more.clone());
        } else {
            return Err(
                "Unsupported part type. A2A agents support 'text', 'data', and 'file' parts only."
                    .into(),
            );
        }
    }
    if blocks_wanted {
        messages.push(message(Value::Array(blocks)));
    }
    if !stamp.is_empty() {
        for message in &mut messages {
            let mut kwargs = Map::new();
            kwargs.insert("a2a".into(), Value::Object(stamp.clone()));
            message.insert("additional_kwargs".into(), Value::Object(kwargs));
        }
    }
    if messages.is_empty() && data.is_empty() {
        return Err("Message must contain at least one valid text, data, or file part".into());
    }
    let mut input = Map::new();
    if !messages.is_empty() {
        input.insert(
            "messages".into(),
            Value::Array(messages.into_iter().map(Value::Object).collect()),
        );
    }
    input.extend(data);
    Ok(input)
}

/// An A2A file as a LangChain content block (an address is passed on, never fetched).
fn file_block(file: &Value) -> Result<Map<String, Value>, String> {
    let Value::Object(file) = file else {
        return Err("FilePart must contain a 'file' object with 'bytes' or 'uri'.".into());
    };
    let (bytes, uri) = (file.get("bytes"), file.get("uri"));
    let mime = file.get("mimeType").and_then(Value::as_str);
    let kind = match mime.and_then(|mime| mime.split('/').next()) {
        Some(top)
            if matches!(
                top.trim().to_ascii_lowercase().as_str(),
                "image" | "audio" | "video"
            ) =>
        {
            top.trim().to_ascii_lowercase()
        }
        _ => "file".into(),
    };
    let mut block = Map::new();
    block.insert("type".into(), kind.into());
    match (bytes.filter(|b| !b.is_null()), uri.filter(|u| !u.is_null())) {
        (None, None) => return Err("FilePart 'file' must contain either 'bytes' or 'uri'.".into()),
        (Some(_), Some(_)) => {
            return Err("FilePart 'file' must contain only one of 'bytes' or 'uri'.".into());
        }
        (Some(bytes), None) => {
            block.insert("base64".into(), bytes.clone());
        }
        (None, Some(uri)) => {
            block.insert("url".into(), uri.clone());
        }
    }
    if let Some(mime) = mime.filter(|mime| !mime.is_empty()) {
        block.insert("mime_type".into(), mime.into());
    }
    if let Some(name) = file
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        let mut extras = Map::new();
        extras.insert("filename".into(), name.into());
        block.insert("extras".into(), Value::Object(extras));
    }
    Ok(block)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_messages_parts_become_the_graphs_input_as_officially() {
        let stamp = json!({"task_start_id": "s"})
            .as_object()
            .cloned()
            .expect("an object");
        let input = graph_input(
            &[
                json!({"kind": "text", "text": "hi"}),
                json!({"kind": "data", "data": {"k": 1}}),
            ],
            "user",
            &json!("m1"),
            &stamp,
        )
        .expect("read");
        assert_eq!(
            Value::Object(input),
            json!({"messages": [{"role": "human", "content": "hi", "id": "m1",
                "additional_kwargs": {"a2a": {"task_start_id": "s"}}}], "k": 1})
        );
        assert!(
            graph_input(
                &[json!({"text": "a", "data": {}})],
                "user",
                &json!("m"),
                &Map::new()
            )
            .is_err()
        );
        assert!(graph_input(&[json!({"kind": "text"})], "user", &json!("m"), &Map::new()).is_err());
    }

    #[test]
    fn an_answer_is_the_last_agent_message_of_the_turn_or_the_state_as_python_writes_it() {
        let result = json!({"messages": [
            {"type": "human", "content": "q"},
            {"type": "ai", "content": "first"},
            {"type": "tool", "content": "x", "tool_call_id": "c"},
            {"type": "ai", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        ]});
        assert_eq!(
            answer_parts(&result, None),
            vec![Part::Text { text: "ab".into() }]
        );
        assert_eq!(
            answer_parts(&json!({"request": "buy", "ok": true}), None),
            vec![Part::Text {
                text: "{'ok': True, 'request': 'buy'}".into()
            }]
        );
    }

    #[test]
    fn a_history_attributes_each_message_to_the_task_of_its_turn() {
        let tasks: HashMap<String, String> =
            [("s1".into(), "c:r1".into()), ("s2".into(), "c:r2".into())].into();
        let messages = [
            json!({"type": "human", "content": "one", "id": "h1", "additional_kwargs": {"a2a": {"task_start_id": "s1"}}}),
            json!({"type": "ai", "content": "uno", "id": "a1"}),
            json!({"type": "human", "content": "two", "id": "h2", "additional_kwargs": {"a2a": {"task_start_id": "s2"}}}),
            json!({"type": "ai", "content": "", "id": "a2"}),
            json!({"type": "tool", "content": "t", "tool_call_id": "call", "name": "f", "id": "t2"}),
            json!({"type": "ai", "content": "dos", "id": "a3"}),
        ];
        let all = history(&messages, "c:r2", "c", None, Scope::Context, Some(&tasks));
        let ids: Vec<(&str, &str)> = all
            .iter()
            .map(|m| (m.message_id.as_str(), m.task_id.as_str()))
            .collect();
        assert_eq!(
            ids,
            [
                ("h1", "c:r1"),
                ("a1", "c:r1"),
                ("h2", "c:r2"),
                ("t2", "c:r2"),
                ("a3", "c:r2")
            ]
        );
        let own = history(&messages, "c:r2", "c", Some(2), Scope::Task, Some(&tasks));
        assert_eq!(
            own.iter()
                .map(|m| m.message_id.as_str())
                .collect::<Vec<_>>(),
            ["t2", "a3"]
        );
    }

    #[test]
    fn the_messages_a_run_added_follow_its_inputs() {
        let before = [json!({"id": "a"})];
        let run = RunMessages::between(&before, vec![json!({"id": "a"}), json!({"id": "b"})]);
        assert_eq!(run.added().expect("added"), [json!({"id": "b"})]);
        let stamped = run.stamped("t");
        assert_eq!(stamped[1]["additional_kwargs"]["a2a"]["task_id"], "t");
    }
}
