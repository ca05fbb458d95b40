//! One claimed run, from start to finish: choose where the graph starts (input, resume, or the
//! run's own last checkpoint after a drain or a crash), run it on the Postgres checkpointer
//! fenced by the run's lease, hand its events to the worker's [`Publisher`], and end it with the
//! transition its outcome calls for.
//!
//! A lost lease stops the run at once, and nothing more is written for it: every write (events,
//! checkpoints, the terminal transition) is fenced.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mostrador_graph::{
    Checkpointer, Error as GraphError, Goto, Graph, Outcome, Resume, RunControl, RunInput,
    RunOptions, Send, Store, StreamEvent, StreamMode, StreamModes,
};
use mostrador_queue::PgPool;
use mostrador_queue::run::ending::{After, Ending};
use mostrador_queue::run::{RunCommand, RunConfig, RunSpec};
use mostrador_queue::state::checkpoint::{FinalCheckpoint, HeldFinal};
use mostrador_queue::{
    CancelAction, ClaimedRun, Error as QueueError, NewEvent, PgCheckpointer, RunStatus,
};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::Error;
use crate::publish::{Publisher, RunEvents};
use crate::store::ThreadStore;
use crate::telemetry::{GraphLabel, Telemetry};
use crate::timed::Timed;

/// What the supervisor holds to steer a run it executes.
#[derive(Debug, Clone, Default)]
pub struct RunHandle {
    /// Drain and cancel at the engine level.
    pub control: RunControl,
    cancel_action: Arc<Mutex<Option<CancelAction>>>,
    /// The run's final checkpoint, once made: its ending writes it, or, when that could not be
    /// written, the retryable failure the supervisor records instead.
    pub final_checkpoint: HeldFinal,
}

impl RunHandle {
    pub fn new() -> Self {
        Self::default()
    }

    /// A user cancelled the run: abort its tasks now and end it as `action` says.
    pub fn cancel(&self, action: CancelAction) {
        let mut current = self
            .cancel_action
            .lock()
            .expect("cancel action lock is never poisoned");
        // Rollback is the stronger action: a later interrupt does not weaken it.
        if *current != Some(CancelAction::Rollback) {
            *current = Some(action);
        }
        drop(current);
        self.control.cancel();
    }

    pub(crate) fn cancel_action(&self) -> Option<CancelAction> {
        *self
            .cancel_action
            .lock()
            .expect("cancel action lock is never poisoned")
    }
}

/// How a run left this worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// The run ended with this status (`success`, `interrupted`, `timeout` or `error`).
    Ended(RunStatus),
    /// A retryable failure put it back to `pending` with a backoff.
    Retrying,
    /// A drain gave it back to `pending`, its attempt not used up.
    Released,
    /// A `rollback` cancel deleted it.
    RolledBack,
    /// The lease was lost (the run was swept, maybe claimed again): nothing was written after.
    LeaseLost,
}

impl From<After> for Finish {
    fn from(after: After) -> Self {
        match after {
            After::Ended(status) => Finish::Ended(status),
            After::Retrying => Finish::Retrying,
            After::Released => Finish::Released,
            After::RolledBack => Finish::RolledBack,
        }
    }
}

/// What executing runs needs from its worker: the database, the publisher that writes events and
/// completions, and the metrics. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Executor {
    pub(crate) pool: PgPool,
    pub(crate) publisher: Publisher,
    telemetry: Arc<Telemetry>,
    /// For runs whose configuration sets none, and the most any may ask for.
    pub(crate) max_concurrency: Option<usize>,
}

impl Executor {
    /// Starts the worker's publisher task.
    pub fn new(pool: PgPool, telemetry: Arc<Telemetry>) -> Self {
        Self {
            publisher: Publisher::start(pool.clone()),
            pool,
            telemetry,
            max_concurrency: None,
        }
    }

    /// Buffered events wait at most `interval` to be written ([`crate::publish::FLUSH_INTERVAL`]
    /// otherwise): starts a publisher of its own.
    #[must_use]
    pub fn flush_interval(mut self, interval: Duration) -> Self {
        self.publisher = Publisher::flushing_every(self.pool.clone(), interval);
        self
    }

    /// A superstep's tasks at once (the engine's default otherwise): what runs whose
    /// configuration sets no `max_concurrency` get, and the most any run may ask for.
    #[must_use]
    pub fn max_concurrency(mut self, max_concurrency: Option<usize>) -> Self {
        self.max_concurrency = max_concurrency;
        self
    }

    /// Executes one claimed run to its end, which the claim does not outlive. `timeout` bounds
    /// the whole run (it then ends `timeout`).
    ///
    /// # Errors
    ///
    /// A database failure during a transition; the run stays `running` until its lease expires.
    pub async fn execute(
        &self,
        claimed: ClaimedRun,
        graph: &Graph,
        handle: &RunHandle,
        timeout: Option<Duration>,
    ) -> Result<Finish, Error> {
        let pool = &self.pool;
        if let Some(action) = claimed.cancel_action {
            // Cancelled while it waited (released by a drain): honour it before running anything.
            handle.cancel(action);
        }
        let events = Arc::new(self.publisher.register(
            claimed.lease(),
            handle.control.clone(),
            claimed.streamed,
        ));
        // The run's final checkpoint is written with its ending: one commit fewer.
        let checkpointer = Timed::new(
            PgCheckpointer::fenced(pool.clone(), &claimed)
                .holding_final(handle.final_checkpoint.clone()),
            &self.telemetry,
        );
        // Only the modes the client asked for are stored (LangGraph streams no others).
        let wanted: StreamModes = claimed.stream_mode.iter().copied().collect();
        let spec = match &claimed.spec {
            Ok(spec) => spec.clone(),
            Err(message) => {
                let message = message.clone();
                return fail(&events, claimed, "InvalidRun", &message, false).await;
            }
        };
        let options = RunOptions {
            store: Some(Store::new(ThreadStore::new(
                pool.clone(),
                claimed.thread_id,
            ))),
            // The engine builds no event nobody reads; checkpoints time the supersteps.
            stream_modes: wanted.with(StreamMode::Checkpoints),
            ..run_options(&claimed, &spec.config, self.max_concurrency)
        };
        let input = match run_input(graph, &checkpointer, &claimed, &spec).await {
            Ok(input) => input,
            Err(err) => return finish_error(&events, claimed, err).await,
        };
        let sink = {
            let events = Arc::clone(&events);
            let final_checkpoint = handle.final_checkpoint.clone();
            let superstep = self
                .telemetry
                .superstep_seconds
                .get_or_create(&GraphLabel {
                    graph: claimed.graph_id.clone(),
                })
                .clone();
            let superstep_began = Mutex::new(Instant::now());
            let subgraphs = spec.config.stream_subgraphs;
            Arc::new(move |event: StreamEvent| {
                if event.mode == StreamMode::Checkpoints && event.namespace.is_empty() {
                    // A checkpoint ends a superstep (or records the input, which is no superstep).
                    let mut began = superstep_began
                        .lock()
                        .expect("superstep clock lock is never poisoned");
                    if event.data["metadata"]["source"] == "loop" {
                        superstep.observe(began.elapsed().as_secs_f64());
                    }
                    *began = Instant::now();
                }
                // A subgraph's events go to clients that asked for them (`stream_subgraphs`),
                // its model's tokens to every client, as LangGraph streams them.
                let shown =
                    event.namespace.is_empty() || subgraphs || event.mode == StreamMode::Messages;
                if shown && wanted.contains(event.mode) {
                    if final_checkpoint.get().is_some() {
                        // After the final checkpoint: written with it, by the ending.
                        events.hold_for_end();
                    }
                    events.push(wire_event(event, subgraphs));
                }
            })
        };
        let run = graph.run(
            &checkpointer,
            claimed.thread_id.0,
            input,
            &options,
            &handle.control,
            sink,
        );
        let result = match timeout {
            Some(timeout) => tokio::time::timeout(timeout, run).await.ok(),
            None => Some(run.await),
        };
        // Its kept connection goes back to the pool now: the run has left its slot, and the
        // next run may need it before this one's ending commits.
        drop(checkpointer);
        if events.lost() {
            return Ok(Finish::LeaseLost);
        }

        let final_checkpoint = handle.final_checkpoint.get();
        let Some(result) = result else {
            tracing::info!(run_id = %claimed.run_id(), "run timed out");
            return end_with(&events, claimed, Ending::TimedOut, final_checkpoint).await;
        };
        let ending = match result {
            Err(err) => return finish_error(&events, claimed, err).await,
            Ok(result) => match result.outcome {
                Outcome::Finished => Ending::Success,
                Outcome::Interrupted(_) => Ending::Paused,
                Outcome::Cancelled => cancelled(handle),
                Outcome::Drained(reason) => Ending::Released { reason },
            },
        };
        end_with(&events, claimed, ending, final_checkpoint).await
    }
}

/// The engine's options from the run's `config` (`max_concurrency`, at most the worker's;
/// `recursion_limit`, `durability`, the breakpoints, and `configurable` for the nodes).
fn run_options(
    claimed: &ClaimedRun,
    config: &RunConfig,
    max_concurrency: Option<usize>,
) -> RunOptions {
    let mut options = RunOptions::default();
    if let Some(n) = max_concurrency {
        options.max_concurrency = n;
    }
    // The operator's bound (or the engine's default) is a ceiling: a run may ask for fewer.
    if let Some(n) = config.max_concurrency {
        options.max_concurrency = options.max_concurrency.min(n.get() as usize);
    }
    if let Some(n) = config.recursion_limit {
        options.recursion_limit = usize::try_from(n.get()).unwrap_or(usize::MAX);
    }
    options.durability = config.durability.unwrap_or_default();
    let mut configurable = config.configurable.clone();
    configurable.insert("run_id".into(), json!(claimed.run_id().0));
    configurable.insert("thread_id".into(), json!(claimed.thread_id.0));
    if let Some(trace_id) = &claimed.trace_id {
        configurable.insert("trace_id".into(), json!(trace_id));
    }
    options.config = Value::Object(configurable);
    options.interrupt_before = config.interrupt_before.clone();
    options.interrupt_after = config.interrupt_after.clone();
    options
}

/// Where the graph starts: the run's own last checkpoint when it already made one (it was drained
/// or its worker died), else the resume of its command, else its input, on the past checkpoint
/// the run names (a new branch) or the thread's latest.
async fn run_input(
    graph: &Graph,
    checkpointer: &impl Checkpointer,
    claimed: &ClaimedRun,
    spec: &RunSpec,
) -> Result<RunInput, GraphError> {
    let state = graph
        .get_state(checkpointer, claimed.thread_id.0, None)
        .await?;
    if state.metadata.get("run_id") == Some(&json!(claimed.run_id().0)) {
        return Ok(RunInput::Continue);
    }
    if let Some(resume) = spec
        .command
        .as_ref()
        .and_then(|command| command.resume.as_ref())
    {
        let pending: Vec<&str> = state.interrupts().map(|i| i.id.as_str()).collect();
        let by_id = resume
            .as_object()
            .filter(|map| !map.is_empty() && map.keys().all(|id| pending.contains(&id.as_str())));
        return Ok(RunInput::Resume(match by_id {
            Some(map) => Resume::ById(
                map.iter()
                    .map(|(id, value)| (id.clone(), value.clone()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            None => Resume::Value(resume.clone()),
        }));
    }
    if let Some(command) = spec.command.as_ref().filter(|command| command.moves()) {
        return command_input(command);
    }
    if let Some(checkpoint_id) = spec.config.checkpoint_id {
        return Ok(RunInput::From {
            checkpoint_id,
            input: spec.input.clone().filter(|input| !input.is_null()),
        });
    }
    match spec.input.clone().filter(|input| !input.is_null()) {
        Some(input) => Ok(RunInput::Values(input)),
        // No input: the thread goes on from where it stopped (a breakpoint), as LangGraph does.
        None if state.checkpoint_id.is_some() => Ok(RunInput::Continue),
        None => Ok(RunInput::Values(json!({}))),
    }
}

/// A command's `update` (an object, or `[channel, value]` pairs) and `goto` (a node, a `Send`
/// `{node, input}`, or a list of them).
fn command_input(command: &RunCommand) -> Result<RunInput, GraphError> {
    let invalid = |what: &str| GraphError::InvalidInput(format!("command.{what}"));
    let update = match command.update.as_ref().unwrap_or(&Value::Null) {
        Value::Null => Vec::new(),
        Value::Object(values) => values
            .iter()
            .map(|(channel, value)| (channel.clone(), value.clone()))
            .collect(),
        Value::Array(pairs) => pairs
            .iter()
            .map(|pair| match pair.as_array().map(Vec::as_slice) {
                Some([Value::String(channel), value]) => Ok((channel.clone(), value.clone())),
                _ => Err(invalid(
                    "update must be an object or [channel, value] pairs",
                )),
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(invalid(
                "update must be an object or [channel, value] pairs",
            ));
        }
    };
    let targets = match command.goto.as_ref().unwrap_or(&Value::Null) {
        Value::Null => Vec::new(),
        Value::Array(targets) => targets.clone(),
        one => vec![one.clone()],
    };
    let goto = targets
        .into_iter()
        .map(|target| match target {
            Value::String(node) => Ok(Goto::Node(node)),
            Value::Object(send) => match send.get("node") {
                Some(Value::String(node)) => Ok(Goto::Send(Send {
                    node: node.clone(),
                    arg: send.get("input").cloned().unwrap_or(Value::Null),
                })),
                _ => Err(invalid("goto's Send must name its node")),
            },
            _ => Err(invalid("goto must be a node, a Send or a list of them")),
        })
        .collect::<Result<_, _>>()?;
    Ok(RunInput::Command { update, goto })
}

/// The event as the `langgraph-sdk` streams it: `messages` as `[chunk, metadata]`; a
/// subgraph's, for a client that asked for them, named `<mode>|<namespace>…`.
fn wire_event(event: StreamEvent, subgraphs: bool) -> NewEvent {
    let namespace = event.namespace.join("|");
    let data = match (event.mode, event.node) {
        (StreamMode::Messages, Some(node)) if namespace.is_empty() => {
            json!([event.data, {"langgraph_node": node}])
        }
        (StreamMode::Messages, Some(node)) => json!([
            event.data,
            {"langgraph_node": node, "langgraph_checkpoint_ns": namespace}
        ]),
        (_, _) => event.data,
    };
    if subgraphs && !namespace.is_empty() {
        NewEvent::new(format!("{}|{namespace}", event.mode.as_str()), data)
    } else {
        NewEvent::new(event.mode.as_str(), data)
    }
}

/// The ending of a cancelled run.
pub(crate) fn cancelled(handle: &RunHandle) -> Ending {
    match handle.cancel_action() {
        Some(CancelAction::Interrupt) => Ending::Cancelled,
        // Its events go with it.
        Some(CancelAction::Rollback) => Ending::RolledBack,
        // Cancelled by the worker itself (its drain timeout): another worker resumes it.
        None => Ending::Released {
            reason: "drain timeout".to_owned(),
        },
    }
}

/// Ends the run through the publisher, in the transaction of its last events: the claim ends
/// here.
pub(crate) async fn end(
    events: &RunEvents,
    claimed: ClaimedRun,
    ending: Ending,
) -> Result<Finish, Error> {
    end_with(events, claimed, ending, None).await
}

/// As [`end`], with the run's final checkpoint, which its checkpointer held, written first.
async fn end_with(
    events: &RunEvents,
    claimed: ClaimedRun,
    ending: Ending,
    checkpoint: Option<Arc<FinalCheckpoint>>,
) -> Result<Finish, Error> {
    let end = claimed.ending(ending).with_checkpoint(checkpoint);
    let after = end.after();
    Ok(match events.end(end).await? {
        true => after.into(),
        false => Finish::LeaseLost,
    })
}

pub(crate) async fn fail(
    events: &RunEvents,
    claimed: ClaimedRun,
    kind: &str,
    message: &str,
    retryable: bool,
) -> Result<Finish, Error> {
    let error = json!({"error": kind, "message": message});
    end(events, claimed, Ending::Failed { error, retryable }).await
}

/// Puts a run the database failed back to wait for it ([`Ending::Postponed`]): no attempt used.
pub(crate) async fn postpone(
    events: &RunEvents,
    claimed: ClaimedRun,
    why: &str,
) -> Result<Finish, Error> {
    tracing::warn!(run_id = %claimed.run_id(), error = why, "the database failed: the run waits for it");
    let reason = format!("the database failed: {why}");
    end(events, claimed, Ending::Postponed { reason }).await
}

/// Ends the run for an engine error: a lost lease writes nothing; the database failing for a
/// while postpones it; failures that another attempt
/// may not repeat (a node's retryable error, the database) are retryable within `max_attempts`;
/// the others (a node's fatal error included) end the run `error` at once.
async fn finish_error(
    events: &RunEvents,
    claimed: ClaimedRun,
    err: GraphError,
) -> Result<Finish, Error> {
    let (kind, retryable) = match &err {
        GraphError::Checkpointer(cause) => match cause.downcast_ref::<QueueError>() {
            Some(QueueError::LeaseLost { .. }) => return Ok(Finish::LeaseLost),
            _ if mostrador_queue::is_transient(cause.as_ref()) => {
                return postpone(events, claimed, &err.to_string()).await;
            }
            _ => ("CheckpointerError", true),
        },
        GraphError::NodeFailed { retryable, .. } => ("NodeError", *retryable),
        GraphError::RecursionLimit(_) => ("GraphRecursionError", false),
        GraphError::NothingToResume => ("NothingToResume", false),
        GraphError::InvalidGraph(_)
        | GraphError::InvalidInput(_)
        | GraphError::InvalidUpdate { .. }
        | GraphError::UnknownNode(_)
        | GraphError::CheckpointNotFound => ("InvalidUpdateError", false),
    };
    tracing::warn!(run_id = %claimed.run_id(), error = %err, retryable, "run failed");
    fail(events, claimed, kind, &err.to_string(), retryable).await
}
