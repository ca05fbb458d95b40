//! The worker: claims runs, executes their graphs with synchronous checkpoints, publishes their
//! events, and honours drain and cancel.
//!
//! * [`config`]: [`WorkerConfig`], its defaults and their validation.
//! * [`supervisor`]: the per-process loop: claim while there is room (woken by NOTIFY, polling as
//!   a fallback), heartbeat, sweep, relay cancels, drain on shutdown.
//! * [`execute`](crate::execute): one claimed run from start to finish.
//! * [`python`](crate::python) and [`runner`]: runs of Python graphs, executed by LangGraph's own
//!   engine in runner processes, with this side writing their checkpoints and events.
//! * [`services`] and [`sandbox`]: what deep agents' tools ask of the worker (their thread's
//!   files, a sandbox per command, subagent slots, spans).
//! * [`store`]: the Store of a run's thread's owner, for Python and Rust graphs alike.
//! * [`publish`]: one task that writes all runs' events and completions in batched transactions.
//! * [`telemetry`]: the probes and metrics, served on the worker's HTTP port.
//!
//! It calls `mostrador-queue` for every database effect and never depends on `mostrador-api`.

pub mod config;
pub mod execute;
mod incarnation;
pub mod publish;
mod python;
pub mod runner;
pub mod sandbox;
pub mod services;
pub mod store;
pub mod supervisor;
pub mod telemetry;
mod timed;

pub use config::{Registry, WorkerConfig};
pub use execute::{Executor, Finish, RunHandle};
pub use runner::PythonConfig;
pub use sandbox::SandboxConfig;
pub use services::AgentConfig;
pub use supervisor::run;
pub use telemetry::Telemetry;

/// Why the worker, or a run's transition, failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid worker configuration: {0}")]
    Config(String),

    /// The database failed; a run whose transition failed stays `running` until its lease
    /// expires and the sweeper gives it back.
    #[error(transparent)]
    Queue(#[from] mostrador_queue::Error),

    /// Events or a completion could not be written, even after trying again; `transient` when
    /// the database's failure was ([`mostrador_queue::Error::is_transient`]).
    #[error("publishing events failed: {message}")]
    Publish { message: String, transient: bool },

    /// A run's task panicked (a bug in a node or in the worker).
    #[error("the run's task panicked: {0}")]
    Panicked(String),
}

impl Error {
    /// Whether the database failed for a while (out of disk, unreachable, failing over), which
    /// another try may not meet.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Queue(err) => err.is_transient(),
            Self::Publish { transient, .. } => *transient,
            Self::Config(_) | Self::Panicked(_) => false,
        }
    }
}
