//! The model client, the built-in offline model, tools with idempotency keys and the four retail
//! graphs, with the registry that maps an assistant (graph) id to a compiled graph.
//!
//! So far: [`model`], the client of an OpenAI-compatible chat-completions endpoint. The offline
//! model, the tools and the graphs come next.

pub mod model;

pub use model::{Completion, ModelClient, ModelConfig, ModelError, ToolCall};
