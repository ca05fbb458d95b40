//! The states of Python graphs' threads: the api serves what workers described with LangGraph
//! (it runs no Python), and queues the updates that need the graph's reducers for a worker.

use std::time::Duration;

use axum::http::StatusCode;
use mostrador_graph::StateSnapshot;
use mostrador_queue::run::event::EventFollower;
use mostrador_queue::{
    CancelAction, Error as QueueError, NewRun, Run, RunStatus, run, state::saver,
};
use mostrador_queue::{Thread, ThreadStatus, cancel};
use serde_json::{Value, json};
use uuid::Uuid;

use super::snapshot_answer;
use crate::app::AppState;
use crate::error::ApiError;

/// Whether the thread's graph is a Python one, whose states its workers describe.
pub(super) fn is_python(state: &AppState, thread: &Thread) -> bool {
    thread
        .graph_id
        .as_deref()
        .is_some_and(|graph_id| state.is_python(graph_id))
}

/// States of a Python graph's thread, newest first, as its workers described them with the graph
/// (`ThreadState` in the official server's JSON). The ids are the thread's own, so a copy reads
/// as itself.
pub(super) async fn python_states(
    state: &AppState,
    thread: &Thread,
    checkpoint_id: Option<Uuid>,
    before: Option<Uuid>,
    limit: i64,
    subgraphs: bool,
    metadata: Option<&Value>,
) -> Result<Vec<Value>, ApiError> {
    let snapshots = saver::snapshots(
        state.pool(),
        thread.thread_id.0,
        checkpoint_id,
        before,
        limit,
        metadata,
    )
    .await
    .map_err(ApiError::failed)?;
    let checkpoint = |id: Option<Uuid>| {
        id.map(
            |id| json!({"checkpoint_id": id, "thread_id": thread.thread_id.0, "checkpoint_ns": ""}),
        )
    };
    Ok(snapshots
        .into_iter()
        .map(|saved| {
            // Not described yet (its worker stopped in between): what the row itself says.
            let mut value = saved.snapshot.unwrap_or_else(|| {
                json!({
                    "values": {}, "next": [], "tasks": [], "interrupts": [],
                    "metadata": saved.metadata, "created_at": saved.created_at,
                })
            });
            value["checkpoint"] = checkpoint(Some(saved.checkpoint_id)).unwrap_or_default();
            value["parent_checkpoint"] = checkpoint(saved.parent_checkpoint_id).unwrap_or_default();
            value["checkpoint_id"] = json!(saved.checkpoint_id);
            value["parent_checkpoint_id"] = json!(saved.parent_checkpoint_id);
            if !subgraphs {
                leave_out_subgraph_states(&mut value);
            }
            value
        })
        .collect())
}

/// A state as LangGraph gives it without `subgraphs`: a waiting subgraph's task points to the
/// subgraph's namespace (`checkpoint`) instead of holding its state. Workers describe states with
/// them.
pub(super) fn leave_out_subgraph_states(snapshot: &mut Value) {
    let Some(tasks) = snapshot["tasks"].as_array_mut() else {
        return;
    };
    for task in tasks {
        let nested = task["state"].take();
        if let Some(at) = nested.get("checkpoint").filter(|at| at.is_object()) {
            task["checkpoint"] = json!({
                "thread_id": at["thread_id"],
                "checkpoint_ns": at["checkpoint_ns"],
            });
        }
    }
}

/// The latest state of a Python graph's thread, or at a checkpoint.
pub(super) async fn python_state(
    state: &AppState,
    thread: &Thread,
    checkpoint_id: Option<Uuid>,
    subgraphs: bool,
) -> Result<Value, ApiError> {
    match python_states(state, thread, checkpoint_id, None, 1, subgraphs, None)
        .await?
        .pop()
    {
        Some(found) => Ok(found),
        None if checkpoint_id.is_some() => Err(ApiError::not_found("Checkpoint not found")),
        None => serde_json::to_value(snapshot_answer(thread, &StateSnapshot::empty(), ""))
            .map_err(ApiError::failed),
    }
}

/// Where a runner graph's thread is: its latest checkpoint (none for a thread that never ran),
/// and whether the thread waits for a resume (it has tasks to run) there, or at `named`, the
/// past checkpoint a run goes back to.
///
/// # Errors
///
/// The database failed; `named` is not a checkpoint of the thread.
pub async fn python_position(
    state: &AppState,
    thread: &Thread,
    named: Option<Uuid>,
) -> Result<(Option<Uuid>, bool), ApiError> {
    let latest = python_state(state, thread, None, false).await?;
    let checkpoint_id = latest["checkpoint"]["checkpoint_id"]
        .as_str()
        .and_then(|id| Uuid::parse_str(id).ok());
    let at = match named {
        Some(named) if Some(named) != checkpoint_id => {
            python_state(state, thread, Some(named), false).await?
        }
        _ => latest,
    };
    let waits = at["next"].as_array().is_some_and(|next| !next.is_empty());
    Ok((checkpoint_id, waits))
}

/// How long an update of a Python graph's thread may wait for a worker to apply it.
const PYTHON_UPDATE_TIMEOUT: Duration = Duration::from_secs(60);

/// Updates a Python graph's thread with the graph's own reducers (`aupdate_state`), which only a
/// worker can run: the update is queued on the thread as a run of its own, so it is ordered with
/// the thread's runs and its checkpoint is fenced like theirs; it is not listed among the runs.
/// As on the official server, whoever may see the thread may update it, and not while a run is
/// in flight.
pub(super) async fn python_update(
    state: &AppState,
    caller: &crate::auth::Caller,
    thread: &Thread,
    values: Option<Value>,
    as_node: Option<String>,
    checkpoint_id: Option<Uuid>,
) -> Result<super::Updated, ApiError> {
    let graph_id = thread.graph_id.clone().unwrap_or_default();
    let in_flight = || {
        ApiError::conflict("the thread has a run in flight: update its state when the run is over")
    };
    if thread.status == ThreadStatus::Busy {
        return Err(in_flight());
    }
    let mut new = NewRun::new(thread.thread_id, graph_id);
    new.command = Some(run::RunCommand {
        update_state: Some(run::StateUpdate {
            values: values.unwrap_or(Value::Null),
            as_node,
            checkpoint_id,
        }),
        ..run::RunCommand::default()
    });
    new.stream_mode = Vec::new();
    // Queued as any run: within the graph's bound and the caller's share, placed after the runs
    // the caller already has waiting.
    let job = match run::enqueue(state.pool(), &new, Some(state.queue_limit())).await {
        Ok(enqueued) => enqueued.run,
        Err(QueueError::Conflict { .. }) => return Err(in_flight()),
        Err(err) => return Err(crate::runs::accept::refused(state, caller, err)),
    };
    let withdraw = Withdraw {
        state: state.clone(),
        job: Some((job.thread_id, job.run_id)),
    };
    let applied = tokio::time::timeout(PYTHON_UPDATE_TIMEOUT, applied_checkpoint(state, &job));
    let checkpoint = match applied.await {
        Ok(applied) => applied?,
        Err(_) => {
            drop(withdraw);
            return Err(ApiError {
                retry_after: Some(5),
                ..ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "no worker of the thread's graph applied the update in time",
                )
            });
        }
    };
    withdraw.disarm();
    Ok(super::Updated::at(checkpoint))
}

/// An update nobody waits for any more, withdrawn (unless a worker is applying it right now): its
/// wait timed out, or its request was cut short (the request timeout, the client gone), which
/// drops the handler before it gets further.
struct Withdraw {
    state: AppState,
    job: Option<(mostrador_queue::ThreadId, mostrador_queue::RunId)>,
}

impl Withdraw {
    fn disarm(mut self) {
        self.job = None;
    }
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        if let Some((thread_id, run_id)) = self.job.take() {
            let pool = self.state.pool().clone();
            tokio::spawn(async move {
                let _ = cancel(&pool, thread_id, run_id, CancelAction::Rollback).await;
            });
        }
    }
}

/// Follows the update's run to its end: the checkpoint it wrote, or why it failed.
pub(super) async fn applied_checkpoint(state: &AppState, job: &Run) -> Result<Value, ApiError> {
    let mut follower = EventFollower::start(state.pool().clone(), state.listener(), job.run_id, 0)
        .await
        .map_err(crate::runs::queue_error)?;
    let mut checkpoint = None;
    loop {
        match follower.next().await.map_err(crate::runs::queue_error)? {
            Some(event) if event.event == "update_state" => checkpoint = Some(event.data),
            Some(event) if event.event == "end" => break,
            Some(_) => {}
            None => {
                return Err(ApiError {
                    retry_after: Some(1),
                    ..ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the server is shutting down: read the thread's state again",
                    )
                });
            }
        }
    }
    let ended = run::get(state.pool(), job.thread_id, job.run_id)
        .await
        .map_err(crate::runs::queue_error)?;
    match (ended.status, checkpoint) {
        // What LangGraph refused (an unknown node, a value no channel takes) is the request's
        // fault, and changed nothing: 400 with LangGraph's words, as the official server answers.
        (RunStatus::Success, Some(applied)) if applied.get("error").is_some() => {
            Err(ApiError::bad_request(
                applied["message"]
                    .as_str()
                    .unwrap_or("the graph refused the update"),
            ))
        }
        (RunStatus::Success, Some(checkpoint)) => Ok(checkpoint),
        (status, _) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "the update ended {} without a checkpoint: {}",
                status.as_str(),
                ended.error.unwrap_or(Value::Null)
            ),
        )),
    }
}
