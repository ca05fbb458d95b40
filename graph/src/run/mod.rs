//! Running a graph on a thread: supersteps, pending writes, interrupts, drain and cancel.
//!
//! The guarantees (the same as LangGraph's):
//!
//! * A superstep runs its tasks concurrently (at most `max_concurrency` at once), then applies
//!   their writes through the reducers in task order, then saves a checkpoint; with
//!   [`Durability::Sync`] the checkpoint is saved before the next superstep starts.
//! * Each task's writes are saved the moment it finishes. Resuming a superstep re-runs only the
//!   tasks that had not finished.
//! * An interrupt stops its node; the other tasks of the superstep finish; no checkpoint is taken.
//!   Resuming re-runs the node from its start, and `interrupt` returns the resume value.
//! * A drain never pre-empts a task: the tasks in flight finish and their writes are saved, the
//!   tasks of the superstep still waiting for a slot (`max_concurrency`) do not start, and the run
//!   stops `Drained` (unless that superstep finished the graph). Resuming runs only the tasks that
//!   had not finished, so a wide fan-out drains in the time of its slowest task in flight. A cancel aborts the tasks in
//!   flight and discards their writes; the last checkpoint stands.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::Instrument;
use uuid::Uuid;

use crate::channel::State;
use crate::checkpoint::{
    Checkpoint, Checkpointer, INTERRUPT, RESUME, Saved, TASK_DONE, TaskWrites,
};
use crate::control::{Durability, RunControl, RunOptions};
use crate::graph::{Body, Graph};
use crate::node::{Goto, NodeContext, NodeError};
use crate::stream::{EventSink, StreamEvent, StreamMode};
use crate::task::{
    Interrupt, TaskDone, finished_task, goto_json, invoke, resume_entries, resume_values_of,
    update_json,
};
use crate::{Error, Result};

mod next;
mod save;
mod start;
mod subgraph;

pub(crate) use start::update;
pub use subgraph::task_namespace;

/// What a run starts from.
#[derive(Debug, Clone, PartialEq)]
pub enum RunInput {
    /// New input: written to the channels, then the graph runs from [`START`]. Tasks a previous
    /// run left pending are discarded.
    Values(Value),
    /// Answers to pending interrupts; the interrupted superstep goes on.
    Resume(Resume),
    /// Goes on from the latest checkpoint: after a drain or a crash, or after a run that
    /// stopped at a breakpoint (a run without input).
    Continue,
    /// A command on the latest checkpoint: `update` written through the reducers, as an input
    /// is, and the `goto` targets added to the tasks that were pending, in a new checkpoint the
    /// run goes on from.
    Command {
        update: Vec<(String, Value)>,
        goto: Vec<Goto>,
    },
    /// A new branch from a past checkpoint of the thread (regenerate, edit, time travel): its
    /// first checkpoint holds that checkpoint's values with `input` written, as `Values` does;
    /// without input, that checkpoint's tasks, to run again. The branch becomes the thread's
    /// latest; the branch it left stays in the history.
    From {
        checkpoint_id: Uuid,
        input: Option<Value>,
    },
}

/// Resume values.
#[derive(Debug, Clone, PartialEq)]
pub enum Resume {
    /// For the one pending interrupt.
    Value(Value),
    /// By interrupt id, when several are pending.
    ById(BTreeMap<String, Value>),
}

/// How a run stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The graph reached its end (no task left).
    Finished,
    /// Nodes wait for a resume.
    Interrupted(Vec<Interrupt>),
    /// Stopped at a superstep boundary by a drain; `Continue` resumes it.
    Drained(String),
    /// Stopped by a cancel; tasks in flight were aborted.
    Cancelled,
}

/// What a run returns.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub outcome: Outcome,
    /// The state at the last checkpoint.
    pub values: State,
    pub checkpoint_id: Option<Uuid>,
    /// Supersteps this run executed.
    pub supersteps: usize,
}

/// Where a run stands: a checkpoint, its values and its pending writes.
struct Current {
    checkpoint: Checkpoint,
    values: State,
    writes: Vec<crate::checkpoint::PendingWrite>,
}

/// A checkpoint not saved yet (durability `async` and `exit`).
struct Unsaved {
    checkpoint: Checkpoint,
    values: State,
    changed: Vec<String>,
}

/// A task's writes not saved yet: checkpoint id, task id, writes.
type UnsavedWrites = (Uuid, String, Vec<(String, Value)>);

struct Execution<'a, C> {
    graph: &'a Graph,
    checkpointer: &'a C,
    thread_id: Uuid,
    options: &'a RunOptions,
    control: &'a RunControl,
    events: EventSink,
    unsaved: Option<Unsaved>,
    /// Writes not saved yet (durability `exit`): checkpoint id, task id, writes.
    unsaved_writes: Mutex<Vec<UnsavedWrites>>,
    /// The highest channel version of the thread: new versions are above it, so that a branch
    /// from a past checkpoint never reuses a version (and a value) of the branch it left.
    version_floor: i64,
}

enum Step {
    Done(BTreeMap<usize, TaskDone>),
    Interrupted(Vec<Interrupt>),
    /// A drain came while tasks of the superstep were still waiting for a slot: they were not
    /// started, and the finished ones' writes are saved for the next attempt.
    Drained,
    Cancelled,
}

impl Graph {
    /// Runs the graph on a thread until it finishes, interrupts, drains or is cancelled.
    ///
    /// # Errors
    ///
    /// A node that failed (after its retries), an invalid write, the recursion limit, a resume
    /// with nothing to resume, or a checkpointer error. Work saved before the error stands.
    pub async fn run<C: Checkpointer>(
        &self,
        checkpointer: &C,
        thread_id: Uuid,
        input: RunInput,
        options: &RunOptions,
        control: &RunControl,
        events: EventSink,
    ) -> Result<RunResult> {
        let mut execution = Execution {
            graph: self,
            checkpointer,
            thread_id,
            options,
            control,
            events,
            unsaved: None,
            unsaved_writes: Mutex::new(Vec::new()),
            version_floor: 0,
        };
        let res = execution.run(input).await;
        execution.flush().await?;
        res
    }
}

impl<C: Checkpointer> Execution<'_, C> {
    async fn run(&mut self, input: RunInput) -> Result<RunResult> {
        if self.control.is_drain_requested() {
            // Drained before it began: touch nothing (not even the input or a resume), so the
            // next attempt starts exactly as this one would have.
            let latest = self
                .checkpointer
                .get(self.thread_id, None)
                .await
                .map_err(Error::Checkpointer)?;
            return Ok(RunResult {
                outcome: Outcome::Drained(self.control.reason()),
                values: latest
                    .as_ref()
                    .map(|l| l.values.clone())
                    .unwrap_or_default(),
                checkpoint_id: latest.map(|l| l.checkpoint.checkpoint_id),
                supersteps: 0,
            });
        }
        // A run that writes nothing goes on from where an earlier run stopped: it does not stop
        // again at the breakpoint before its first superstep.
        let goes_on = matches!(input, RunInput::Continue | RunInput::Resume(_));
        let Some(mut current) = self.start(input).await? else {
            return Ok(RunResult {
                outcome: Outcome::Finished,
                values: State::new(),
                checkpoint_id: None,
                supersteps: 0,
            });
        };
        // (Unless it is the same run, drained or crashed, going on from its own checkpoint.)
        let run_id = self.options.config.get("run_id");
        let goes_on =
            goes_on && (run_id.is_none() || current.checkpoint.metadata.get("run_id") != run_id);
        let mut supersteps = 0;
        loop {
            let result = |outcome, current: &Current, supersteps| RunResult {
                outcome,
                values: current.values.clone(),
                checkpoint_id: Some(current.checkpoint.checkpoint_id),
                supersteps,
            };
            if current.checkpoint.next.is_empty() {
                return Ok(result(Outcome::Finished, &current, supersteps));
            }
            if self.control.is_cancelled() {
                return Ok(result(Outcome::Cancelled, &current, supersteps));
            }
            if self.control.is_drain_requested() {
                return Ok(result(
                    Outcome::Drained(self.control.reason()),
                    &current,
                    supersteps,
                ));
            }
            let breakpoint = current
                .checkpoint
                .next
                .iter()
                .any(|task| self.options.interrupt_before.matches(&task.node));
            if breakpoint && !(goes_on && supersteps == 0) {
                return Ok(self.at_breakpoint(&current, supersteps));
            }
            if supersteps >= self.options.recursion_limit {
                return Err(Error::RecursionLimit(self.options.recursion_limit));
            }
            let pending = if self.options.durability == Durability::Async {
                self.unsaved.take()
            } else {
                None
            };
            let (saved, step) = tokio::join!(self.save_unsaved(pending), self.superstep(&current));
            saved?;
            match step? {
                Step::Cancelled => return Ok(result(Outcome::Cancelled, &current, supersteps)),
                Step::Drained => {
                    return Ok(result(
                        Outcome::Drained(self.control.reason()),
                        &current,
                        supersteps,
                    ));
                }
                Step::Interrupted(interrupts) => {
                    return Ok(result(
                        Outcome::Interrupted(interrupts),
                        &current,
                        supersteps,
                    ));
                }
                Step::Done(done) => {
                    let breakpoint = done
                        .values()
                        .any(|task| self.options.interrupt_after.matches(&task.node));
                    current = self.advance(&current, &done).await?;
                    supersteps += 1;
                    // A graph that finished has nothing to stop before.
                    if breakpoint && !current.checkpoint.next.is_empty() {
                        return Ok(self.at_breakpoint(&current, supersteps));
                    }
                }
            }
        }
    }

    /// Stops at a breakpoint: interrupted, with no interrupt to answer (LangGraph's `updates`
    /// event of it, an empty `__interrupt__`).
    fn at_breakpoint(&self, current: &Current, supersteps: usize) -> RunResult {
        self.emit(StreamMode::Updates, || json!({INTERRUPT: []}));
        RunResult {
            outcome: Outcome::Interrupted(Vec::new()),
            values: current.values.clone(),
            checkpoint_id: Some(current.checkpoint.checkpoint_id),
            supersteps,
        }
    }

    /// Runs the tasks of `current.checkpoint.next` that have not finished.
    async fn superstep(&self, current: &Current) -> Result<Step> {
        let checkpoint_id = current.checkpoint.checkpoint_id;
        let mut done = BTreeMap::new();
        let mut tasks = JoinSet::new();
        let permits = Arc::new(Semaphore::new(self.options.max_concurrency.max(1)));
        let state = Arc::new(current.values.clone());
        let config = Arc::new(self.options.config.clone());
        let mut task_ids = BTreeMap::new();
        let mut subgraphs: Vec<subgraph::SubgraphTask<'_>> = Vec::new();
        for (index, spec) in current.checkpoint.next.iter().enumerate() {
            let task_id = spec.task_id(index);
            if let Some(finished) = finished_task(&current.writes, &task_id, &spec.node) {
                done.insert(index, finished);
                continue;
            }
            let node = self
                .graph
                .inner
                .nodes
                .get(&spec.node)
                .ok_or_else(|| Error::UnknownNode(spec.node.clone()))?;
            self.emit(StreamMode::Tasks, || json!({"id": task_id, "name": spec.node, "input": spec.arg, "step": current.checkpoint.step + 1}));
            let resume = resume_values_of(&current.writes, &task_id);
            task_ids.insert(index, task_id.clone());
            let run = match &node.body {
                Body::Fn(run) => Arc::clone(run),
                Body::Graph(graph) => {
                    let namespace = task_namespace(&spec.node, checkpoint_id, &task_id);
                    let state = Arc::clone(&state);
                    let task = self.subgraph_task(
                        index,
                        graph.clone(),
                        namespace,
                        state,
                        resume,
                        &permits,
                    );
                    subgraphs.push(task);
                    continue;
                }
            };
            let ctx = NodeContext {
                node: Arc::from(spec.node.as_str()),
                // The thread's id too: a copy of a thread holds the original's checkpoint ids (as
                // on the official server), and its tasks' effects are its own.
                task_id: Arc::from(
                    format!("{}:{checkpoint_id}:{task_id}", self.thread_id).as_str(),
                ),
                state: Arc::clone(&state),
                arg: spec.arg.clone(),
                config: Arc::clone(&config),
                resume: Arc::new(resume),
                interrupts_reached: Arc::new(AtomicUsize::new(0)),
                events: Arc::clone(&self.events),
                stream_modes: self.options.stream_modes,
                store: self.options.store.clone(),
            };
            let (retry, timeout) = (node.retry.clone(), node.timeout);
            let permits = Arc::clone(&permits);
            let drain = self.control.drain.clone();
            // A task runs in the caller's span (the worker's run span: its trace).
            tasks.spawn(
                async move {
                    let _permit = permits
                        .acquire_owned()
                        .await
                        .expect("the semaphore is never closed");
                    if drain.is_cancelled() {
                        return (index, None);
                    }
                    (
                        index,
                        Some(invoke(&run, retry.as_ref(), timeout, ctx).await),
                    )
                }
                .in_current_span(),
            );
        }

        let mut interrupts = Vec::new();
        let mut not_started = false;
        loop {
            let joined = tokio::select! {
                biased;
                () = self.control.cancel.cancelled() => {
                    tasks.abort_all();
                    return Ok(Step::Cancelled);
                }
                joined = subgraph::next_finished(&mut tasks, &mut subgraphs) => joined,
            };
            let Some(joined) = joined else { break };
            // Tasks that finished together are saved together, in one write.
            let mut finished = vec![joined];
            while let Some(joined) = tasks.try_join_next() {
                finished.push(joined.map_err(subgraph::panicked));
            }
            let mut to_save: Vec<TaskWrites> = Vec::new();
            let mut to_emit: Vec<(StreamMode, Value)> = Vec::new();
            let mut failure = None;
            for joined in finished {
                let (index, res) = joined?;
                let spec = &current.checkpoint.next[index];
                let task_id = &task_ids[&index];
                let Some(res) = res else {
                    not_started = true;
                    continue;
                };
                match res {
                    Ok(command) => {
                        self.check_update(&spec.node, &command)?;
                        let mut writes = command.update.clone();
                        let goto: Vec<Value> = command.goto.iter().map(goto_json).collect();
                        writes.push((TASK_DONE.to_owned(), json!({ "goto": goto })));
                        to_save.push((task_id.clone(), writes));
                        if self.builds(StreamMode::Updates) || self.builds(StreamMode::Tasks) {
                            let update = update_json(&command.update);
                            to_emit.push((
                                StreamMode::Updates,
                                json!({ spec.node.clone(): update.clone() }),
                            ));
                            to_emit.push((
                                StreamMode::Tasks,
                                json!({"id": task_id, "name": spec.node, "result": update, "error": null, "interrupts": []}),
                            ));
                        }
                        let task = TaskDone {
                            node: spec.node.clone(),
                            update: command.update,
                            goto: command.goto,
                        };
                        done.insert(index, task);
                    }
                    Err(NodeError::Interrupted(value)) => {
                        let resumes = resume_entries(&current.writes, task_id);
                        let id = format!("{checkpoint_id}:{task_id}:{}", resumes.len());
                        let mut writes =
                            vec![(INTERRUPT.to_owned(), json!({"id": id, "value": value}))];
                        if !resumes.is_empty() {
                            writes.push((RESUME.to_owned(), Value::Array(resumes)));
                        }
                        to_save.push((task_id.clone(), writes));
                        // Clients see an interrupt in `updates` and in `values`, as LangGraph
                        // streams it.
                        let interrupt = json!({"__interrupt__": [{"id": id, "value": value}]});
                        to_emit.push((StreamMode::Updates, interrupt.clone()));
                        to_emit.push((StreamMode::Values, interrupt));
                        interrupts.push(Interrupt {
                            id,
                            value,
                            node: spec.node.clone(),
                            task_id: task_id.clone(),
                        });
                    }
                    Err(NodeError::Failed { message, retryable }) => {
                        to_emit.push((
                            StreamMode::Tasks,
                            json!({"id": task_id, "name": spec.node, "result": null, "error": message}),
                        ));
                        failure.get_or_insert(Error::NodeFailed {
                            node: spec.node.clone(),
                            message,
                            retryable,
                        });
                    }
                }
            }
            // N.B. The last tasks of a superstep that will checkpoint need no writes of their
            // own: the checkpoint saved right after them holds their effects, and a crash in
            // between re-runs them exactly as a crash before their writes would. This halves the
            // commits of one-task supersteps.
            let checkpoint_follows = failure.is_none()
                && !not_started
                && tasks.is_empty()
                && subgraphs.is_empty()
                && interrupts.is_empty()
                && self.options.durability == Durability::Sync;
            if !checkpoint_follows {
                self.put_writes(checkpoint_id, to_save).await?;
            }
            for (mode, data) in to_emit {
                self.emit(mode, || data);
            }
            if let Some(failure) = failure {
                tasks.abort_all();
                return Err(failure);
            }
        }
        if !interrupts.is_empty() {
            Ok(Step::Interrupted(interrupts))
        } else if not_started {
            Ok(Step::Drained)
        } else {
            Ok(Step::Done(done))
        }
    }

    /// Applies a finished superstep and saves the checkpoint that follows it.
    async fn advance(
        &mut self,
        current: &Current,
        done: &BTreeMap<usize, TaskDone>,
    ) -> Result<Current> {
        self.checkpoint_after(Some(current), done, "loop", None)
            .await
    }

    /// Whether the run builds events of `mode`: it streams it, or wraps it in `debug`.
    fn builds(&self, mode: StreamMode) -> bool {
        self.options.stream_modes.contains(mode) || self.wraps_in_debug(mode)
    }

    /// Whether events of `mode` are sent wrapped in `debug` too (`tasks` and `checkpoints`).
    fn wraps_in_debug(&self, mode: StreamMode) -> bool {
        self.options.stream_modes.contains(StreamMode::Debug)
            && matches!(mode, StreamMode::Tasks | StreamMode::Checkpoints)
    }

    /// Sends the event `data` makes, as `mode` and wrapped in `debug` as the run streams them;
    /// `data` is not called when it streams neither.
    fn emit(&self, mode: StreamMode, data: impl FnOnce() -> Value) {
        let debug = self.wraps_in_debug(mode);
        let wanted = self.options.stream_modes.contains(mode);
        if !wanted && !debug {
            return;
        }
        let mut data = data();
        if debug {
            let debug_type = match mode {
                StreamMode::Checkpoints => "checkpoint",
                _ if data.get("result").is_some() || data.get("error").is_some() => "task_result",
                _ => "task",
            };
            let step = data.get("step").cloned().unwrap_or(Value::Null);
            let payload = if wanted {
                data.clone()
            } else {
                std::mem::take(&mut data)
            };
            let wrapped = [
                ("type".to_owned(), Value::from(debug_type)),
                ("step".to_owned(), step),
                ("payload".to_owned(), payload),
            ];
            (self.events)(StreamEvent {
                mode: StreamMode::Debug,
                node: None,
                data: Value::Object(wrapped.into_iter().collect()),
                namespace: Vec::new(),
            });
        }
        if wanted {
            (self.events)(StreamEvent {
                mode,
                node: None,
                data,
                namespace: Vec::new(),
            });
        }
    }
}

impl From<Saved> for Current {
    fn from(saved: Saved) -> Self {
        Current {
            checkpoint: saved.checkpoint,
            values: saved.values,
            writes: saved.writes,
        }
    }
}
