//! The built-in offline model: deterministic, no network, used when no base URL is configured,
//! so that `mostrador dev` and the tests need no model server. An app gives it a script
//! ([`Script`]): what to answer to each request, reading the same prompts and tool results a
//! model would (the retail app's answers its four graphs' questions). Without one it answers
//! that it has no answer.
//!
//! It streams its text token by token (a word at a time), after `latency` and with
//! `token_interval` between tokens, and counts its calls by task. Its answers name it: the AI
//! messages it writes carry `response_metadata.model_name = "mostrador-offline"`, and each call
//! is logged with `offline = true`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use uuid::Uuid;

use crate::client::{Completion, ToolCall};
use crate::{Request, text};

/// The model name the offline model answers as.
pub const NAME: &str = "mostrador-offline";

/// What the offline model answers to a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Tool calls: each tool's name and arguments.
    Call(Vec<(&'static str, Value)>),
    /// Text, streamed a word at a time.
    Text(String),
}

/// An app's offline answers.
pub type Script = fn(Request<'_>) -> Answer;

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct Offline {
    /// Wait before the first token (a model's time to first token).
    pub latency: Duration,
    /// Wait between tokens.
    pub token_interval: Duration,
    script: Script,
    calls: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl Default for Offline {
    fn default() -> Self {
        Self::new(Duration::ZERO, Duration::ZERO, Self::default_script)
    }
}

impl Offline {
    /// The script of an offline model no app gave one: it says it has no answer.
    pub fn default_script(request: Request<'_>) -> Answer {
        Answer::Text(format!(
            "(the offline model has no answer for the task {:?})",
            request.task
        ))
    }

    pub fn new(latency: Duration, token_interval: Duration, script: Script) -> Self {
        Self {
            latency,
            token_interval,
            script,
            calls: Arc::default(),
        }
    }

    /// How many times a task was asked.
    pub fn calls(&self, task: &str) -> u64 {
        self.calls
            .lock()
            .expect("calls lock is never poisoned")
            .get(task)
            .copied()
            .unwrap_or(0)
    }

    pub async fn complete(
        &self,
        request: Request<'_>,
        mut on_token: impl FnMut(&str),
    ) -> Completion {
        *self
            .calls
            .lock()
            .expect("calls lock is never poisoned")
            .entry(request.task.to_owned())
            .or_default() += 1;
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        let answer = (self.script)(request);
        let prompt_tokens = request
            .messages
            .iter()
            .map(|m| text(m).len() as u64 / 4)
            .sum::<u64>()
            + request.system.len() as u64 / 4;
        let mut completion = Completion {
            prompt_tokens: Some(prompt_tokens),
            ..Completion::default()
        };
        match answer {
            Answer::Call(calls) => {
                completion.finish_reason = Some("tool_calls".into());
                completion.completion_tokens = Some(calls.len() as u64 * 8);
                completion.tool_calls = calls
                    .into_iter()
                    .map(|(name, arguments)| ToolCall {
                        id: format!("call_{}", Uuid::now_v7().simple()),
                        name: name.to_owned(),
                        arguments: arguments.to_string(),
                    })
                    .collect();
            }
            Answer::Text(answer) => {
                let mut tokens = 0;
                for token in answer.split_inclusive(' ') {
                    if tokens > 0 && !self.token_interval.is_zero() {
                        tokio::time::sleep(self.token_interval).await;
                    }
                    on_token(token);
                    tokens += 1;
                }
                completion.content = answer;
                completion.completion_tokens = Some(tokens);
                completion.finish_reason = Some("stop".into());
            }
        }
        completion
    }
}
