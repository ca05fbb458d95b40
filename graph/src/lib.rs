//! The graph engine: state channels and reducers, nodes, edges, `Send` fan-out, supersteps,
//! interrupts and `Command`, run control (drain, cancel), stream events and the [`Checkpointer`]
//! trait with an in-memory implementation.
//!
//! It follows LangGraph's execution model and keeps its guarantees (see [`run`](crate::run) for
//! the list). It knows nothing of SQL or HTTP: the Postgres checkpointer
//! lives in `mostrador-queue`.
//!
//! # Layout
//!
//! * [`channel`]: the state and its reducers.
//! * [`node`]: what a node sees ([`NodeContext`]) and returns ([`Command`]), interrupts, retries.
//! * [`graph`]: [`StateGraph`], the builder, and [`Graph`], the compiled graph.
//! * [`run`](crate::run): executing a graph on a thread, superstep by superstep.
//! * [`control`]: run options and [`RunControl`] (drain, cancel).
//! * [`task`]: running a node, and reading a task's state back from its pending writes.
//! * [`state`]: a thread's state, history and updates.
//! * [`checkpoint`]: checkpoints, pending writes, [`Checkpointer`], [`MemoryCheckpointer`].
//! * [`stream`]: the events a run emits.

pub mod channel;
pub mod checkpoint;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod control;
pub mod graph;
pub mod node;
pub mod run;
pub mod state;
pub mod store;
pub mod stream;
pub mod task;

pub use channel::{Reducer, State};
pub use checkpoint::{Checkpoint, Checkpointer, MemoryCheckpointer, Saved};
pub use control::{Breakpoints, Durability, RunControl, RunOptions};
pub use graph::{Graph, StateGraph};
pub use node::{Command, END, Goto, NodeContext, NodeError, RetryPolicy, START, Send};
pub use run::{Outcome, Resume, RunInput, RunResult};
pub use state::{StateSnapshot, TaskState};
pub use store::{Item, Store, StoreBackend, StoreError, StoreFuture};
pub use stream::{EventSink, StreamEvent, StreamMode, StreamModes};
pub use task::Interrupt;

/// `Result` with the engine's [`Error`].
pub type Result<T = ()> = std::result::Result<T, Error>;

/// Why a run or a state operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid graph: {0}")]
    InvalidGraph(String),

    #[error("invalid input: {0}")]
    InvalidInput(String),

    #[error("invalid update from node {node:?} to channel {channel:?}: {reason}")]
    InvalidUpdate {
        node: String,
        channel: String,
        reason: String,
    },

    #[error("no node named {0:?}")]
    UnknownNode(String),

    /// A node failed (after its retries). `retryable` is the node's word on whether trying
    /// again may succeed: a fatal failure (bad input, an answer that broke off) is not.
    #[error("node {node:?} failed: {message}")]
    NodeFailed {
        node: String,
        message: String,
        retryable: bool,
    },

    #[error("recursion limit of {0} supersteps reached without finishing")]
    RecursionLimit(usize),

    #[error("the thread waits for no interrupt: there is nothing to resume")]
    NothingToResume,

    #[error("no such checkpoint")]
    CheckpointNotFound,

    #[error("checkpointer: {0}")]
    Checkpointer(#[source] checkpoint::BoxError),
}
