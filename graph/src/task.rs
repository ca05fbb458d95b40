//! A task's life in writes: running a node under its retry policy and timeout, and reading back
//! from a checkpoint's pending writes which tasks finished, which wait on an interrupt, and with
//! which resume values.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use serde_json::{Value, json};

use crate::checkpoint::{INTERRUPT, PendingWrite, RESUME, Saved, TASK_DONE};
use crate::graph::NodeFn;
use crate::node::{Command, Goto, NodeContext, NodeError, RetryPolicy, Send};

/// An interrupt a node raised and nobody has answered yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Interrupt {
    pub id: String,
    pub value: Value,
    pub node: String,
    pub task_id: String,
}

/// A task's result as saved in its writes.
#[derive(Debug, Clone)]
pub(crate) struct TaskDone {
    pub(crate) node: String,
    pub(crate) update: Vec<(String, Value)>,
    pub(crate) goto: Vec<Goto>,
}

/// Runs a node under its timeout and retry policy. Each attempt starts the node afresh.
pub(crate) async fn invoke(
    run: &NodeFn,
    retry: Option<&RetryPolicy>,
    timeout: Option<Duration>,
    ctx: NodeContext,
) -> Result<Command, NodeError> {
    let max_attempts = retry.map_or(1, |policy| policy.max_attempts.max(1));
    let mut attempt = 1;
    loop {
        let ctx = NodeContext {
            interrupts_reached: Arc::new(AtomicUsize::new(0)),
            ..ctx.clone()
        };
        let res = match timeout {
            Some(timeout) => tokio::time::timeout(timeout, run(ctx))
                .await
                .unwrap_or_else(|_| {
                    Err(NodeError::retryable(format!("timed out after {timeout:?}")))
                }),
            None => run(ctx).await,
        };
        match (res, retry) {
            (
                Err(NodeError::Failed {
                    retryable: true, ..
                }),
                Some(policy),
            ) if attempt < max_attempts => {
                tokio::time::sleep(policy.delay(attempt)).await;
                attempt += 1;
            }
            (res, _) => return res,
        }
    }
}

/// A task's saved result, if it finished.
pub(crate) fn finished_task(
    writes: &[PendingWrite],
    task_id: &str,
    node: &str,
) -> Option<TaskDone> {
    let mine = writes.iter().filter(|w| w.task_id == task_id);
    let marker = mine.clone().find(|w| w.channel == TASK_DONE)?;
    let update = mine
        .filter(|w| !w.channel.starts_with("__"))
        .map(|w| (w.channel.clone(), w.value.clone()))
        .collect();
    let goto = marker.value["goto"]
        .as_array()
        .map(|gotos| gotos.iter().filter_map(goto_from_json).collect())
        .unwrap_or_default();
    Some(TaskDone {
        node: node.to_owned(),
        update,
        goto,
    })
}

/// The resumes recorded for a task, oldest first, each `{"value": …, "run": …}` (the run that
/// brought it, so a run that records its resume twice, after a crash, counts it once).
pub(crate) fn resume_entries(writes: &[PendingWrite], task_id: &str) -> Vec<Value> {
    writes
        .iter()
        .find(|w| w.task_id == task_id && w.channel == RESUME)
        .and_then(|w| w.value.as_array().cloned())
        .unwrap_or_default()
}

/// The resume values recorded for a task, in the order its interrupts are reached.
pub(crate) fn resume_values_of(writes: &[PendingWrite], task_id: &str) -> Vec<Value> {
    resume_entries(writes, task_id)
        .into_iter()
        .map(|entry| entry["value"].clone())
        .collect()
}

/// The interrupts recorded against a checkpoint and not answered since.
pub(crate) fn pending_interrupts(saved: &Saved) -> Vec<Interrupt> {
    saved
        .checkpoint
        .next
        .iter()
        .enumerate()
        .filter_map(|(index, spec)| {
            let task_id = spec.task_id(index);
            let write = saved
                .writes
                .iter()
                .find(|w| w.task_id == task_id && w.channel == INTERRUPT)?;
            Some(Interrupt {
                id: write.value["id"].as_str().unwrap_or_default().to_owned(),
                value: write.value["value"].clone(),
                node: spec.node.clone(),
                task_id,
            })
        })
        .collect()
}

pub(crate) fn update_json(update: &[(String, Value)]) -> Value {
    Value::Object(update.iter().cloned().collect())
}

pub(crate) fn goto_json(goto: &Goto) -> Value {
    match goto {
        Goto::Node(node) => Value::String(node.clone()),
        Goto::Send(send) => json!({"node": send.node, "arg": send.arg}),
    }
}

fn goto_from_json(value: &Value) -> Option<Goto> {
    match value {
        Value::String(node) => Some(Goto::Node(node.clone())),
        Value::Object(send) => Some(Goto::Send(Send::new(
            send.get("node")?.as_str()?,
            send.get("arg").cloned().unwrap_or(Value::Null),
        ))),
        _ => None,
    }
}
