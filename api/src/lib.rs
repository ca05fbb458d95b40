//! The HTTP api: `langgraph-sdk` compatible routes, JWT and API-key auth, thread authorization,
//! SSE, backpressure, probes, metrics and OpenAPI.
//!
//! It calls `mostrador-queue` for every database effect, reads graphs' structure from
//! `mostrador-graph`, executes none, and never depends on `mostrador-worker` nor on an app (an
//! app's routes come in as [`AppRoutes`]).
//!
//! # Layout
//!
//! A module is one noun, and its `//!` says in one sentence what it owns.
//!
//! * [`app`]: [`ApiConfig`] and [`AppState`]: the pool, authenticator, policy, graphs, the
//!   process's one `Listener`, the drain signal, and the slots of streams and waits.
//! * [`router`](mod@router): every route of `openapi::ROUTES` and of the apps, wrapped as its kind
//!   says: a request timeout except on streams and waits, every body read whole within the timeout
//!   and its limit (408, 413), 503 while draining except the probes, CORS outermost.
//! * [`serve`](mod@serve): the api process, [`run`]: its LISTEN connection, webhook sender and
//!   drain; the connection loop, with a header-read timeout and a connection cap; `/metrics` on a
//!   port of its own.
//! * [`cors`]: the origins the operator lists, or a project's `http.cors`.
//! * [`auth`]: RS256 tokens against a JWKS (an unknown `kid` refreshes it at most every 30 s),
//!   HS256 for development, or an API key; issuer, audience and expiry always checked.
//! * [`extract`]: the caller, and JSON bodies parsed straight into their route's type, their cost
//!   estimated from their bytes first and held to a process-wide budget (422, 413).
//! * [`policy`]: authorization as a TOML policy, graph by graph; [`Policy::visibility`] turns it
//!   into the queue's search filter.
//! * [`authorize`]: [`authorize::visible_thread`], the one check every route with a thread id goes
//!   through; `may_write`, `may_start`, `may_schedule`, `may_decide`; `thread_for` (`auth.path`).
//! * [`project_code`]: the api's helper processes for a project's own code, asked typed
//!   [`project_code::Ask`]s, one JSON line each.
//! * [`custom_auth`]: a project's `auth.path` handlers, asked about typed events
//!   ([`custom_auth::event`], keyed as the official server keys them), their filters matched in
//!   Rust for a row read by id and in SQL (`mostrador.auth_admits`) for searches.
//! * [`custom_routes`]: a project's `http.app`, asked before mostrador's routes.
//! * [`store_index`]: a project's `store.index`, embedding what clients put and search with.
//! * [`error`]: `{"detail": ...}`, `WWW-Authenticate` on 401, `Retry-After` on 503, and
//!   [`ApiError::failed`]: 503 for a transient failure, else a 500 with a correlation id.
//! * [`wire`]: the types the api answers with, as the SDK reads them, and `Page`, which holds every
//!   list within `MOSTRADOR_MAX_PAGE_BYTES` (413 past it).
//! * [`openapi`]: `/openapi.json` from the router's own route table, its schemas derived from the
//!   types the routes take and answer and its query parameters from their query types, and
//!   `/docs`.
//! * [`assistants`]: one per graph, ids as the official server derives them, and those callers
//!   create ([`assistants::configured`]); a Python graph's schemas are a 503 until described.
//! * [`threads`]: threads, their search, copy and prune; a taken id is the same 409 whoever holds
//!   it.
//! * [`state`]: a thread's state, at a checkpoint, its history and updates; a Rust graph's written
//!   while the thread is idle, a Python graph's queued as a run.
//! * [`runs`]: create, get, list, cancel, delete; [`accept`](mod@runs::accept) validates and
//!   enqueues, subscribed first when the request follows the run; a wait learns its end from its
//!   events.
//! * [`stream`]: SSE of a run's events, `id` = `seq`, closed after its `end`;
//!   [`stream::thread`]: a thread's runs one after another, the caller checked before each run.
//! * [`store`]: `/store`, each item its caller's own.
//! * [`files`]: a thread's files, for its owner only.
//! * [`a2a`]: A2A at `/a2a/{assistant_id}`: an assistant as an agent, a task a run on its
//!   conversation's thread.
//! * [`jsonrpc`]: JSON-RPC over HTTP, as MCP and A2A frame it.
//! * [`mcp`]: MCP at `/mcp`: the caller's assistants as tools, a call a stateless run waited for.
//! * [`crons`]: scheduled runs, a caller's own only, in IANA time zones.
//! * [`webhooks`]: the operator's allow-list of hosts, and `send`: at most 64 at once and 4 per
//!   receiver, pinned to an address that is not loopback or link-local, with no redirect.
//! * [`dashboard`]: `/`, and `GET /queue` for the policy's operators; the development token is
//!   filled in only by `mostrador dev` and only for a loopback `Host`.
//! * [`probes`]: `/ok`, `/info`, `/live`, and `/ready`, which asks the database once a second at
//!   most.
//! * [`metrics`] and [`trace`]: Prometheus metrics, and each request's span and trace id.
//!
//! # Guarantees
//!
//! * A thread the caller may not see is the same 404 as a missing one, whatever the policy or a
//!   project's filters; changing a thread is its owner's, answering its interrupts `may_decide`'s.
//! * Bad input is a 4xx and changes nothing; no input may produce a 500.
//! * A client told to come back later (503, 429) created nothing: a stream's slot is taken before
//!   its run is created.
//! * A dead or slow helper process is a 503 with `Retry-After`, never an allow.
//! * An unknown, revoked or expired credential is the same 401; an unreachable identity provider,
//!   or a database down while a key is looked up, is a 503.

pub mod a2a;
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
pub mod jsonrpc;
pub mod mcp;
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
pub use serve::{RunError, metrics_router, run, serve, serve_metrics};
