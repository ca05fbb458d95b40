//! Where a run starts: its input written on the thread's latest checkpoint or, for a new branch,
//! on a past one; a resume recorded against the interrupted tasks; a command's update and goto;
//! or the latest as it is. And a state update outside a run, written as an input is.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{Value, json};
use uuid::Uuid;

use super::{Current, Execution, Resume, RunInput};
use crate::channel::as_state;
use crate::checkpoint::{Checkpointer, RESUME, Saved};
use crate::control::{RunControl, RunOptions};
use crate::graph::Graph;
use crate::node::START;
use crate::stream::StreamModes;
use crate::task::{Interrupt, TaskDone, pending_interrupts, resume_entries};
use crate::{Error, Result};

impl<C: Checkpointer> Execution<'_, C> {
    /// Turns the input into the checkpoint the first superstep starts from; `None` when there is
    /// nothing to run.
    pub(super) async fn start(&mut self, input: RunInput) -> Result<Option<Current>> {
        let latest = self
            .checkpointer
            .get(self.thread_id, None)
            .await
            .map_err(Error::Checkpointer)?;
        self.version_floor = latest
            .as_ref()
            .and_then(|l| l.checkpoint.versions.values().copied().max())
            .unwrap_or(0);
        match input {
            RunInput::Values(values) => {
                let base = latest.map(Current::from);
                Ok(Some(self.write_input(base.as_ref(), values).await?))
            }
            RunInput::From {
                checkpoint_id,
                input,
            } => {
                let at = self
                    .checkpointer
                    .get(self.thread_id, Some(checkpoint_id))
                    .await
                    .map_err(Error::Checkpointer)?
                    .ok_or_else(|| {
                        Error::InvalidInput(format!("the thread has no checkpoint {checkpoint_id}"))
                    })?;
                let mut base = Current::from(at);
                // Its tasks run again on the new branch, which is numbered after the thread's
                // latest step, so that it is the thread's latest.
                base.writes.clear();
                if let Some(latest) = &latest {
                    base.checkpoint.step = base.checkpoint.step.max(latest.checkpoint.step);
                }
                let current = match input {
                    Some(values) => self.write_input(Some(&base), values).await?,
                    None => {
                        let next = Some(base.checkpoint.next.clone());
                        self.checkpoint_after(Some(&base), &BTreeMap::new(), "fork", next)
                            .await?
                    }
                };
                Ok(Some(current))
            }
            RunInput::Resume(resume) => {
                let latest = latest.ok_or(Error::NothingToResume)?;
                self.record_resume(&latest, resume).await?;
                let latest = self
                    .checkpointer
                    .get(self.thread_id, Some(latest.checkpoint.checkpoint_id))
                    .await
                    .map_err(Error::Checkpointer)?
                    .ok_or(Error::NothingToResume)?;
                Ok(Some(Current::from(latest)))
            }
            RunInput::Continue => Ok(latest.map(Current::from)),
            RunInput::Command { update, goto } => {
                let base = latest.map(Current::from);
                let mut next = base
                    .as_ref()
                    .map(|b| b.checkpoint.next.clone())
                    .unwrap_or_default();
                self.add_tasks(&mut next, goto)?;
                let done = TaskDone {
                    node: START.to_owned(),
                    update,
                    goto: Vec::new(),
                };
                let current = self
                    .checkpoint_after(
                        base.as_ref(),
                        &BTreeMap::from([(0, done)]),
                        "input",
                        Some(next),
                    )
                    .await?;
                Ok(Some(current))
            }
        }
    }

    /// The checkpoint with `values` written as the input on `base`.
    async fn write_input(&mut self, base: Option<&Current>, values: Value) -> Result<Current> {
        let writes = as_state(values, "input").map_err(Error::InvalidInput)?;
        let done = TaskDone {
            node: START.to_owned(),
            update: writes.into_iter().collect(),
            goto: Vec::new(),
        };
        self.checkpoint_after(base, &BTreeMap::from([(0, done)]), "input", None)
            .await
    }

    /// Saves resume values against the interrupted tasks of `saved`.
    async fn record_resume(&self, saved: &Saved, resume: Resume) -> Result {
        let pending = pending_interrupts(saved);
        if pending.is_empty() {
            return Err(Error::NothingToResume);
        }
        let answers: Vec<(&Interrupt, Value)> = match resume {
            Resume::Value(value) => match pending.as_slice() {
                [one] => vec![(one, value)],
                many => {
                    return Err(Error::InvalidInput(format!(
                        "{} interrupts are pending; resume with a map from interrupt id to value",
                        many.len()
                    )));
                }
            },
            Resume::ById(by_id) => {
                let mut answers = Vec::new();
                for (id, value) in by_id {
                    let interrupt = pending.iter().find(|i| i.id == id).ok_or_else(|| {
                        Error::InvalidInput(format!("no pending interrupt has id {id:?}"))
                    })?;
                    answers.push((interrupt, value));
                }
                answers
            }
        };
        for (interrupt, value) in answers {
            let mut resumes = resume_entries(&saved.writes, &interrupt.task_id);
            let run_id = self
                .options
                .config
                .get("run_id")
                .cloned()
                .unwrap_or(Value::Null);
            if !run_id.is_null() && resumes.last().is_some_and(|last| last["run"] == run_id) {
                // This run recorded its resume before (then crashed or was drained).
                continue;
            }
            resumes.push(json!({"value": value, "run": run_id}));
            let writes = vec![(RESUME.to_owned(), Value::Array(resumes))];
            let task_writes = vec![(interrupt.task_id.clone(), writes)];
            // N.B. Saved whatever the durability: a resume is input, not progress, and the
            // superstep it resumes reads it back from the checkpointer.
            self.checkpointer
                .put_writes(self.thread_id, saved.checkpoint.checkpoint_id, &task_writes)
                .await
                .map_err(Error::Checkpointer)?;
        }
        Ok(())
    }
}

/// Writes `values` as node `as_node` (see [`Graph::update_state`]) in a new checkpoint.
pub(crate) async fn update<C: Checkpointer>(
    graph: &Graph,
    checkpointer: &C,
    thread_id: Uuid,
    base: Option<Saved>,
    values: Value,
    as_node: Option<&str>,
    version_floor: i64,
) -> Result<Uuid> {
    let writes = as_state(values, "values").map_err(Error::InvalidInput)?;
    // Its events go nowhere: it builds none.
    let options = RunOptions {
        stream_modes: StreamModes::NONE,
        ..RunOptions::default()
    };
    let control = RunControl::new();
    let mut execution = Execution {
        graph,
        checkpointer,
        thread_id,
        options: &options,
        control: &control,
        events: crate::stream::discard(),
        unsaved: None,
        unsaved_writes: Mutex::new(Vec::new()),
        version_floor,
    };
    let base = base.map(Current::from);
    let keep_next = match as_node {
        Some(_) => None,
        None => Some(
            base.as_ref()
                .map(|b| b.checkpoint.next.clone())
                .unwrap_or_default(),
        ),
    };
    let done = TaskDone {
        node: as_node.unwrap_or(START).to_owned(),
        update: writes.into_iter().collect(),
        goto: Vec::new(),
    };
    let current = execution
        .checkpoint_after(
            base.as_ref(),
            &BTreeMap::from([(0, done)]),
            "update",
            keep_next,
        )
        .await?;
    Ok(current.checkpoint.checkpoint_id)
}
