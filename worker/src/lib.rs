//! The worker: claims runs, executes their graphs with synchronous checkpoints, publishes their
//! events, and honours drain and cancel.
//!
//! Today this crate holds [`execute`](crate::execute): one claimed run from start to finish. The
//! supervisor (claim loop, heartbeat, sweeper, signals, probes and metrics) builds on it. It calls
//! `mostrador-queue` for every database effect and never depends on `mostrador-api`.

pub mod execute;

pub use execute::{Finish, RunHandle, execute};
