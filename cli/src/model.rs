//! The model the graphs call, from `MODEL_*` (flags too).

use std::time::Duration;

use clap::Args;
use mostrador_model::{Model, ModelClient, ModelConfig, Offline, offline};

use crate::duration::parse_duration;

/// The model the graphs call: an OpenAI-compatible server, or the built-in offline model when no
/// base URL is set.
#[derive(Debug, Args)]
pub struct ModelArgs {
    /// The chat-completions server (vLLM, LiteLLM, ...), e.g. http://litellm:4000/v1 [default:
    /// none: the built-in offline model answers].
    #[arg(long, env = "MODEL_BASE_URL")]
    model_base_url: Option<String>,

    /// The model to ask for.
    #[arg(long, env = "MODEL_NAME")]
    model_name: Option<String>,

    /// The server's API key.
    #[arg(long, env = "MODEL_API_KEY", hide_env_values = true)]
    model_api_key: Option<String>,

    /// Tokens the model accepts in all; required with a base URL.
    #[arg(long, env = "MODEL_CONTEXT_WINDOW")]
    model_context_window: Option<String>,

    /// The offline model's wait before its first token (e.g. 200ms).
    #[arg(long, env = "MOSTRADOR_OFFLINE_LATENCY", value_parser = parse_duration, default_value = "0s")]
    offline_latency: Duration,

    /// The offline model's wait between tokens.
    #[arg(long, env = "MOSTRADOR_OFFLINE_TOKEN_INTERVAL", value_parser = parse_duration, default_value = "0s")]
    offline_token_interval: Duration,
}

impl ModelArgs {
    /// The model; refuses a base URL without a context window. Offline, it answers as `script`
    /// says (the app's, [`App::offline`](crate::App::offline)).
    pub fn model(&self, script: offline::Script) -> anyhow::Result<Model> {
        let config = ModelConfig::from_values(
            self.model_base_url.clone(),
            self.model_name.clone(),
            self.model_api_key.clone(),
            self.model_context_window.clone(),
        )
        .map_err(|why| anyhow::anyhow!("invalid model configuration: {why}"))?;
        Ok(match config {
            Some(config) => {
                tracing::info!(base_url = %config.base_url, model = %config.model, context_window = config.context_window, "the graphs call the configured model");
                Model::Remote(ModelClient::new(config)?)
            }
            None => {
                tracing::warn!(
                    model = offline::NAME,
                    "no MODEL_BASE_URL: the built-in offline model answers (deterministic, for development and tests)"
                );
                Model::Offline(Offline::new(
                    self.offline_latency,
                    self.offline_token_interval,
                    script,
                ))
            }
        })
    }
}
