//! `langgraph.json`, the official configuration of Python graphs: its `graphs` (id → `path.py:attr`)
//! name the graphs that workers execute with LangGraph, in the interpreter `--python` names. The
//! runner reads the rest (`dependencies`, `env`) itself.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use mostrador_worker::{AgentConfig, PythonConfig, SandboxConfig};
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

    /// The most a thread's files (deep agents' files, kept by the worker) may take together, in
    /// MiB: a write past it is refused and the agent told why.
    #[arg(long, env = "MOSTRADOR_THREAD_FILES_LIMIT_MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    thread_files_limit_mib: u64,

    /// Runs deep agents' commands (`execute`) in a bubblewrap sandbox per command, with this
    /// `bwrap` binary (for example `/usr/bin/bwrap`); without it, agents cannot run commands.
    #[arg(long, env = "MOSTRADOR_SANDBOX_BWRAP")]
    sandbox_bwrap: Option<PathBuf>,

    /// The longest a sandboxed command may run (it asks for less with its own timeout).
    #[arg(long, env = "MOSTRADOR_SANDBOX_TIMEOUT", default_value = "120s", value_parser = crate::duration::parse_duration)]
    sandbox_timeout: std::time::Duration,

    /// CPU seconds of a sandboxed command.
    #[arg(long, env = "MOSTRADOR_SANDBOX_CPU_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    sandbox_cpu_seconds: u64,

    /// The address space of each process of a sandboxed command, in MiB.
    #[arg(long, env = "MOSTRADOR_SANDBOX_MEMORY_MIB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(64..))]
    sandbox_memory_mib: u64,

    /// Lets sandboxed commands reach the network (they have none by default).
    #[arg(long, env = "MOSTRADOR_SANDBOX_NETWORK")]
    sandbox_network: bool,

    /// Subagent delegations at once in one run (deepagents' `task` tool, through
    /// `mostrador.deepagents.SubagentLimit`); none by default.
    #[arg(long, env = "MOSTRADOR_SUBAGENTS_PER_RUN", value_parser = clap::value_parser!(u64).range(1..))]
    subagents_per_run: Option<u64>,

    /// Subagent delegations at once in all the runs of a worker process; none by default.
    #[arg(long, env = "MOSTRADOR_SUBAGENTS_PER_WORKER", value_parser = clap::value_parser!(u64).range(1..))]
    subagents_per_worker: Option<u64>,
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
            agents: self.agents(),
        }))
    }

    fn agents(&self) -> AgentConfig {
        let sandbox = self.sandbox_bwrap.clone().map(|bwrap| SandboxConfig {
            timeout: self.sandbox_timeout,
            cpu_seconds: self.sandbox_cpu_seconds,
            memory_mib: self.sandbox_memory_mib,
            network: self.sandbox_network,
            ..SandboxConfig::new(bwrap)
        });
        let slots = |n: Option<u64>| n.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        AgentConfig {
            files_limit_bytes: i64::try_from(self.thread_files_limit_mib << 20).unwrap_or(i64::MAX),
            sandbox,
            subagents_per_run: slots(self.subagents_per_run),
            subagents_per_worker: slots(self.subagents_per_worker),
        }
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
