//! The model client, the built-in offline model, tools with idempotency keys and the four retail
//! graphs.
//!
//! * [`model`]: the client of an OpenAI-compatible chat-completions endpoint.
//! * [`offline`]: the deterministic model used when no base URL is configured.
//! * [`llm`]: [`Model`], either of them, and LangGraph messages ⇄ chat messages.
//! * [`retail`]: the `retail` schema's statements, and the demo data. Tools with external
//!   effects (the refund) run once per idempotency key through `mostrador_queue::effects`.
//! * [`graphs`]: `tienda`, `cliente`, `compras` and `fichas`.
//! * [`approvals`]: the managers' approval queue, a route the binary registers with the api.
//! * [`MIGRATOR`]: the `retail` schema's migrations.

pub mod approvals;
pub mod graphs;
pub mod llm;
pub mod model;
pub mod offline;
pub mod retail;

/// The retail app's migrations (`agents/migrations/`: its `retail` schema), run after the
/// platform's by `mostrador migrate`. Their versions (4, 13) are those they had when they were
/// the platform's, so databases migrated then need nothing; new ones take versions the platform
/// will not use (from 100000).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate::Migrator {
    ignore_missing: true,
    ..sqlx::migrate!("./migrations")
};

/// The schema the retail app's tables live in, which the runtime role is granted.
pub const SCHEMA: &str = "retail";

pub use llm::{Model, Request};
pub use model::{Completion, ModelClient, ModelConfig, ModelError, ToolCall};
pub use offline::Offline;
