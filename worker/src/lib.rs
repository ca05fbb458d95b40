//! The worker supervisor: claim loop, concurrency limit, heartbeat, drain and cancel wiring,
//! event publishing, sweeper, probes and metrics.
//!
//! Arrives with its own issue; this crate holds its place in the workspace. It will call
//! `mostrador-queue` for every database effect and never depend on `mostrador-api`.
