//! The model a Rust graph's nodes talk to, the platform's, whatever the app: the configured
//! OpenAI-compatible endpoint ([`ModelClient`], in [`client`]) or, without a base URL, the
//! built-in [`Offline`] model, answering as the app's script says ([`offline`]); and the
//! conversion between LangGraph's messages (the state the `langgraph-sdk` shows) and the
//! chat-completions messages a model reads.
//!
//! A node calls [`Model::ask`]: the answer's text streams to the run's `messages` mode as it
//! arrives, and the node gets the whole answer as an AI message for its state.
//!
//! # Layout
//!
//! A module is one noun, and its `//!` says in one sentence what it owns.
//!
//! * [`client`]: [`ModelClient`], streaming: tokens handed on as they arrive, tool-call deltas
//!   assembled by index, usage, retries with backoff only before the first byte, a per-chunk idle
//!   timeout; [`ModelConfig::from_values`] refuses a base URL without a context window. It runs
//!   reqwest on rustls with ring, which it installs (aws-lc would need cmake to build).
//! * [`offline`]: [`Offline`], deterministic and without network: it answers as the app's script
//!   says, streams text token by token after a configurable latency, and counts its calls.
//! * The crate's root: [`Model`] (either of them), [`Model::ask`], and LangGraph messages ⇄ chat
//!   messages.
//!
//! # Guarantees
//!
//! * A broken, stalled or refused answer fails the node for good; a model still unreachable after
//!   the client's retries is a retryable failure.

use mostrador_graph::{NodeContext, NodeError};
use serde_json::{Map, Value, json};
use uuid::Uuid;

pub mod client;
pub mod offline;

pub use client::{Completion, ModelClient, ModelConfig, ModelError, ToolCall};
pub use offline::Offline;

/// The model every graph of a process uses.
#[derive(Debug, Clone)]
pub enum Model {
    Remote(ModelClient),
    Offline(Offline),
}

/// One question to the model.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// What the question is for (`tienda`, `compras`, `fichas_writer`, ...): logs and metrics
    /// name it, and the offline model answers by it.
    pub task: &'static str,
    /// The instructions.
    pub system: &'a str,
    /// The conversation so far, as LangGraph messages.
    pub messages: &'a [Value],
    /// The tools the model may call, as chat-completions tool definitions.
    pub tools: &'a [Value],
}

impl Model {
    /// The name that answers, as shown in messages' `response_metadata.model_name`.
    pub fn name(&self) -> &str {
        match self {
            Model::Remote(client) => &client.config().model,
            Model::Offline(_) => offline::NAME,
        }
    }

    pub fn is_offline(&self) -> bool {
        matches!(self, Model::Offline(_))
    }

    /// Asks the model; each piece of the answer's text is streamed with `on_token`.
    ///
    /// # Errors
    ///
    /// [`ModelError`].
    pub async fn complete(
        &self,
        request: Request<'_>,
        on_token: impl FnMut(&str),
    ) -> Result<Completion, ModelError> {
        match self {
            Model::Remote(client) => {
                let mut messages = vec![json!({"role": "system", "content": request.system})];
                messages.extend(request.messages.iter().filter_map(to_chat));
                client.complete(&messages, request.tools, on_token).await
            }
            Model::Offline(offline) => Ok(offline.complete(request, on_token).await),
        }
    }

    /// Asks the model from a node: the answer streams to the run's `messages` mode, and comes
    /// back as an AI message (with its tool calls) to put in the state.
    ///
    /// # Errors
    ///
    /// An answer that broke off, stalled or was refused fails the node for good: asking again
    /// would be a storm of calls to a model that is struggling. A model still unreachable after
    /// the client's retries before the first byte is a retryable failure (the queue tries the run
    /// again later, with backoff, within its `max_attempts`).
    pub async fn ask(&self, ctx: &NodeContext, request: Request<'_>) -> Result<Value, NodeError> {
        let id = format!("run-{}", Uuid::now_v7());
        let started = std::time::Instant::now();
        let completion = self
            .complete(request, |token| {
                ctx.emit_message(json!({
                    "type": "AIMessageChunk",
                    "id": id,
                    "content": token,
                }));
            })
            .await
            .map_err(|err| {
                tracing::warn!(task = request.task, model = self.name(), error = %err, "the model failed");
                let message = format!("{err} ({})", request.task);
                match err {
                    // Still down after the client's retries: the run may try again later, with
                    // the queue's backoff.
                    ModelError::Unavailable(_) => NodeError::retryable(message),
                    ModelError::Rejected { .. }
                    | ModelError::Stream(_)
                    | ModelError::IdleTimeout(_) => NodeError::fatal(message),
                }
            })?;
        tracing::info!(
            task = request.task,
            model = self.name(),
            offline = self.is_offline(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            prompt_tokens = completion.prompt_tokens,
            completion_tokens = completion.completion_tokens,
            "the model answered"
        );
        Ok(ai_message(&id, &completion, self.name()))
    }
}

/// The AI message of a completion, as LangGraph keeps it.
fn ai_message(id: &str, completion: &Completion, model_name: &str) -> Value {
    let tool_calls: Vec<Value> = completion
        .tool_calls
        .iter()
        .map(|call| {
            json!({
                "id": call.id,
                "name": call.name,
                "args": serde_json::from_str::<Value>(&call.arguments).unwrap_or_else(|_| json!({})),
                "type": "tool_call",
            })
        })
        .collect();
    json!({
        "type": "ai",
        "id": id,
        "content": completion.content,
        "tool_calls": tool_calls,
        "response_metadata": {
            "model_name": model_name,
            "finish_reason": completion.finish_reason,
        },
        "usage_metadata": {
            "input_tokens": completion.prompt_tokens,
            "output_tokens": completion.completion_tokens,
        },
    })
}

/// A tool's answer to one tool call, as LangGraph keeps it.
pub fn tool_message(call: &Value, result: &Value) -> Value {
    json!({
        "type": "tool",
        "id": format!("tool-{}", Uuid::now_v7()),
        "tool_call_id": call["id"],
        "name": call["name"],
        "content": result.to_string(),
    })
}

/// A message's kind: LangGraph's `type`, or the chat `role` clients often send instead.
pub fn kind(message: &Value) -> &str {
    match message
        .get("type")
        .or_else(|| message.get("role"))
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "human" | "user" => "human",
        "ai" | "assistant" | "AIMessageChunk" => "ai",
        "tool" => "tool",
        "system" => "system",
        _ => "",
    }
}

/// A message's text (content given as a string or as a list of text parts).
pub fn text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The text of the last human message.
pub fn last_human(messages: &[Value]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| kind(m) == "human")
        .map(text)
        .unwrap_or_default()
}

/// The tool calls of the last message, when it is an AI message that made some.
pub fn pending_tool_calls(messages: &[Value]) -> Vec<Value> {
    messages
        .last()
        .filter(|m| kind(m) == "ai")
        .and_then(|m| m["tool_calls"].as_array())
        .cloned()
        .unwrap_or_default()
}

/// A LangGraph message as a chat-completions message (`None` for kinds a model does not read).
fn to_chat(message: &Value) -> Option<Value> {
    let content = text(message);
    Some(match kind(message) {
        "human" => json!({"role": "user", "content": content}),
        "system" => json!({"role": "system", "content": content}),
        "tool" => json!({
            "role": "tool",
            "tool_call_id": message["tool_call_id"],
            "content": content,
        }),
        "ai" => {
            let mut chat = Map::new();
            chat.insert("role".into(), json!("assistant"));
            chat.insert("content".into(), json!(content));
            let calls: Vec<Value> = message["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|call| {
                    json!({
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": call["args"].to_string()},
                    })
                })
                .collect();
            if !calls.is_empty() {
                chat.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(chat)
        }
        _ => return None,
    })
}

/// A tool definition for the model.
pub fn tool(name: &str, description: &str, parameters: Value) -> Value {
    json!({
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    })
}

/// The first JSON object in a model's answer (models wrap JSON in prose or code fences).
pub fn json_in(answer: &str) -> Option<Value> {
    let start = answer.find('{')?;
    let end = answer.rfind('}')?;
    serde_json::from_str(answer.get(start..=end)?).ok()
}
