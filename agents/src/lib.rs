//! The model client, the built-in offline model, tools with idempotency keys and the four retail
//! graphs, with the registry that maps an assistant (graph) id to a compiled graph.
//!
//! Arrives with its own issue; this crate holds its place in the workspace.
