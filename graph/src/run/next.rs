//! Which tasks come next: those a finished superstep triggers, and those a command adds.

use std::collections::BTreeMap;

use super::Execution;
use crate::channel::State;
use crate::checkpoint::{Checkpointer, TaskSpec};
use crate::node::{Command, END, Goto, Send};
use crate::task::TaskDone;
use crate::{Error, Result};

impl<C: Checkpointer> Execution<'_, C> {
    /// The tasks triggered by a finished superstep, in task order: each task's `goto`, then its
    /// node's edges, then its conditional edges (evaluated on the state after the superstep).
    /// Node targets run once per superstep; every `Send` is a task of its own.
    pub(super) fn next_tasks(
        &self,
        done: &BTreeMap<usize, TaskDone>,
        values: &State,
    ) -> Result<Vec<TaskSpec>> {
        let mut next: Vec<TaskSpec> = Vec::new();
        for task in done.values() {
            let mut targets: Vec<Goto> = task.goto.clone();
            if let Some(tos) = self.graph.inner.edges.get(&task.node) {
                targets.extend(tos.iter().map(|to| Goto::Node(to.clone())));
            }
            if let Some(routes) = self.graph.inner.routes.get(&task.node) {
                for route in routes {
                    targets.extend(route(values));
                }
            }
            self.add_tasks(&mut next, targets)?;
        }
        Ok(next)
    }

    /// Adds a task for each target to `next`: a node once (unless it is [`END`]), every `Send`.
    pub(super) fn add_tasks(
        &self,
        next: &mut Vec<TaskSpec>,
        targets: impl IntoIterator<Item = Goto>,
    ) -> Result {
        for target in targets {
            let spec = match target {
                Goto::Node(node) if node == END => continue,
                Goto::Node(node) => {
                    if next.iter().any(|t| t.node == node && t.arg.is_none()) {
                        continue;
                    }
                    TaskSpec { node, arg: None }
                }
                Goto::Send(Send { node, arg }) => TaskSpec {
                    node,
                    arg: Some(arg),
                },
            };
            if !self.graph.inner.nodes.contains_key(&spec.node) {
                return Err(Error::UnknownNode(spec.node));
            }
            next.push(spec);
        }
        Ok(())
    }

    pub(super) fn check_update(&self, node: &str, command: &Command) -> Result {
        for (channel, _) in &command.update {
            if !self.graph.inner.channels.contains_key(channel) {
                return Err(Error::InvalidUpdate {
                    node: node.to_owned(),
                    channel: channel.clone(),
                    reason: "no such channel".into(),
                });
            }
        }
        Ok(())
    }
}
