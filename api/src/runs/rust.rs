//! What a run asks of a graph the Rust engine runs, checked against the graph and its thread:
//! the checkpoint it names, the nodes of its breakpoints, its command.

use mostrador_graph::{Checkpointer, Graph};
use mostrador_queue::run::RunCommand;
use mostrador_queue::{PgCheckpointer, Thread, ThreadStatus};
use serde_json::Value;
use uuid::Uuid;

use crate::app::AppState;
use crate::error::ApiError;

/// The latest checkpoint of an idle thread of a Rust graph, looked up when the run names a
/// checkpoint: a run goes on from it anyway, so naming it starts no new branch (agent-chat-ui
/// names the thread head's with every follow-up message). A busy thread's head may move before
/// the run starts, so it has none here.
pub(super) async fn rust_head(
    state: &AppState,
    thread: &Thread,
    python: bool,
    names_one: bool,
) -> Result<Option<Uuid>, ApiError> {
    if python || !names_one || thread.status == ThreadStatus::Busy {
        return Ok(None);
    }
    let latest = PgCheckpointer::new(state.pool().clone())
        .get(thread.thread_id.0, None)
        .await
        .map_err(ApiError::failed)?;
    Ok(latest.map(|saved| saved.checkpoint.checkpoint_id))
}

/// A past checkpoint a Rust graph's run starts from must be the thread's: 404 otherwise, as when
/// reading its state.
pub(super) async fn rust_checkpoint_exists(
    state: &AppState,
    thread: &Thread,
    checkpoint_id: Uuid,
) -> Result<(), ApiError> {
    let found = PgCheckpointer::new(state.pool().clone())
        .get(thread.thread_id.0, Some(checkpoint_id))
        .await
        .map_err(ApiError::failed)?;
    match found {
        Some(_) => Ok(()),
        None => Err(ApiError::not_found("Checkpoint not found")),
    }
}

/// 422 unless `node` is one of the graph's nodes.
pub(super) fn known_node(graph: &Graph, node: &str, field: &str) -> Result<(), ApiError> {
    if graph.nodes().any(|known| known == node) {
        Ok(())
    } else {
        Err(ApiError::unprocessable(format!(
            "{field}: the graph has no node {node:?}"
        )))
    }
}

/// A command for the Rust engine: a `resume`, or a `goto` and `update` (the engine does not
/// take both at once); what it names checked against the graph.
pub(super) fn rust_command(
    graph: &Graph,
    resume: Option<Value>,
    goto: Option<Value>,
    update: Option<Value>,
) -> Result<Option<RunCommand>, ApiError> {
    let (goto, update) = (
        goto.filter(|g| !g.is_null()),
        update.filter(|u| !u.is_null()),
    );
    if goto.is_none() && update.is_none() {
        return Ok(resume.filter(|r| !r.is_null()).map(|resume| RunCommand {
            resume: Some(resume),
            ..RunCommand::default()
        }));
    }
    if resume.as_ref().is_some_and(|r| !r.is_null()) {
        return Err(ApiError::unprocessable(
            "a Rust graph's command resumes, or goes to nodes and updates the state, not both",
        ));
    }
    let targets = match &goto {
        None => Vec::new(),
        Some(Value::Array(targets)) => targets.clone(),
        Some(one) => vec![one.clone()],
    };
    for target in &targets {
        let node = match target {
            Value::String(node) => node.as_str(),
            Value::Object(send) => send.get("node").and_then(Value::as_str).ok_or_else(|| {
                ApiError::unprocessable("command.goto: a Send is {\"node\": ..., \"input\": ...}")
            })?,
            _ => {
                return Err(ApiError::unprocessable(
                    "command.goto must be a node, a Send or a list of them",
                ));
            }
        };
        if node != mostrador_graph::END {
            known_node(graph, node, "command.goto")?;
        }
    }
    let channels: Vec<&str> = match &update {
        None => Vec::new(),
        Some(Value::Object(values)) => values.keys().map(String::as_str).collect(),
        Some(Value::Array(pairs)) => pairs
            .iter()
            .map(|pair| match pair.as_array().map(Vec::as_slice) {
                Some([Value::String(channel), _]) => Ok(channel.as_str()),
                _ => Err(ApiError::unprocessable(
                    "command.update must be an object or [channel, value] pairs",
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ApiError::unprocessable(
                "command.update must be an object or [channel, value] pairs",
            ));
        }
    };
    if let Some(unknown) = channels
        .iter()
        .find(|channel| !graph.channels().any(|known| known == **channel))
    {
        return Err(ApiError::unprocessable(format!(
            "command.update: the graph's state has no channel {unknown:?}"
        )));
    }
    Ok(Some(RunCommand {
        goto,
        update,
        ..RunCommand::default()
    }))
}

/// Whether a Rust graph's thread waits for answers to interrupts.
pub(super) async fn rust_thread_waits(state: &AppState, thread: &Thread) -> Result<bool, ApiError> {
    let latest = PgCheckpointer::new(state.pool().clone())
        .get(thread.thread_id.0, None)
        .await
        .map_err(ApiError::failed)?;
    Ok(latest.is_some_and(|saved| !saved.pending_interrupts().is_empty()))
}
