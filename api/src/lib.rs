//! The HTTP api: `langgraph-sdk` compatible routes, JWT and API-key auth, thread authorization,
//! SSE, backpressure, probes, metrics and OpenAPI.
//!
//! [`app`] (configuration and state), [`router`](mod@router) (every route and its layers), [`auth`]
//! (verifying and minting tokens, looking up API keys), [`policy`] (who may do what, graph by
//! graph), [`authorize`] (the one thread-visibility check), [`error`] (the error body),
//! [`extract`] (the caller and JSON bodies), [`assistants`], [`threads`], [`state`], [`runs`] and
//! [`stream`] (SSE), [`store`] (the Store), [`crons`], [`dashboard`] (`/` and `/queue`),
//! [`probes`], [`metrics`], [`openapi`], [`trace`] and [`webhooks`].
//! It calls `mostrador-queue` for every database effect, reads graphs' structure from
//! `mostrador-graph`, executes none, and never depends on `mostrador-worker` nor on an app (an
//! app's routes come in as [`AppRoutes`]).

pub mod app;
pub mod assistants;
pub mod auth;
pub mod authorize;
pub mod cors;
pub mod crons;
pub mod custom_auth;
pub mod custom_routes;
pub mod dashboard;
pub mod error;
pub mod extract;
pub mod files;
pub mod metrics;
pub mod openapi;
pub mod policy;
pub mod probes;
pub mod project_code;
pub mod router;
pub mod runs;
pub mod serve;
pub mod state;
pub mod store;
pub mod store_index;
pub mod stream;
pub mod threads;
pub mod trace;
pub mod webhooks;
pub mod wire;

pub use app::{ApiConfig, AppRoutes, AppState};
pub use auth::{AuthConfig, AuthError, Authenticator, Caller, ClaimPaths, Credential};
pub use error::ApiError;
pub use policy::Policy;
pub use router::router;
pub use serve::{metrics_router, serve, serve_metrics};
