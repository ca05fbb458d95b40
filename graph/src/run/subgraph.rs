//! A compiled graph used as a node: run by the engine inside its parent's superstep, on the
//! same thread in a namespace of its own (`node:task`), so its checkpoints, interrupts and events
//! are its own and a resume of the thread finds it where it stopped.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use serde_json::{Map, Value};
use tokio::task::JoinSet;
use uuid::Uuid;

use super::{Execution, Outcome, Resume, RunInput};
use crate::checkpoint::Checkpointer;
use crate::control::{Breakpoints, RunOptions};
use crate::graph::Graph;
use crate::node::{Command, NodeError};
use crate::stream::StreamEvent;
use crate::{Error, Result};

/// A task's end: its index in the superstep, and its result (`None`: it did not run to its end
/// because of a drain).
pub(super) type Finished = (usize, Option<std::result::Result<Command, NodeError>>);

/// A subgraph task in flight. It borrows the run, so it is polled beside the spawned tasks
/// rather than spawned.
pub(super) type SubgraphTask<'a> = Pin<Box<dyn Future<Output = Finished> + Send + 'a>>;

/// The namespace of a subgraph task, as LangGraph names it: the node and a task id (a UUID drawn
/// from the checkpoint and the task, the same each time the task runs again).
pub fn task_namespace(node: &str, checkpoint_id: Uuid, task_id: &str) -> String {
    format!(
        "{node}:{}",
        Uuid::new_v5(&checkpoint_id, task_id.as_bytes())
    )
}

/// A spawned task that panicked: a bug in its node.
pub(super) fn panicked(err: tokio::task::JoinError) -> Error {
    Error::NodeFailed {
        node: "(unknown)".into(),
        message: format!("task panicked: {err}"),
        retryable: false,
    }
}

/// The next task to finish, spawned or subgraph; `None` once all have.
pub(super) async fn next_finished(
    tasks: &mut JoinSet<Finished>,
    subgraphs: &mut Vec<SubgraphTask<'_>>,
) -> Option<Result<Finished>> {
    poll_fn(|cx| {
        if let Poll::Ready(Some(joined)) = tasks.poll_join_next(cx) {
            return Poll::Ready(Some(joined.map_err(panicked)));
        }
        for index in 0..subgraphs.len() {
            if let Poll::Ready(finished) = subgraphs[index].as_mut().poll(cx) {
                drop(subgraphs.swap_remove(index));
                return Poll::Ready(Some(Ok(finished)));
            }
        }
        if tasks.is_empty() && subgraphs.is_empty() {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    })
    .await
}

impl<C: Checkpointer> Execution<'_, C> {
    /// Runs `graph` as the task `index` of node `node` on `state`: from the start, or where it
    /// stopped (an interrupt, answered with the task's latest resume value; a drain).
    pub(super) fn subgraph_task<'a>(
        &'a self,
        index: usize,
        graph: Graph,
        namespace: String,
        state: Arc<Map<String, Value>>,
        resume: Vec<Value>,
        permits: &Arc<tokio::sync::Semaphore>,
    ) -> SubgraphTask<'a> {
        let permits = Arc::clone(permits);
        Box::pin(async move {
            let _permit = permits.acquire().await.expect("never closed");
            if self.control.drain.is_cancelled() {
                return (index, None);
            }
            let checkpointer = self.checkpointer.scoped(&namespace);
            let input = match checkpointer.get(self.thread_id, None).await {
                Err(err) => return (index, Some(Err(NodeError::retryable(err.to_string())))),
                Ok(None) => RunInput::Values(Value::Object(
                    state
                        .iter()
                        .filter(|(channel, _)| graph.inner.channels.contains_key(*channel))
                        .map(|(channel, value)| (channel.clone(), value.clone()))
                        .collect(),
                )),
                Ok(Some(saved)) if !saved.pending_interrupts().is_empty() => match resume.last() {
                    Some(value) => RunInput::Resume(Resume::Value(value.clone())),
                    None => RunInput::Continue,
                },
                Ok(Some(_)) => RunInput::Continue,
            };
            let options = RunOptions {
                interrupt_before: Breakpoints::None,
                interrupt_after: Breakpoints::None,
                ..self.options.clone()
            };
            let parent = Arc::clone(&self.events);
            // Its checkpointer nests the namespace in its parent's; its events carry its own.
            let label = namespace.clone();
            let events = Arc::new(move |mut event: StreamEvent| {
                event.namespace.insert(0, label.clone());
                parent(event);
            });
            let ran = graph
                .run(
                    &checkpointer,
                    self.thread_id,
                    input,
                    &options,
                    self.control,
                    events,
                )
                .await;
            (index, self.subgraph_result(&graph, ran))
        })
    }

    /// The node's result: the shared channels' final values, the subgraph's first interrupt, its
    /// failure; `None` when it stopped for a drain or a cancel.
    fn subgraph_result(
        &self,
        graph: &Graph,
        ran: Result<super::RunResult>,
    ) -> Option<std::result::Result<Command, NodeError>> {
        let result = match ran {
            Ok(result) => result,
            Err(Error::NodeFailed {
                node,
                message,
                retryable,
            }) => {
                return Some(Err(NodeError::Failed {
                    message: format!("{node}: {message}"),
                    retryable,
                }));
            }
            Err(err) => return Some(Err(NodeError::fatal(err.to_string()))),
        };
        match result.outcome {
            Outcome::Interrupted(interrupts) if !interrupts.is_empty() => {
                Some(Err(NodeError::Interrupted(interrupts[0].value.clone())))
            }
            Outcome::Finished | Outcome::Interrupted(_) => {
                let mut command = Command::new();
                for (channel, value) in result.values {
                    if self.graph.inner.channels.contains_key(&channel)
                        && graph.inner.channels.contains_key(&channel)
                    {
                        command = command.set(channel, value);
                    }
                }
                Some(Ok(command))
            }
            Outcome::Drained(_) | Outcome::Cancelled => None,
        }
    }
}
