//! What a node sees and returns: its context (state, `Send` argument, interrupts, stream emitters)
//! and its [`Command`] (writes and routing).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::channel::State;
use crate::store::Store;
use crate::stream::{EventSink, StreamEvent, StreamMode, StreamModes};

/// The name of the virtual node before the first superstep.
pub const START: &str = "__start__";
/// The name of the virtual node after the last superstep.
pub const END: &str = "__end__";

/// A task for `node` with its own argument instead of the state (LangGraph's `Send`).
#[derive(Debug, Clone, PartialEq)]
pub struct Send {
    pub node: String,
    pub arg: Value,
}

impl Send {
    pub fn new(node: impl Into<String>, arg: Value) -> Self {
        Self {
            node: node.into(),
            arg,
        }
    }
}

/// Where execution goes next.
#[derive(Debug, Clone, PartialEq)]
pub enum Goto {
    Node(String),
    Send(Send),
}

impl From<&str> for Goto {
    fn from(node: &str) -> Self {
        Goto::Node(node.to_owned())
    }
}

impl From<String> for Goto {
    fn from(node: String) -> Self {
        Goto::Node(node)
    }
}

impl From<Send> for Goto {
    fn from(send: Send) -> Self {
        Goto::Send(send)
    }
}

/// What a node returns: writes to channels, and optionally where to go next (in addition to the
/// graph's edges).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Command {
    pub update: Vec<(String, Value)>,
    pub goto: Vec<Goto>,
}

impl Command {
    /// No writes, no routing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes `value` to `channel`.
    pub fn set(mut self, channel: impl Into<String>, value: Value) -> Self {
        self.update.push((channel.into(), value));
        self
    }

    /// Also goes to `goto` (a node name or a [`Send`]).
    pub fn goto(mut self, goto: impl Into<Goto>) -> Self {
        self.goto.push(goto.into());
        self
    }
}

/// Why a node did not return a [`Command`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NodeError {
    /// The node called [`NodeContext::interrupt`] and has no resume value for it yet. Propagate it
    /// with `?`; the engine records the interrupt.
    #[error("interrupted")]
    Interrupted(Value),
    /// The node failed. A retryable failure is tried again under the node's retry policy.
    #[error("{message}")]
    Failed { message: String, retryable: bool },
}

impl NodeError {
    pub fn fatal(message: impl Into<String>) -> Self {
        NodeError::Failed {
            message: message.into(),
            retryable: false,
        }
    }

    pub fn retryable(message: impl Into<String>) -> Self {
        NodeError::Failed {
            message: message.into(),
            retryable: true,
        }
    }
}

/// When a node is tried again after a retryable failure or a timeout.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    pub initial_interval: Duration,
    pub backoff_factor: f64,
    pub max_interval: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_interval: Duration::from_millis(500),
            backoff_factor: 2.0,
            max_interval: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The delay before attempt `attempt + 1` (attempts count from 1).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = self
            .backoff_factor
            .powi(attempt.saturating_sub(1).min(30) as i32);
        self.initial_interval.mul_f64(factor).min(self.max_interval)
    }
}

/// Everything a running node may read or do.
#[derive(Clone)]
pub struct NodeContext {
    pub(crate) node: Arc<str>,
    pub(crate) task_id: Arc<str>,
    pub(crate) state: Arc<State>,
    pub(crate) arg: Option<Value>,
    pub(crate) config: Arc<Value>,
    /// Resume values for this task's interrupts, in the order the node reaches them.
    pub(crate) resume: Arc<Vec<Value>>,
    pub(crate) interrupts_reached: Arc<AtomicUsize>,
    pub(crate) events: EventSink,
    /// The modes the run streams: events of others are not sent.
    pub(crate) stream_modes: StreamModes,
    pub(crate) store: Option<Store>,
}

impl std::fmt::Debug for NodeContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeContext")
            .field("node", &self.node)
            .field("task_id", &self.task_id)
            .finish()
    }
}

impl NodeContext {
    /// The state as of the start of this superstep.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// One channel's value (`None` when it was never written).
    pub fn get(&self, channel: &str) -> Option<&Value> {
        self.state.get(channel).filter(|value| !value.is_null())
    }

    /// The argument of a task started by a [`Send`].
    pub fn arg(&self) -> Option<&Value> {
        self.arg.as_ref()
    }

    /// The run's long-term memory, as LangGraph's `get_store()` gives a node its store.
    ///
    /// # Errors
    ///
    /// A fatal error when the run was given none.
    pub fn store(&self) -> Result<&Store, NodeError> {
        self.store
            .as_ref()
            .ok_or_else(|| NodeError::fatal("this run has no store"))
    }

    /// The run's configuration (`config.configurable` in LangGraph terms).
    pub fn config(&self) -> &Value {
        &self.config
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// This task's id: unique across threads (copies included) and supersteps (it names the thread
    /// and the checkpoint the task runs from) and the same every time the task runs again (after
    /// a crash, a drain or an interrupt's resume), so it is a sound idempotency key for effects.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// Pauses the graph for a human. The first time, the node stops here (return the error with
    /// `?`) and the run ends `interrupted` with `value` shown to the client. When the run is
    /// resumed, the node runs again **from its start**, and this call returns the resume value.
    /// Several interrupts in one node are matched to resume values by order.
    ///
    /// # Errors
    ///
    /// [`NodeError::Interrupted`] when no resume value is available for this interrupt yet.
    pub fn interrupt(&self, value: Value) -> Result<Value, NodeError> {
        let index = self.interrupts_reached.fetch_add(1, Ordering::SeqCst);
        match self.resume.get(index) {
            Some(resume) => Ok(resume.clone()),
            None => Err(NodeError::Interrupted(value)),
        }
    }

    /// Whether the answer the last [`interrupt`](Self::interrupt) returned is this task's latest:
    /// the one given by the run now resuming it, whose caller the run's configuration names.
    /// Earlier answers were given by earlier runs; a node that went on past its interrupt does not
    /// wait again, so each of them was one the node refused.
    pub fn answer_is_latest(&self) -> bool {
        self.interrupts_reached.load(Ordering::SeqCst) == self.resume.len()
    }

    /// Streams a chunk of a model's answer (`messages` mode) while the node runs.
    pub fn emit_message(&self, chunk: Value) {
        self.emit(StreamMode::Messages, chunk);
    }

    /// Streams a custom value (`custom` mode).
    pub fn emit_custom(&self, value: Value) {
        self.emit(StreamMode::Custom, value);
    }

    fn emit(&self, mode: StreamMode, data: Value) {
        if !self.stream_modes.contains(mode) {
            return;
        }
        (self.events)(StreamEvent {
            mode,
            node: Some(self.node.to_string()),
            data,
            namespace: Vec::new(),
        });
    }
}
