//! The worker: claims runs, executes their graphs with synchronous checkpoints, publishes their
//! events, and honours drain and cancel.
//!
//! It calls `mostrador-queue` for every database effect and never depends on `mostrador-api`.
//!
//! # Layout
//!
//! A module is one noun, and its `//!` says in one sentence what it owns.
//!
//! * [`config`]: [`WorkerConfig`], its defaults and their validation (its `runners` name the
//!   graphs of a `langgraph.json`, by language), and the [`Registry`] of Rust graphs.
//! * [`supervisor`]: the per-process loop ([`run`]), a `select!` that reads as a
//!   table of contents: drain, cancel at the drain deadline, reap and refill slots, relay cancels,
//!   heartbeat, claim when woken by NOTIFY or the poll, sweep expired leases, threads and items.
//! * `incarnation` (private): which process a worker is (boot id, pid, start time), so that its
//!   next incarnation under the same name takes its runs back at once.
//! * [`execute`]: one claimed run of a Rust graph from start to finish, on a
//!   fenced [`mostrador_queue::PgCheckpointer`], ending as its outcome calls for.
//! * `in_runner` (private): one claimed run of a Python or JavaScript graph
//!   ([`Executor::execute_in_runner`]), driven in its runner process while this side answers its
//!   checkpointer, Store and services.
//! * [`runner`]: the pools of runner processes ([`runner::Runners`], one per language), placing each
//!   run as its [`runner::Isolation`] allows; new Python runners fork from a warm template unless
//!   `--python-no-fork`.
//!   [`runner::protocol`] types the messages (versioned), and [`runner::checkpointer`] answers the
//!   runner's checkpointer calls with `mostrador_queue::state::saver`. Before the worker is ready, a
//!   runner describes its graphs ([`runner::Runners::describe`]) into `mostrador_queue::data::graphs`.
//! * [`services`] and [`sandbox`]: what deep agents' tools ask of the worker: their thread's files,
//!   a sandbox per command, subagent slots, and spans of model calls, tool calls and delegations.
//! * [`store`]: the Store of a run's thread's owner, for Python graphs' `store` calls and as
//!   [`store::ThreadStore`] for Rust graphs' nodes, embedded through [`store::Embed`].
//! * [`publish`]: one task that writes every run's events, described states and endings in
//!   batched transactions.
//! * [`telemetry`]: `/live`, `/ready` (503 before registration, while draining, and while the
//!   database is unreachable or on another schema) and `/metrics`, on the worker's port.
//! * `timed` (private): a run's checkpointer that times its durable writes.
//!
//! # Guarantees
//!
//! * Executing takes the claim: a run is ended once, and nothing at all is written for a run whose
//!   lease was lost.
//! * A run's last events and its ending commit together, in one commit of the publisher; a
//!   streamed run's events are written at once, others within [`publish::FLUSH_INTERVAL`].
//! * A run holds its slot until it hands its ending to the publisher; runs waiting for their
//!   ending's commit are at most as many as the slots, so a publisher that cannot commit stops the
//!   claims.
//! * A run whose end could not be recorded (the database failed, or its task panicked) stays
//!   `running` and this worker's, so the worker fails it retryably at its next heartbeat or poll.
//! * At start a worker ends the lease of a previous worker of its name whose process is surely
//!   gone, so its first sweep takes those runs back at once.
//! * A runner's run's cancel not honoured within [`runner::CANCEL_GRACE`] kills its process; a
//!   process that dies fails every run it hosted retryably; a run over the memory limit
//!   (`--python-memory-limit-mib`) fails retryably and its process takes no new run.
//! * Runners hold none of the worker's settings in their environment, the worker is not dumpable,
//!   and as root it starts them without capabilities, so no runner reads its secrets.
//! * A graph's Store is its run's thread's owner's, looked up by the worker: a graph cannot name
//!   another owner.

pub mod config;
pub mod execute;
mod in_runner;
mod incarnation;
pub mod publish;
pub mod runner;
pub mod sandbox;
pub mod services;
pub mod store;
pub mod supervisor;
pub mod telemetry;
mod timed;

pub use config::{Registry, WorkerConfig};
pub use execute::{Executor, Finish, RunHandle};
pub use runner::RunnerConfig;
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
