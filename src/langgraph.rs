//! `langgraph.json`, the official configuration of Python graphs: its `graphs` (id → `path.py:attr`)
//! name the graphs that workers execute with LangGraph, in the interpreter `--python` names. The
//! runner reads the rest (`dependencies`, `env`) itself.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use mostrador_worker::PythonConfig;
use serde_json::Value;

/// Python graphs, as `dev`, `api` and `worker` take them.
#[derive(Debug, Clone, Args)]
pub(crate) struct PythonArgs {
    /// A `langgraph.json` whose graphs to serve beside the binary's (Python graphs, executed by
    /// the `langgraph` package of --python's environment).
    #[arg(long = "config", env = "MOSTRADOR_LANGGRAPH_CONFIG")]
    langgraph_config: Option<PathBuf>,

    /// The Python interpreter that runs the graphs (the one with `langgraph` and the graphs'
    /// dependencies installed).
    #[arg(long, env = "MOSTRADOR_PYTHON", default_value = "python3")]
    python: PathBuf,

    /// The address space each runner process may use, in MiB (its `RLIMIT_AS`): a run that
    /// needs more fails with `MemoryError`, retryably, and its process is replaced, instead of
    /// the pod running out of memory. None by default.
    #[arg(long, env = "MOSTRADOR_PYTHON_MEMORY_LIMIT_MIB", value_parser = clap::value_parser!(u64).range(256..))]
    python_memory_limit_mib: Option<u64>,
}

impl PythonArgs {
    /// The Python graphs, if a `langgraph.json` is given.
    ///
    /// # Errors
    ///
    /// The file cannot be read, or names no graph.
    pub(crate) fn config(&self) -> anyhow::Result<Option<PythonConfig>> {
        let Some(path) = &self.langgraph_config else {
            return Ok(None);
        };
        let graphs = read_graph_ids(path)?;
        // The runners start in its folder: they need its absolute path.
        let path = std::fs::canonicalize(path)?;
        Ok(Some(PythonConfig {
            python: self.python.clone(),
            config: path,
            graphs,
            memory_limit_mib: self.python_memory_limit_mib,
        }))
    }

    /// The Python graphs' ids (none without a `langgraph.json`).
    pub(crate) fn graph_ids(&self) -> anyhow::Result<Vec<String>> {
        Ok(self
            .config()?
            .map(|python| python.graphs)
            .unwrap_or_default())
    }
}

/// The ids of the graphs of the `langgraph.json` at `path`, sorted.
///
/// # Errors
///
/// The file cannot be read, or names no graph.
pub(crate) fn read_graph_ids(path: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("failed to read {}", path.display()))?;
    graph_ids(&text).with_context(|| format!("invalid {}", path.display()))
}

/// The ids of a `langgraph.json`'s graphs, sorted.
pub(crate) fn graph_ids(text: &str) -> anyhow::Result<Vec<String>> {
    let config: Value = serde_json::from_str(text)?;
    let graphs = config
        .get("graphs")
        .and_then(Value::as_object)
        .context("it has no \"graphs\" object")?;
    anyhow::ensure!(!graphs.is_empty(), "its \"graphs\" object names no graph");
    for (id, spec) in graphs {
        let path = spec
            .as_str()
            .or_else(|| spec.get("path").and_then(Value::as_str));
        anyhow::ensure!(
            path.is_some_and(|path| path.contains(':')),
            "graph {id:?} must be \"./file.py:attribute\""
        );
    }
    Ok(graphs.keys().cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::graph_ids;

    #[test]
    fn graphs_are_read_by_id_and_a_malformed_one_is_refused() {
        let ids = graph_ids(r#"{"graphs": {"b": "./b.py:graph", "a": {"path": "./a.py:make"}}}"#);
        assert_eq!(ids.expect("valid"), vec!["a".to_owned(), "b".to_owned()]);
        assert!(graph_ids(r#"{"graphs": {"a": "./a.py"}}"#).is_err());
        assert!(graph_ids(r#"{"graphs": {}}"#).is_err());
        assert!(graph_ids(r#"{"dependencies": ["."]}"#).is_err());
    }
}
