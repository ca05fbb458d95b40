//! What a run answers or changes in its thread instead of taking input, typed.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::{Error, Result};

/// LangGraph's `Command` as a run carries it (`resume`, `goto`, `update`), or an update of the
/// thread's state that the api enqueues as a run of its own (`update_state`). Stored with the run
/// with only the parts it names, as clients send it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunCommand {
    /// The answer to the thread's interrupts: one value, or values by interrupt id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Value>,
    /// A node, a `Send` (`{"node", "input"}`), or a list of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goto: Option<Value>,
    /// Values for the state's channels: an object, or `[channel, value]` pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<Value>,
    /// The values a node of a Python graph is taken to have written (`threads.update_state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_state: Option<StateUpdate>,
}

/// `threads.update_state` of a Python graph's thread, which its graph's reducers apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateUpdate {
    pub values: Value,
    /// The node taken to have written them; none: LangGraph's choice.
    pub as_node: Option<String>,
    /// A past checkpoint to fork the thread at; none: the latest.
    pub checkpoint_id: Option<Uuid>,
}

impl RunCommand {
    /// Reads a command as stored.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`]: it is not a command.
    pub fn from_value(command: Value) -> Result<Self> {
        serde_json::from_value(command).map_err(|err| Error::Invalid {
            field: "command",
            reason: err.to_string(),
        })
    }

    /// As stored and answered.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a command is JSON: string keys, JSON values")
    }

    /// It goes to nodes or updates the state (LangGraph's `goto` or `update`).
    pub fn moves(&self) -> bool {
        self.goto.as_ref().is_some_and(|goto| !goto.is_null())
            || self.update.as_ref().is_some_and(|update| !update.is_null())
    }
}
