//! How a run is controlled: its options (concurrency, recursion limit, durability, breakpoints)
//! and [`RunControl`], the drain and cancel handle that any task or thread may use.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::store::Store;
use crate::stream::StreamModes;

/// Supersteps one run may execute before it fails, when the caller sets no limit.
pub const RECURSION_LIMIT_DEFAULT: usize = 25;
/// Tasks of one superstep running at once, when the caller sets no limit.
pub const MAX_CONCURRENCY_DEFAULT: usize = 16;

/// When checkpoints are saved (LangGraph's `durability`: `"sync"`, `"async"`, `"exit"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Each checkpoint and each task's writes are saved before execution goes on.
    #[default]
    Sync,
    /// A superstep's checkpoint is saved while the next superstep runs; writes as they come.
    Async,
    /// Only the last checkpoint (and its pending writes) is saved, when the run stops.
    Exit,
}

/// Nodes a run stops at without their asking (LangGraph's `interrupt_before` and
/// `interrupt_after`): the run ends interrupted, with no interrupt to answer, and a run without
/// input goes on from there. Written as LangGraph writes them: `"*"`, or a list of node names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Breakpoints {
    #[default]
    None,
    /// Every node (`"*"`).
    All,
    Nodes(Vec<String>),
}

impl Serialize for Breakpoints {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::None => serializer.serialize_none(),
            Self::All => serializer.serialize_str("*"),
            Self::Nodes(nodes) => nodes.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Breakpoints {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            All(String),
            Nodes(Vec<String>),
        }
        match Option::<Written>::deserialize(deserializer) {
            Ok(None) => Ok(Self::None),
            Ok(Some(Written::All(all))) if all == "*" => Ok(Self::All),
            Ok(Some(Written::Nodes(nodes))) => Ok(Self::Nodes(nodes)),
            _ => Err(serde::de::Error::custom(
                "must be \"*\" or a list of node names",
            )),
        }
    }
}

impl Breakpoints {
    pub fn is_none(&self) -> bool {
        *self == Self::None
    }

    pub fn matches(&self, node: &str) -> bool {
        match self {
            Breakpoints::None => false,
            Breakpoints::All => true,
            Breakpoints::Nodes(nodes) => nodes.iter().any(|n| n == node),
        }
    }
}

/// How a run is executed.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    pub max_concurrency: usize,
    pub recursion_limit: usize,
    pub durability: Durability,
    /// Passed to every node ([`NodeContext::config`]); a `run_id` in it is recorded in metadata.
    pub config: Value,
    /// Stops before a superstep with a task of these nodes; not before the first superstep of a
    /// run that goes on from where another stopped (it stopped there).
    pub interrupt_before: Breakpoints,
    /// Stops after a superstep with a task of these nodes, once its checkpoint is saved.
    pub interrupt_after: Breakpoints,
    /// Long-term memory its nodes reach ([`NodeContext::store`](crate::NodeContext::store)).
    pub store: Option<Store>,
    /// The modes whose events the run builds and sends to its sink (`debug` implies building
    /// `tasks` and `checkpoints`, which it wraps). Events of the other modes are never made: a
    /// run streamed in `values` alone does not copy its state into the others.
    pub stream_modes: StreamModes,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            max_concurrency: MAX_CONCURRENCY_DEFAULT,
            recursion_limit: RECURSION_LIMIT_DEFAULT,
            durability: Durability::Sync,
            config: Value::Object(Map::new()),
            interrupt_before: Breakpoints::None,
            interrupt_after: Breakpoints::None,
            store: None,
            stream_modes: StreamModes::ALL,
        }
    }
}

/// Drain and cancel for one run. Clones share it; safe to use from any task or thread.
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    pub(crate) drain: CancellationToken,
    pub(crate) cancel: CancellationToken,
    drain_reason: Arc<Mutex<Option<String>>>,
}

impl RunControl {
    pub fn new() -> Self {
        Self::default()
    }

    /// Let the tasks in flight finish and save them, start no other, then stop with
    /// [`Outcome::Drained`].
    pub fn request_drain(&self, reason: impl Into<String>) {
        let mut drain_reason = self
            .drain_reason
            .lock()
            .expect("drain reason lock is never poisoned");
        drain_reason.get_or_insert_with(|| reason.into());
        self.drain.cancel();
    }

    /// Abort the tasks in flight now and stop with [`Outcome::Cancelled`].
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    pub fn is_drain_requested(&self) -> bool {
        self.drain.is_cancelled()
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Resolves once a drain is requested. Cancel-safe.
    pub async fn drain_requested(&self) {
        self.drain.cancelled().await;
    }

    /// Resolves once the run is cancelled. Cancel-safe.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }

    /// Why the drain was requested (empty before it is).
    pub fn drain_reason(&self) -> String {
        self.reason()
    }

    pub(crate) fn reason(&self) -> String {
        let reason = self
            .drain_reason
            .lock()
            .expect("drain reason lock is never poisoned");
        reason.clone().unwrap_or_default()
    }
}
