//! The client of an OpenAI-compatible chat-completions endpoint (vLLM, LiteLLM, ...), streaming.
//!
//! * Tokens reach the caller as they arrive (`on_token`), for the `messages` stream mode.
//! * Tool-call deltas are assembled by their `index`; usage comes from `stream_options.include_usage`.
//! * Fields a server adds (`reasoning`, `reasoning_content`, ...) are ignored.
//! * A failure before the first byte of the answer (connection refused, 429, 5xx) is retried with
//!   backoff; once the answer streams, a failure ends the call: retrying then would repeat tokens
//!   the client has already shown.
//! * Each chunk must arrive within the idle timeout; dropping the future closes the connection.

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};

/// How a process reaches its model.
#[derive(Clone)]
pub struct ModelConfig {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// Tokens the model accepts in all; the graphs size their prompts to it.
    pub context_window: u32,
    /// The longest wait for the next chunk of an answer.
    pub idle_timeout: Duration,
    /// Tries before the first byte, the first included.
    pub attempts: usize,
}

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("context_window", &self.context_window)
            .finish_non_exhaustive()
    }
}

impl ModelConfig {
    /// The configuration from `MODEL_BASE_URL`, `MODEL_NAME`, `MODEL_API_KEY` and
    /// `MODEL_CONTEXT_WINDOW` values: `None` without a base URL (the offline model answers).
    ///
    /// # Errors
    ///
    /// A base URL without a context window, or one that is not a positive number: the process must
    /// refuse to start rather than guess how much the model can read.
    pub fn from_values(
        base_url: Option<String>,
        model: Option<String>,
        api_key: Option<String>,
        context_window: Option<String>,
    ) -> Result<Option<Self>, String> {
        let Some(base_url) = base_url.filter(|url| !url.trim().is_empty()) else {
            return Ok(None);
        };
        let context_window = context_window
            .ok_or_else(|| {
                "MODEL_CONTEXT_WINDOW must be set when MODEL_BASE_URL is: the graphs size their \
                 prompts to it"
                    .to_owned()
            })?
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|tokens| *tokens > 0)
            .ok_or_else(|| "MODEL_CONTEXT_WINDOW must be a positive number of tokens".to_owned())?;
        Ok(Some(Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.unwrap_or_else(|| "default".into()),
            api_key: api_key.filter(|key| !key.is_empty()),
            context_window,
            idle_timeout: Duration::from_secs(60),
            attempts: 4,
        }))
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// JSON, as the model wrote it.
    pub arguments: String,
}

/// A whole answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The model could not be reached, or kept failing before answering.
    #[error("the model is unavailable: {0}")]
    Unavailable(String),
    /// The model refused the request (a 4xx other than 429).
    #[error("the model refused the request ({status}): {body}")]
    Rejected { status: u16, body: String },
    /// The answer broke off or was malformed after it began.
    #[error("the model's answer broke off: {0}")]
    Stream(String),
    #[error("the model sent nothing for {0:?}")]
    IdleTimeout(Duration),
}

/// Streams chat completions from an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct ModelClient {
    http: reqwest::Client,
    config: ModelConfig,
}

impl ModelClient {
    /// # Errors
    ///
    /// The HTTP client cannot be built.
    pub fn new(config: ModelConfig) -> Result<Self, ModelError> {
        // reqwest is built without a crypto provider of its own; ring is ours (installing it
        // again is a no-op).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|err| ModelError::Unavailable(err.to_string()))?;
        Ok(Self { http, config })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Asks the model; `on_token` gets each piece of the answer's text as it arrives.
    ///
    /// # Errors
    ///
    /// [`ModelError`].
    pub async fn complete(
        &self,
        messages: &[Value],
        tools: &[Value],
        mut on_token: impl FnMut(&str),
    ) -> Result<Completion, ModelError> {
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !tools.is_empty() {
            body["tools"] = json!(tools);
        }
        let response = self.first_byte(&body).await?;
        let mut events = response.bytes_stream().eventsource();
        let mut completion = Completion::default();
        loop {
            let next = tokio::time::timeout(self.config.idle_timeout, events.next())
                .await
                .map_err(|_| ModelError::IdleTimeout(self.config.idle_timeout))?;
            let event = match next {
                Some(Ok(event)) => event,
                Some(Err(err)) => return Err(ModelError::Stream(err.to_string())),
                None => {
                    return Err(ModelError::Stream(
                        "the connection closed before [DONE]".into(),
                    ));
                }
            };
            if event.data.trim() == "[DONE]" {
                return Ok(completion);
            }
            let chunk: Value = serde_json::from_str(&event.data)
                .map_err(|err| ModelError::Stream(format!("a chunk is not JSON: {err}")))?;
            absorb(&mut completion, &chunk, &mut on_token);
        }
    }

    /// Sends the request until the answer begins: retried with backoff on connection errors,
    /// 429 and 5xx.
    async fn first_byte(&self, body: &Value) -> Result<reqwest::Response, ModelError> {
        let url = format!("{}/chat/completions", self.config.base_url);
        let send = || async {
            let mut request = self.http.post(&url).json(body);
            if let Some(key) = &self.config.api_key {
                request = request.bearer_auth(key);
            }
            let response = request
                .send()
                .await
                .map_err(|err| ModelError::Unavailable(err.to_string()))?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let text = response.text().await.unwrap_or_default();
            if status.as_u16() == 429 || status.is_server_error() {
                Err(ModelError::Unavailable(format!("{status}: {text}")))
            } else {
                Err(ModelError::Rejected {
                    status: status.as_u16(),
                    body: text,
                })
            }
        };
        send.retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(200))
                .with_max_times(self.config.attempts.saturating_sub(1)),
        )
        .when(|err| matches!(err, ModelError::Unavailable(_)))
        .notify(|err, delay| tracing::warn!(error = %err, ?delay, "model call failed before answering: retrying"))
        .await
    }
}

/// Folds one streamed chunk into the answer.
fn absorb(completion: &mut Completion, chunk: &Value, on_token: &mut impl FnMut(&str)) {
    if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
        completion.prompt_tokens = usage["prompt_tokens"].as_u64();
        completion.completion_tokens = usage["completion_tokens"].as_u64();
    }
    let Some(choice) = chunk["choices"].get(0) else {
        return;
    };
    if let Some(reason) = choice["finish_reason"].as_str() {
        completion.finish_reason = Some(reason.to_owned());
    }
    let delta = &choice["delta"];
    if let Some(text) = delta["content"].as_str().filter(|text| !text.is_empty()) {
        completion.content.push_str(text);
        on_token(text);
    }
    for call in delta["tool_calls"].as_array().into_iter().flatten() {
        let index = call["index"].as_u64().unwrap_or(0) as usize;
        if completion.tool_calls.len() <= index {
            completion.tool_calls.resize(index + 1, ToolCall::default());
        }
        let assembled = &mut completion.tool_calls[index];
        if let Some(id) = call["id"].as_str() {
            assembled.id = id.to_owned();
        }
        if let Some(name) = call["function"]["name"].as_str() {
            assembled.name.push_str(name);
        }
        if let Some(arguments) = call["function"]["arguments"].as_str() {
            assembled.arguments.push_str(arguments);
        }
    }
}
