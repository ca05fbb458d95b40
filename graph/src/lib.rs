//! The graph engine: state channels and reducers, nodes, edges, `Send` fan-out, supersteps,
//! interrupts and `Command`, run control (drain, cancel), stream events and the [`Checkpointer`]
//! trait with an in-memory implementation.
//!
//! It follows LangGraph's execution model and keeps its guarantees (see [`run`] for
//! the list). It knows nothing of SQL or HTTP: the Postgres checkpointer
//! lives in `mostrador-queue`.
//!
//! # Layout
//!
//! A module is one noun, and its `//!` says in one sentence what it owns.
//!
//! * [`channel`]: the state and its reducers.
//! * [`node`]: what a node sees ([`NodeContext`]) and returns ([`Command`], [`Send`]), interrupts,
//!   retries.
//! * [`graph`]: [`StateGraph`], the builder, and [`Graph`], the compiled graph.
//! * [`run`]: executing a graph on a thread, superstep by superstep: pending writes,
//!   interrupts and breakpoints, drain and cancel, durability. Its private modules: `start` (where
//!   a run starts: input, a past checkpoint as a new branch, a resume, a command, or the latest),
//!   `next` (the tasks a superstep triggers or a command adds), `subgraph` (a compiled graph as a
//!   node, inside its parent's superstep) and `save` (the checkpoint after a superstep).
//! * [`control`]: [`RunOptions`] with its [`Breakpoints`] and [`Durability`], and [`RunControl`]
//!   (drain, cancel).
//! * [`task`]: running a node under its retry policy and timeout, and reading tasks back from
//!   pending writes.
//! * [`state`]: a thread's state, history and updates outside a run.
//! * [`checkpoint`]: checkpoints, pending writes, [`Checkpointer`] (scoped to a subgraph's
//!   namespace by [`Checkpointer::scoped`]), [`MemoryCheckpointer`].
//! * [`stream`]: the events a run emits, by [`StreamMode`]; [`StreamModes`]: the modes a run builds
//!   and sends, so a run builds no event nobody reads.
//! * [`store`]: [`Store`], the long-term memory a run is given and its nodes reach through
//!   [`NodeContext::store`]: get, put, delete, search and `search_similar`.
//! * `conformance` (feature `conformance`): the engine's guarantees as scenarios generic over the
//!   checkpointer; `graph/tests/engine.rs` runs them on memory, `queue/tests/checkpoint.rs` on
//!   Postgres.
//!
//! # Guarantees
//!
//! * A task's id ([`NodeContext::task_id`]) names its thread, the checkpoint it runs from and its
//!   place in it: the same every time the task runs again, unique elsewhere.
//! * A superstep's tasks are identified by their position in the checkpoint's `next`, and a task's
//!   writes are saved whole with a `__task__` marker, so a resumed superstep re-runs only the tasks
//!   that did not finish.
//! * A checkpoint names a version for every channel, and a branch from a past checkpoint bumps
//!   versions above the thread's highest (`version_floor`), so no version is used twice.
//! * A subgraph runs on a checkpointer scoped to its namespace (`node:task`); its events are
//!   namespaced and its interrupt is its parent task's.

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
