//! Events a run emits as it goes, by stream mode.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `langgraph-sdk` stream modes, written by their names on the wire ([`StreamMode::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamMode {
    /// The whole state after each superstep (and after the input).
    Values,
    /// Each task's writes as it finishes: `{node: writes}`.
    Updates,
    /// Chunks a node emits while it runs (model tokens).
    Messages,
    /// Values a node emits while it runs.
    Custom,
    /// Task starts and results.
    Tasks,
    /// Each checkpoint as it is saved.
    Checkpoints,
    /// Tasks and checkpoints, wrapped with their type and step.
    Debug,
    /// LangChain's callback events (`astream_events`, v2) of a Python graph's run. The Rust
    /// engine has no callbacks and emits none.
    Events,
}

impl StreamMode {
    pub const ALL: [StreamMode; 8] = [
        StreamMode::Values,
        StreamMode::Updates,
        StreamMode::Messages,
        StreamMode::Custom,
        StreamMode::Tasks,
        StreamMode::Checkpoints,
        StreamMode::Debug,
        StreamMode::Events,
    ];

    /// The mode named `name` on the wire.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.as_str() == name)
    }

    /// The name on the wire (the SSE event name).
    pub fn as_str(self) -> &'static str {
        match self {
            StreamMode::Values => "values",
            StreamMode::Updates => "updates",
            StreamMode::Messages => "messages",
            StreamMode::Custom => "custom",
            StreamMode::Tasks => "tasks",
            StreamMode::Checkpoints => "checkpoints",
            StreamMode::Debug => "debug",
            StreamMode::Events => "events",
        }
    }
}

/// A set of stream modes: which events a run builds ([`RunOptions::stream_modes`]).
///
/// [`RunOptions::stream_modes`]: crate::RunOptions::stream_modes
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamModes(u8);

impl StreamModes {
    pub const ALL: StreamModes = StreamModes(u8::MAX);
    pub const NONE: StreamModes = StreamModes(0);

    pub fn contains(self, mode: StreamMode) -> bool {
        self.0 & Self::bit(mode) != 0
    }

    pub fn with(self, mode: StreamMode) -> Self {
        StreamModes(self.0 | Self::bit(mode))
    }

    fn bit(mode: StreamMode) -> u8 {
        1 << mode as u8
    }
}

impl FromIterator<StreamMode> for StreamModes {
    fn from_iter<I: IntoIterator<Item = StreamMode>>(modes: I) -> Self {
        modes.into_iter().fold(Self::NONE, Self::with)
    }
}

/// One event of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEvent {
    pub mode: StreamMode,
    /// The node that emitted it, for events emitted inside a node.
    pub node: Option<String>,
    pub data: Value,
    /// The subgraph tasks it comes from, outermost first (`node:task`, as LangGraph names
    /// them); empty for the graph's own events.
    pub namespace: Vec<String>,
}

/// Where a run sends its events. It must not block: the worker buffers and flushes them.
pub type EventSink = Arc<dyn Fn(StreamEvent) + Send + Sync>;

/// A sink that drops every event.
pub fn discard() -> EventSink {
    Arc::new(|_| {})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_is_written_by_its_name_on_the_wire() {
        for mode in StreamMode::ALL {
            let written = serde_json::to_value(mode).expect("a name");
            assert_eq!(written, mode.as_str());
            assert_eq!(
                serde_json::from_value::<StreamMode>(written).ok(),
                Some(mode)
            );
        }
    }
}
