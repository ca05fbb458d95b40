//! The HTTP api: `langgraph-sdk` compatible routes, JWT auth, thread authorization, SSE,
//! backpressure, probes, metrics and OpenAPI.
//!
//! Arrives with its own issue; this crate holds its place in the workspace. It will call
//! `mostrador-queue` for every database effect and never depend on `mostrador-worker`.
