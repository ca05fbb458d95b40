//! One claimed run, from start to finish: choose where the graph starts (input, resume, or the
//! run's own last checkpoint after a drain or a crash), run it on the Postgres checkpointer
//! fenced by the run's lease, append its events in batches, and end it with the transition its
//! outcome calls for.
//!
//! A lost lease stops the run at once, and nothing more is written for it: every write (events,
//! checkpoints, the terminal transition) is fenced.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mostrador_graph::{
    Checkpointer, Durability, Error as GraphError, Graph, Outcome, Resume, RunControl, RunInput,
    RunOptions, StreamEvent, StreamMode,
};
use mostrador_queue::event::{self, NewEvent};
use mostrador_queue::{
    CancelAction, ClaimedRun, Error as QueueError, PgCheckpointer, RunStatus, ThreadStatus,
};
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::time::Instant;

use crate::Error;
use crate::telemetry::{GraphLabel, Telemetry};
use crate::timed::Timed;

/// How often a run's buffered events (model tokens above all) are appended.
pub const EVENT_FLUSH_INTERVAL_DEFAULT: Duration = Duration::from_millis(50);

/// What the supervisor holds to steer a run it executes.
#[derive(Debug, Clone, Default)]
pub struct RunHandle {
    /// Drain and cancel at the engine level.
    pub control: RunControl,
    cancel_action: Arc<Mutex<Option<CancelAction>>>,
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

    fn cancel_action(&self) -> Option<CancelAction> {
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

/// Executes one claimed run to its end. `timeout` bounds the whole run (it then ends `timeout`).
///
/// # Errors
///
/// A database failure during a transition; the run stays `running` until its lease expires.
pub async fn execute(
    pool: &PgPool,
    claimed: &ClaimedRun,
    graph: &Graph,
    handle: &RunHandle,
    timeout: Option<Duration>,
    telemetry: &Telemetry,
) -> Result<Finish, Error> {
    if let Some(action) = claimed.cancel_action {
        // Cancelled while it waited (released by a drain): honour it before running anything.
        handle.cancel(action);
    }
    let checkpointer = Timed::new(
        PgCheckpointer::fenced(pool.clone(), claimed.lease()),
        telemetry,
    );
    let options = match run_options(claimed) {
        Ok(options) => options,
        Err(message) => return fail(pool, claimed, "InvalidConfig", &message, false).await,
    };
    let input = match run_input(graph, &checkpointer, claimed).await {
        Ok(input) => input,
        Err(err) => return finish_error(pool, claimed, err).await,
    };

    let buffer: Arc<Mutex<Vec<NewEvent>>> = Arc::default();
    let sink = {
        let buffer = Arc::clone(&buffer);
        let superstep = telemetry
            .superstep_seconds
            .get_or_create(&GraphLabel {
                graph: claimed.graph_id.clone(),
            })
            .clone();
        let superstep_began = Mutex::new(Instant::now());
        Arc::new(move |event: StreamEvent| {
            if event.mode == StreamMode::Checkpoints {
                // A checkpoint ends a superstep (or records the input, which is no superstep).
                let mut began = superstep_began
                    .lock()
                    .expect("superstep clock lock is never poisoned");
                if event.data["metadata"]["source"] == "loop" {
                    superstep.observe(began.elapsed().as_secs_f64());
                }
                *began = Instant::now();
            }
            buffer
                .lock()
                .expect("event buffer lock is never poisoned")
                .push(wire_event(event));
        })
    };
    let thread_id = claimed.thread_id.0;
    let run = graph.run(
        &checkpointer,
        thread_id,
        input,
        &options,
        &handle.control,
        sink,
    );
    let (finished, mut finished_rx) = tokio::sync::watch::channel(false);
    let run = async {
        let result = match timeout {
            Some(timeout) => tokio::time::timeout(timeout, run).await.ok(),
            None => Some(run.await),
        };
        let _ = finished.send(true);
        result
    };
    // N.B. The flusher runs beside the graph (joined, both polled), never inside a `select!` arm
    // that leaves the graph unpolled: a suspended graph may hold a pooled connection whose
    // statement already finished, and runs whose flushes wait for such connections starve the
    // pool until it times out.
    let flusher = async {
        let mut tick = tokio::time::interval(EVENT_FLUSH_INTERVAL_DEFAULT);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = finished_rx.changed() => return Ok(true),
            }
            match flush_events(pool, claimed, &buffer).await {
                Ok(true) => {}
                // Writes are fenced anyway; stop spending work on a run we no longer hold.
                Ok(false) => {
                    handle.control.cancel();
                    return Ok(false);
                }
                Err(err) => {
                    handle.control.cancel();
                    return Err(err);
                }
            }
        }
    };
    let (result, held) = tokio::join!(run, flusher);
    let lease_lost = !held?;
    if lease_lost || !flush_events(pool, claimed, &buffer).await? {
        return Ok(Finish::LeaseLost);
    }

    let Some(result) = result else {
        tracing::info!(run_id = %claimed.run_id, "run timed out");
        return complete(pool, claimed, RunStatus::Timeout, ThreadStatus::Error).await;
    };
    match result {
        Ok(result) => match result.outcome {
            Outcome::Finished => {
                complete(pool, claimed, RunStatus::Success, ThreadStatus::Idle).await
            }
            Outcome::Interrupted(_) => {
                complete(pool, claimed, RunStatus::Success, ThreadStatus::Interrupted).await
            }
            Outcome::Drained(reason) => {
                transition(claimed.release(pool, &reason).await, Finish::Released)
            }
            Outcome::Cancelled => match handle.cancel_action() {
                Some(CancelAction::Interrupt) => {
                    complete(pool, claimed, RunStatus::Interrupted, ThreadStatus::Idle).await
                }
                Some(CancelAction::Rollback) => {
                    transition(claimed.roll_back(pool).await, Finish::RolledBack)
                }
                // Cancelled by the worker itself (its drain timeout): another worker resumes it.
                None => transition(
                    claimed.release(pool, "drain timeout").await,
                    Finish::Released,
                ),
            },
        },
        Err(err) => finish_error(pool, claimed, err).await,
    }
}

/// The engine's options from the run's `config` (`max_concurrency`, `recursion_limit`,
/// `durability`, and `configurable` for the nodes).
fn run_options(claimed: &ClaimedRun) -> Result<RunOptions, String> {
    let config = &claimed.config;
    let mut options = RunOptions::default();
    if let Some(n) = config.get("max_concurrency") {
        options.max_concurrency = positive(n, "max_concurrency")?;
    }
    if let Some(n) = config.get("recursion_limit") {
        options.recursion_limit = positive(n, "recursion_limit")?;
    }
    options.durability = match config.get("durability").and_then(Value::as_str) {
        None | Some("sync") => Durability::Sync,
        Some("async") => Durability::Async,
        Some("exit") => Durability::Exit,
        Some(other) => {
            return Err(format!(
                "durability must be sync, async or exit, not {other:?}"
            ));
        }
    };
    let mut configurable = config
        .get("configurable")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Value::Object(map) = &mut configurable {
        map.insert("run_id".into(), json!(claimed.run_id.0));
        map.insert("thread_id".into(), json!(claimed.thread_id.0));
    }
    options.config = configurable;
    Ok(options)
}

fn positive(value: &Value, field: &str) -> Result<usize, String> {
    value
        .as_u64()
        .filter(|n| *n > 0)
        .map(|n| n as usize)
        .ok_or_else(|| format!("{field} must be a positive integer, not {value}"))
}

/// Where the graph starts: the run's own last checkpoint when it already made one (it was drained
/// or its worker died), else the resume of its command, else its input.
async fn run_input(
    graph: &Graph,
    checkpointer: &impl Checkpointer,
    claimed: &ClaimedRun,
) -> Result<RunInput, GraphError> {
    let state = graph
        .get_state(checkpointer, claimed.thread_id.0, None)
        .await?;
    if state.metadata.get("run_id") == Some(&json!(claimed.run_id.0)) {
        return Ok(RunInput::Continue);
    }
    if let Some(resume) = claimed
        .command
        .as_ref()
        .and_then(|command| command.get("resume"))
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
    Ok(RunInput::Values(
        claimed.input.clone().unwrap_or_else(|| json!({})),
    ))
}

/// The event as the `langgraph-sdk` streams it: `messages` as `[chunk, metadata]`.
fn wire_event(event: StreamEvent) -> NewEvent {
    let data = match (event.mode, event.node) {
        (StreamMode::Messages, Some(node)) => json!([event.data, {"langgraph_node": node}]),
        (_, _) => event.data,
    };
    NewEvent::new(event.mode.as_str(), data)
}

/// Appends the buffered events; `false` when the lease was lost.
async fn flush_events(
    pool: &PgPool,
    claimed: &ClaimedRun,
    buffer: &Mutex<Vec<NewEvent>>,
) -> Result<bool, Error> {
    let events = std::mem::take(&mut *buffer.lock().expect("event buffer lock is never poisoned"));
    if events.is_empty() {
        return Ok(true);
    }
    match event::append(pool, claimed.lease(), &events).await {
        Ok(_) => Ok(true),
        Err(QueueError::LeaseLost { .. }) => Ok(false),
        Err(err) => Err(err.into()),
    }
}

async fn complete(
    pool: &PgPool,
    claimed: &ClaimedRun,
    status: RunStatus,
    thread_status: ThreadStatus,
) -> Result<Finish, Error> {
    transition(
        claimed.complete(pool, status, thread_status).await,
        Finish::Ended(status),
    )
}

async fn fail(
    pool: &PgPool,
    claimed: &ClaimedRun,
    kind: &str,
    message: &str,
    retryable: bool,
) -> Result<Finish, Error> {
    let error = json!({"error": kind, "message": message});
    match claimed.fail(pool, &error, retryable).await {
        Ok(RunStatus::Pending) => Ok(Finish::Retrying),
        Ok(status) => Ok(Finish::Ended(status)),
        Err(QueueError::LeaseLost { .. }) => Ok(Finish::LeaseLost),
        Err(err) => Err(err.into()),
    }
}

/// Ends the run for an engine error: a lost lease writes nothing; failures that another attempt
/// may not repeat (a node error, the database) are retryable within `max_attempts`; the others
/// end the run `error` at once.
async fn finish_error(
    pool: &PgPool,
    claimed: &ClaimedRun,
    err: GraphError,
) -> Result<Finish, Error> {
    let (kind, retryable) = match &err {
        GraphError::Checkpointer(cause) => match cause.downcast_ref::<QueueError>() {
            Some(QueueError::LeaseLost { .. }) => return Ok(Finish::LeaseLost),
            _ => ("CheckpointerError", true),
        },
        GraphError::NodeFailed { .. } => ("NodeError", true),
        GraphError::RecursionLimit(_) => ("GraphRecursionError", false),
        GraphError::NothingToResume => ("NothingToResume", false),
        GraphError::InvalidGraph(_)
        | GraphError::InvalidInput(_)
        | GraphError::InvalidUpdate { .. }
        | GraphError::UnknownNode(_)
        | GraphError::CheckpointNotFound => ("InvalidUpdateError", false),
    };
    tracing::warn!(run_id = %claimed.run_id, error = %err, retryable, "run failed");
    fail(pool, claimed, kind, &err.to_string(), retryable).await
}

fn transition(res: Result<(), QueueError>, finish: Finish) -> Result<Finish, Error> {
    match res {
        Ok(()) => Ok(finish),
        Err(QueueError::LeaseLost { .. }) => Ok(Finish::LeaseLost),
        Err(err) => Err(err.into()),
    }
}
