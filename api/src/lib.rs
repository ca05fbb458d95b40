//! The HTTP api: `langgraph-sdk` compatible routes, JWT auth, thread authorization, SSE,
//! backpressure, probes, metrics and OpenAPI.
//!
//! So far: [`auth`] (verifying and minting tokens), [`authorize`] (the one thread-visibility
//! check) and [`error`] (the error body). The routes come next. It calls `mostrador-queue` for
//! every database effect and never depends on `mostrador-worker`.

pub mod auth;
pub mod authorize;
pub mod error;

pub use auth::{AuthConfig, AuthError, Authenticator, Caller, ClaimPaths, Role};
pub use error::ApiError;
