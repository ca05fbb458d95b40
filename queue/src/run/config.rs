//! A run's configuration, typed: what the api accepted and both engines read.

use std::num::{NonZeroU32, NonZeroU64};

use mostrador_graph::{Breakpoints, Durability};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::{Error, Result};

/// A run's `config` as LangGraph reads it: its keys typed, any other (`tags`, `run_name`, ...)
/// passed through to the graph as the client sent it. Stored as JSON with the run, in the shape
/// the official server answers as the run's `kwargs.config` (with `context` apart).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// What the graph reads as `config["configurable"]`: the run's own over its assistant's, and
    /// the caller the run acts for (`langgraph_auth_user`), which the api alone sets.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub configurable: Map<String, Value>,
    /// The runtime context (LangGraph's `context`): the assistant's, the run's own over it; `{}`
    /// when neither has one, so that the graph's context schema gives its defaults.
    #[serde(default)]
    pub context: Map<String, Value>,
    /// Supersteps before the run fails; none: the engine's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursion_limit: Option<NonZeroU64>,
    /// Tasks of a superstep at once: a request, which the worker's own bound caps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<NonZeroU32>,
    /// None: `sync`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<Durability>,
    #[serde(default, skip_serializing_if = "Breakpoints::is_none")]
    pub interrupt_before: Breakpoints,
    #[serde(default, skip_serializing_if = "Breakpoints::is_none")]
    pub interrupt_after: Breakpoints,
    /// Subgraphs' events are streamed too, named by their namespace (`mode|<node>:<task id>`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream_subgraphs: bool,
    /// A past checkpoint of the thread the run starts from, a new branch; none: the latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<Uuid>,
    /// LangGraph's other keys, as sent.
    #[serde(flatten)]
    pub passthrough: Map<String, Value>,
}

impl RunConfig {
    /// Reads a config written as JSON (a request's, a cron's, a stored run's).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`]: a key LangGraph reads holds what it cannot mean, or `config` is not an
    /// object.
    pub fn from_value(config: Value) -> Result<Self> {
        let config = match config {
            Value::Null => return Ok(Self::default()),
            config @ Value::Object(_) => config,
            _ => return Err(invalid("must be a JSON object")),
        };
        serde_json::from_value(config).map_err(|err| invalid(&err.to_string()))
    }

    /// As stored and answered.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a config is JSON: string keys, JSON values")
    }
}

fn invalid(reason: &str) -> Error {
    Error::Invalid {
        field: "config",
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_config_reads_back_as_it_was_written() {
        let written = json!({
            "configurable": {"user_id": "u1"},
            "context": {"model": "m"},
            "recursion_limit": 40,
            "max_concurrency": 2,
            "durability": "exit",
            "interrupt_before": "*",
            "interrupt_after": ["tools"],
            "stream_subgraphs": true,
            "checkpoint_id": "01936d4e-8f2a-7c3b-9d4e-5f6a7b8c9d0e",
            "tags": ["a"],
            "run_name": "r",
        });
        let config = RunConfig::from_value(written.clone()).expect("a config");
        assert_eq!(config.interrupt_before, Breakpoints::All);
        assert_eq!(
            config.interrupt_after,
            Breakpoints::Nodes(vec!["tools".into()])
        );
        assert_eq!(config.durability, Some(Durability::Exit));
        assert_eq!(config.passthrough.len(), 2);
        assert_eq!(config.to_value(), written);
        assert_eq!(RunConfig::default().to_value(), json!({"context": {}}));
    }

    #[test]
    fn a_config_langgraph_cannot_read_is_refused() {
        for bad in [
            json!([]),
            json!({"recursion_limit": 0}),
            json!({"max_concurrency": -1}),
            json!({"durability": "later"}),
            json!({"interrupt_before": "tools"}),
            json!({"interrupt_after": [1]}),
            json!({"configurable": 3}),
            json!({"checkpoint_id": "x"}),
        ] {
            assert!(
                matches!(
                    RunConfig::from_value(bad.clone()),
                    Err(Error::Invalid {
                        field: "config",
                        ..
                    })
                ),
                "{bad}"
            );
        }
        assert_eq!(
            RunConfig::from_value(Value::Null).expect("no config"),
            RunConfig::default()
        );
        assert_eq!(
            RunConfig::from_value(json!({"interrupt_before": null})).expect("a config"),
            RunConfig::default()
        );
    }
}
