//! Server-sent events of a run: a `metadata` event, then the run's events after the client's
//! `Last-Event-ID` (replayed from the log, then live, with no gap and no duplicate across a
//! listener reconnect), each with `id` = its `seq`; keep-alive comments; `end` last. A stream
//! also ends when the pod shuts down.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use mostrador_queue::event::EventFollower;
use mostrador_queue::{Error as QueueError, Run};
use serde_json::json;
use tokio::sync::mpsc;

use crate::app::AppState;
use crate::error::ApiError;

/// How often a quiet stream gets a keep-alive comment (the client gives up after 300 s).
const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// The `Last-Event-ID` header: the `seq` to resume after (0 for the whole stream).
///
/// # Errors
///
/// 422 for a value that is not a sequence number.
pub fn last_event_id(headers: &HeaderMap) -> Result<i64, ApiError> {
    match headers.get("last-event-id") {
        None => Ok(0),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|id| id.trim().parse::<i64>().ok())
            .filter(|seq| *seq >= 0)
            .ok_or_else(|| {
                ApiError::new(
                    axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                    "Last-Event-ID must be the id of an event of this run",
                )
            }),
    }
}

/// Streams `run`'s events after `after_seq`, of the stream modes in `modes` (all when `None`).
///
/// # Errors
///
/// 503 with `Retry-After` when the process serves its limit of streams already.
pub fn events(
    state: &AppState,
    run: &Run,
    after_seq: i64,
    modes: Option<Vec<String>>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>> + use<>>, ApiError> {
    let subscriber = state.subscribe().ok_or_else(|| ApiError {
        retry_after: Some(5),
        ..ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "this server streams to as many clients as it may; try again",
        )
    })?;
    let (sender, receiver) = mpsc::channel::<Event>(64);
    let (state, run) = (state.clone(), run.clone());
    tokio::spawn(async move {
        follow(state, run, after_seq, modes, sender).await;
        drop(subscriber);
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|event| (Ok(event), receiver))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("heartbeat")))
}

/// Sends the run's events until `end`, a shutdown, or a client that went away.
async fn follow(
    state: AppState,
    run: Run,
    after_seq: i64,
    modes: Option<Vec<String>>,
    sender: mpsc::Sender<Event>,
) {
    let metadata = Event::default()
        .event("metadata")
        .data(json!({"run_id": run.run_id.0, "attempt": run.attempt}).to_string());
    if sender.send(metadata).await.is_err() {
        return;
    }
    let mut shutdown = state.shutdown_signal();
    let mut follower = match EventFollower::start(
        state.pool().clone(),
        state.listener(),
        run.run_id,
        after_seq,
    )
    .await
    {
        Ok(follower) => follower,
        Err(err) => {
            let _ = sender.send(error_event(&err)).await;
            return;
        }
    };
    loop {
        let next = tokio::select! {
            next = follower.next() => next,
            _ = shutdown.wait_for(|shutting_down| *shutting_down) => return,
            // The client went away: free its slot now, not at the run's next event.
            () = sender.closed() => return,
        };
        let event = match next {
            Ok(Some(event)) => event,
            // The listener stopped (the process is shutting down).
            Ok(None) => return,
            // Rolled back while followed: it never happened.
            Err(QueueError::RunNotFound(_)) => return,
            Err(err) => {
                let _ = sender.send(error_event(&err)).await;
                return;
            }
        };
        let wanted = match event.event.as_str() {
            "end" | "error" => true,
            // The queue's own bookkeeping: the run goes on elsewhere.
            "drained" => false,
            mode => modes
                .as_ref()
                .is_none_or(|modes| modes.iter().any(|wanted| wanted == mode)),
        };
        if wanted {
            let sse = Event::default()
                .event(event.event.as_str())
                .id(event.seq.to_string())
                .data(event.data.to_string());
            if sender.send(sse).await.is_err() {
                return;
            }
        }
        if event.event == "end" {
            return;
        }
    }
}

fn error_event(err: &QueueError) -> Event {
    tracing::warn!(error = %err, "following a run's events failed");
    Event::default().event("error").data(
        json!({"error": "StreamError", "message": "the run's events could not be read; reconnect with Last-Event-ID"})
            .to_string(),
    )
}
