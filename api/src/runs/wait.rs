//! Streaming a run's events, and waiting for its end (with keep-alives).

use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mostrador_graph::checkpoint::INTERRUPT;
use mostrador_queue::run::{self};
use mostrador_queue::thread::{self};
use mostrador_queue::{Run, RunStatus};
use serde_json::{Value, json};

use super::accept::{Accepted, CreateRun, Follow, StreamModes, accept};
use super::{queue_error, rejoin_location, visible_run, writable_run};
use crate::app::{AppState, Subscriber};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{Body, RunHeaders};
use crate::stream::{self, Start};

pub async fn create_and_stream(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    RunHeaders(headers): RunHeaders,
    Body(mut body): Body<CreateRun>,
) -> Result<Response, ApiError> {
    body.headers = headers;
    let messages = body.messages_form();
    let on_disconnect = body.on_disconnect();
    let slot = stream::slot(&state, &caller)?;
    let accepted = accept(&state, &caller, &thread_id, body, Follow::Streams).await?;
    Ok(streaming(&state, slot, accepted, messages, on_disconnect))
}

/// Streams the events of a run this request created, each stream mode it stores, from its first.
pub(super) fn streaming(
    state: &AppState,
    slot: Subscriber,
    mut accepted: Accepted,
    messages: stream::Messages,
    on_disconnect: stream::OnDisconnect,
) -> Response {
    let start = accepted.start();
    let events = stream::events(
        state,
        slot,
        &accepted.run,
        start,
        None,
        messages,
        on_disconnect,
    );
    (rejoin_location(&accepted.run, "stream"), events).into_response()
}

/// `GET /threads/{thread_id}/runs/{run_id}/stream`: the run's events after `Last-Event-ID`,
/// of the `stream_mode`s asked for (all stored ones when none is); with
/// `cancel_on_disconnect=true`, going away cancels the run.
pub async fn join_stream(
    State(state): State<AppState>,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (modes, messages) = stream_modes_query(query.as_deref())?;
    let run = visible_run(&state, &caller, &thread_id, &run_id).await?;
    let on_disconnect =
        cancel_on_disconnect(&state, &caller, (&thread_id, &run_id), query.as_deref()).await;
    // After an event the run's log does not have yet, the stream goes on from its latest; a run
    // that ended then replays its end, which closes the stream (it would wait forever).
    let asked = stream::last_event_id(&headers);
    let ended = !matches!(run.status, RunStatus::Pending | RunStatus::Running);
    let after = if asked.is_none() || ended {
        let last = run::event::last_seq(state.pool(), run.run_id)
            .await
            .map_err(ApiError::failed)?;
        let last = if ended { last - 1 } else { last };
        asked.map_or(last, |asked| asked.min(last))
    } else {
        asked.unwrap_or(0)
    };
    let slot = stream::slot(&state, &caller)?;
    let events = stream::events(
        &state,
        slot,
        &run,
        Start::After(after),
        modes,
        messages,
        on_disconnect,
    );
    // Where the SDK reconnects by itself should this connection drop too.
    Ok((rejoin_location(&run, "stream"), events).into_response())
}

/// The `cancel_on_disconnect` query value of a join: `true`, `yes` or `1` (any case) cancels,
/// anything else does not, as on the official server (the Python SDK sends `true`/`false`, the
/// JS SDK `1`/`0`); but only for a caller who may cancel the run: one who only reads its thread
/// (a supervisor following a customer's chat) joins it, and leaving changes nothing.
async fn cancel_on_disconnect(
    state: &AppState,
    caller: &Caller,
    (thread_id, run_id): (&str, &str),
    query: Option<&str>,
) -> stream::OnDisconnect {
    let asked = asked_to_cancel_on_disconnect(query);
    if asked == stream::OnDisconnect::Cancel
        && writable_run(state, caller, thread_id, run_id)
            .await
            .is_err()
    {
        return stream::OnDisconnect::Continue;
    }
    asked
}

fn asked_to_cancel_on_disconnect(query: Option<&str>) -> stream::OnDisconnect {
    let asked = query
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == "cancel_on_disconnect")
        .is_some_and(|(_, value)| {
            matches!(value.to_ascii_lowercase().as_str(), "true" | "yes" | "1")
        });
    if asked {
        stream::OnDisconnect::Cancel
    } else {
        stream::OnDisconnect::Continue
    }
}

/// `stream_mode` query values (repeated keys, as the client sends a list; empty means all), and
/// the form of `messages` events they ask for.
fn stream_modes_query(
    query: Option<&str>,
) -> Result<(Option<Vec<String>>, stream::Messages), ApiError> {
    let names: Vec<String> = query
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .filter(|(key, value)| *key == "stream_mode" && !value.is_empty())
        .map(|(_, value)| value.replace("%2D", "-").replace("%2d", "-"))
        .collect();
    if names.is_empty() {
        return Ok((None, stream::Messages::Tuple));
    }
    let messages = stream::Messages::asked(names.iter().map(String::as_str));
    let modes = StreamModes::Many(names).parse()?;
    Ok((
        Some(
            modes
                .into_iter()
                .map(|mode| mode.as_str().to_owned())
                .collect(),
        ),
        messages,
    ))
}

/// `POST /threads/{thread_id}/runs/wait`: enqueue, wait for the end, answer the final state.
pub async fn create_and_wait(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    RunHeaders(headers): RunHeaders,
    Body(mut body): Body<CreateRun>,
) -> Result<Response, ApiError> {
    body.headers = headers;
    let on_disconnect = body.on_disconnect();
    let slot = stream::slot(&state, &caller)?;
    let mut accepted = accept(&state, &caller, &thread_id, body, Follow::Waits).await?;
    let start = accepted.start();
    Ok(waiting(
        state,
        slot,
        accepted.run,
        start,
        false,
        on_disconnect,
    ))
}

/// `GET /threads/{thread_id}/runs/{run_id}/join`: wait for the end, answer the final state;
/// with `cancel_on_disconnect=true`, going away cancels the run.
pub async fn join(
    State(state): State<AppState>,
    caller: Caller,
    Path((thread_id, run_id)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let run = visible_run(&state, &caller, &thread_id, &run_id).await?;
    let on_disconnect =
        cancel_on_disconnect(&state, &caller, (&thread_id, &run_id), query.as_deref()).await;
    let slot = stream::slot(&state, &caller)?;
    Ok(waiting(
        state,
        slot,
        run,
        Start::After(0),
        false,
        on_disconnect,
    ))
}

/// How often a waiting answer sends a blank line, so the client (it gives up after 300 s of
/// silence) keeps waiting; JSON parsers skip leading whitespace.
const WAIT_KEEP_ALIVE: Duration = Duration::from_secs(5);

/// Answers `200` at once, then blank lines while the run goes on, then its final state (or
/// `{"__error__": ...}` if waiting failed); with `delete_thread`, the run's thread is deleted
/// once it ended. A client that goes away first cancels the run if it asked for that.
pub(super) fn waiting(
    state: AppState,
    slot: Subscriber,
    run: Run,
    start: Start,
    delete_thread: bool,
    on_disconnect: stream::OnDisconnect,
) -> Response {
    let headers = rejoin_location(&run, "join");
    let (sender, receiver) = tokio::sync::mpsc::channel::<axum::body::Bytes>(4);
    tokio::spawn(async move {
        let result = until_ended(&state, &run, start);
        tokio::pin!(result);
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + WAIT_KEEP_ALIVE,
            WAIT_KEEP_ALIVE,
        );
        let answer = loop {
            tokio::select! {
                answer = &mut result => break answer,
                () = sender.closed() => {
                    on_disconnect.client_gone(&state, &run).await;
                    return;
                }
                _ = tick.tick() => {
                    if sender.send(axum::body::Bytes::from_static(b"\n")).await.is_err() {
                        on_disconnect.client_gone(&state, &run).await;
                        return;
                    }
                }
            }
        };
        // Only a run that ended has its thread deleted: one the api stopped waiting for (it
        // shuts down) goes on, and the client may join it again.
        let answer = match answer {
            Ok(result) => {
                let answer = self::answer(&state, &run, result).await;
                if delete_thread && let Err(err) = thread::delete(state.pool(), run.thread_id).await
                {
                    tracing::warn!(error = %err, "deleting a stateless run's thread failed");
                }
                answer
            }
            Err(err) => Err(err),
        };
        let body = match answer {
            Ok(value) => value,
            Err(err) => json!({"__error__": {"error": "WaitFailed", "message": err.detail}}),
        };
        let _ = sender.send(axum::body::Bytes::from(body.to_string())).await;
        drop(slot);
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver
            .recv()
            .await
            .map(|bytes| (Ok::<_, std::convert::Infallible>(bytes), receiver))
    });
    (
        headers,
        [(header::CONTENT_TYPE, "application/json")],
        axum::body::Body::from_stream(stream),
    )
        .into_response()
}

/// Creates a run on `thread_id` and waits for its end, for a protocol served over the api's own
/// calls (A2A): the run, and its answer as `/runs/wait` gives it.
pub(crate) async fn create_and_join(
    state: &AppState,
    caller: &Caller,
    thread_id: &str,
    body: CreateRun,
) -> Result<(Run, Value), ApiError> {
    let _slot = stream::slot(state, caller)?;
    let mut accepted = accept(state, caller, thread_id, body, Follow::Waits).await?;
    let start = accepted.start();
    let result = until_ended(state, &accepted.run, start).await?;
    let answer = answer(state, &accepted.run, result).await?;
    Ok((accepted.run, answer))
}

/// Waits for the run's `end`, then answers as the official server does: the thread's values,
/// with `__interrupt__` when the graph waits, or `{"__error__": ...}` when the run failed.
pub(crate) async fn final_state(state: &AppState, run: &Run) -> Result<Value, ApiError> {
    let result = until_ended(state, run, Start::After(0)).await?;
    answer(state, run, result).await
}

/// What the run streamed, once it ended. An error: it may not have (the api shuts down).
async fn until_ended(state: &AppState, run: &Run, start: Start) -> Result<RunResult, ApiError> {
    let mut follower = start.follower(state, run).await.map_err(queue_error)?;
    let mut shutdown = state.shutdown_signal();
    let mut result = RunResult::default();
    loop {
        let next = tokio::select! {
            next = follower.next() => next,
            _ = shutdown.wait_for(|shutting_down| *shutting_down) => {
                return Err(ApiError {
                    retry_after: Some(1),
                    ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the server is shutting down: join the run again")
                });
            }
        };
        match next.map_err(queue_error)? {
            Some(event) if event.event == "end" => {
                result.ended = event.data["status"].as_str().and_then(RunStatus::from_name);
                break;
            }
            Some(event) => result.absorb(event.event, event.data),
            None => {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the server is shutting down: join the run again",
                ));
            }
        }
    }
    Ok(result)
}

/// The answer of an ended run.
async fn answer(state: &AppState, run: &Run, mut result: RunResult) -> Result<Value, ApiError> {
    // The `end` event says how the run ended, and an `error` event before it why; a log that
    // does not is read from the run.
    if result.ended.is_none() {
        let ended = run::get(state.pool(), run.thread_id, run.run_id)
            .await
            .map_err(queue_error)?;
        result.ended = Some(ended.status);
        result.error = result.error.or(ended.error);
    }
    if matches!(result.ended, Some(RunStatus::Error | RunStatus::Timeout)) {
        let error = result
            .error
            .unwrap_or_else(|| json!({"error": "Timeout", "message": "the run timed out"}));
        return Ok(json!({"__error__": error}));
    }
    // A Rust graph's run that waits for an answer answers its values with the interrupts in
    // them, read from the thread; else, as a Python graph's, what it streamed last (its last
    // `values` chunk is its last checkpoint's state).
    if (state.is_python(&run.graph_id) || result.interrupted.is_empty())
        && let Some(answer) = result.answer()
    {
        return Ok(answer);
    }
    let Some(latest) = crate::state::latest(state, run.thread_id, Some(&run.graph_id)).await?
    else {
        return Ok(json!({}));
    };
    let interrupts: Vec<Value> = latest.interrupts.into_iter().map(|(_, i)| i).collect();
    let mut values = latest.values;
    if !interrupts.is_empty() {
        values.insert(INTERRUPT.to_owned(), Value::Array(interrupts));
    }
    Ok(Value::Object(values))
}

/// What a run's events say of its end: its status and error, and what a Python graph's run
/// answers a wait, as on the official server: the chunks that carried interrupts (their
/// interrupts together, when several did), or else its last `values` chunk.
#[derive(Debug, Default)]
struct RunResult {
    /// The status of its `end` event.
    ended: Option<RunStatus>,
    /// Its `error` event's data.
    error: Option<Value>,
    interrupted: Vec<Value>,
    latest: Option<Value>,
}

impl RunResult {
    /// Takes the run's `error` event, and its root `values` and `updates` events (not its
    /// subgraphs').
    fn absorb(&mut self, event: String, data: Value) {
        if event == "error" {
            self.error = Some(data);
            return;
        }
        let interrupts = data
            .get(INTERRUPT)
            .and_then(Value::as_array)
            .is_some_and(|interrupts| !interrupts.is_empty());
        if (event == "values" || event == "updates") && interrupts {
            self.interrupted.push(data.clone());
            self.latest = Some(data);
        } else if event == "values" {
            self.latest = Some(data);
        }
    }

    /// `None` when the run streamed neither (the thread's state answers then).
    fn answer(self) -> Option<Value> {
        if self.interrupted.len() > 1 {
            let all: Vec<Value> = self
                .interrupted
                .iter()
                .flat_map(|chunk| chunk[INTERRUPT].as_array().cloned().unwrap_or_default())
                .collect();
            return Some(json!({INTERRUPT: all}));
        }
        self.interrupted.into_iter().next().or(self.latest)
    }
}
