//! Server-sent events of a run: a `metadata` event, then the run's events after the client's
//! `Last-Event-ID` (replayed from the log, then live, with no gap and no duplicate across a
//! listener reconnect), each with `id` = its `seq`; keep-alive comments; closed after the run's
//! last event (its `end`, kept in the log, is not sent, as on the official server). A stream
//! also ends when the pod shuts down. A client that asked for it ([`OnDisconnect::Cancel`])
//! cancels the run by going away before its end.

pub mod protocol;
pub mod thread;

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use mostrador_queue::listener::RunSubscription;
use mostrador_queue::run::event::EventFollower;
use mostrador_queue::{CancelAction, Error as QueueError, Run};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::SendTimeoutError;
use utoipa::ToSchema;

use crate::app::{AppState, AtLimit, Subscriber};
use crate::auth::Caller;
use crate::error::ApiError;

/// Events a stream holds for a client that does not read them yet.
pub const STREAM_BUFFER: usize = 64;

/// How often a quiet stream gets a keep-alive comment (the client gives up after 300 s).
const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// What a client that goes away before the run's end does to it (`on_disconnect`, or
/// `cancel_on_disconnect` when joining).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnDisconnect {
    /// The run goes on; the client may join it again.
    #[default]
    Continue,
    /// The run is cancelled (`interrupt`), as the official server does.
    Cancel,
}

impl OnDisconnect {
    /// The client went away: cancels the run if it asked for that (a run already ended stays
    /// as it is).
    pub async fn client_gone(self, state: &AppState, run: &Run) {
        if self == Self::Continue {
            return;
        }
        match mostrador_queue::cancel(
            state.pool(),
            run.thread_id,
            run.run_id,
            CancelAction::Interrupt,
        )
        .await
        {
            Ok(outcome) => {
                tracing::info!(run_id = %run.run_id, ?outcome, "the client went away: run cancelled");
            }
            Err(err) => {
                tracing::warn!(run_id = %run.run_id, error = %err, "cancelling on disconnect failed");
            }
        }
    }
}

/// The `Last-Event-ID` header: the `seq` to resume after (0 for the whole stream; `-1`, the JS
/// SDK's default when rejoining, is "from the start", as officially); `None` for an id that names
/// no event of a run of mostrador's: the stream goes on from the run's latest event, as the
/// official server's does for an id after every one it has.
pub fn last_event_id(headers: &HeaderMap) -> Option<i64> {
    match headers.get("last-event-id") {
        None => Some(0),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|id| id.trim().parse::<i64>().ok())
            .filter(|seq| *seq >= -1)
            .map(|seq| seq.max(0)),
    }
}

/// How a client asked for model tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Messages {
    /// `messages-tuple`: one `messages` event per chunk, `[chunk, metadata]`, as stored.
    #[default]
    Tuple,
    /// `messages`: `messages/metadata` the first time a message is seen, then
    /// `messages/partial` with the message accumulated so far (`messages/complete` for a whole
    /// message), as the official server streams them.
    Partial,
}

impl Messages {
    /// The form the stream mode names ask for: `messages` without `messages-tuple` is partial.
    pub fn asked<'a>(mut names: impl Iterator<Item = &'a str> + Clone) -> Self {
        if names.clone().any(|name| name == "messages")
            && !names.any(|name| name == "messages-tuple")
        {
            Messages::Partial
        } else {
            Messages::Tuple
        }
    }
}

/// One of the process's slots for SSE streams and waits, counted for the caller too, taken
/// before anything else the request does (a run it creates, above all: a client told to come back
/// later must not have created it).
///
/// # Errors
///
/// With `Retry-After`: 503 when the process serves its limit of streams already, 429 when the
/// caller holds its own limit.
pub fn slot(state: &AppState, caller: &Caller) -> Result<Subscriber, ApiError> {
    state
        .subscribe(&caller.subject)
        .map_err(|limit| match limit {
            AtLimit::Process => ApiError {
                retry_after: Some(5),
                ..ApiError::new(
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    "this server streams to as many clients as it may; try again",
                )
            },
            AtLimit::Caller => ApiError {
                retry_after: Some(5),
                ..ApiError::new(
                    axum::http::StatusCode::TOO_MANY_REQUESTS,
                    "you have as many streams and waits open as you may; close one, or try again",
                )
            },
        })
}

/// Streams `run`'s events after `after_seq`, of the stream modes in `modes` (all when `None`),
/// with model tokens in the `messages` form asked for, in the stream `slot`.
pub fn events(
    state: &AppState,
    slot: Subscriber,
    run: &Run,
    start: Start,
    modes: Option<Vec<String>>,
    messages: Messages,
    on_disconnect: OnDisconnect,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<>> {
    let (state, run) = (state.clone(), run.clone());
    respond(slot, move |sender| async move {
        let gone = follow(&state, &run, start, modes, messages, sender).await;
        if gone {
            on_disconnect.client_gone(&state, &run).await;
        }
    })
}

/// An SSE response in the stream `slot`, fed by `feed`, spawned with a sender of its events;
/// keep-alive comments while it is quiet.
pub(crate) fn respond<F, Fut>(
    slot: Subscriber,
    feed: F,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<F, Fut>>
where
    F: FnOnce(mpsc::Sender<Event>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (sender, receiver) = mpsc::channel::<Event>(STREAM_BUFFER);
    let fed = feed(sender);
    tokio::spawn(async move {
        fed.await;
        drop(slot);
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|event| (Ok(event), receiver))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("heartbeat"))
}

/// Sends one event. A client that stopped reading holds at most the channel's events; past the
/// timeout it is let go, and other streams never wait for it.
///
/// # Errors
///
/// The stream is over: `true` when the client went away, `false` when it stopped reading.
pub(crate) async fn send(
    state: &AppState,
    sender: &mpsc::Sender<Event>,
    sse: Event,
) -> Result<(), bool> {
    match sender.send_timeout(sse, state.slow_client_timeout()).await {
        Ok(()) => Ok(()),
        Err(SendTimeoutError::Timeout(_)) => {
            tracing::info!("an SSE client stopped reading: disconnected");
            Err(false)
        }
        Err(SendTimeoutError::Closed(_)) => Err(true),
    }
}

/// Where a follower of a run's events starts.
#[derive(Debug)]
pub enum Start {
    /// After this `seq` of the run's log (0: at its first event): the log is read first.
    After(i64),
    /// At its first event, subscribed to before the run was enqueued: nothing to read first (a
    /// run's `wait` or `stream` as it is created).
    New(RunSubscription),
}

impl Start {
    /// A follower of `run`'s events from here.
    pub(crate) async fn follower(
        self,
        state: &AppState,
        run: &Run,
    ) -> Result<EventFollower, QueueError> {
        match self {
            Start::After(seq) => {
                EventFollower::start(state.pool().clone(), state.listener(), run.run_id, seq).await
            }
            Start::New(subscription) => Ok(EventFollower::of_new_run(
                state.pool().clone(),
                subscription,
            )),
        }
    }
}

/// Sends the run's events until its end, a shutdown, or a client that went away (`true`).
async fn follow(
    state: &AppState,
    run: &Run,
    start: Start,
    modes: Option<Vec<String>>,
    messages: Messages,
    sender: mpsc::Sender<Event>,
) -> bool {
    // The attempt that runs it: the first, while the run still waits for its first claim.
    let attempt = run.attempt.max(1);
    let metadata = Event::default().event("metadata").data(
        json!({"run_id": run.run_id.0, "attempt": attempt, "trace_id": run.trace_id}).to_string(),
    );
    if sender.send(metadata).await.is_err() {
        return true;
    }
    let mut shutdown = state.shutdown_signal();
    // Partial messages accumulate every chunk of a message: a resumed stream re-reads the log
    // from the start and sends only what follows `after_seq`.
    let mut partial = (messages == Messages::Partial).then(Accumulated::default);
    let (after_seq, start) = match start {
        Start::After(seq) if partial.is_some() => (seq, Start::After(0)),
        Start::After(seq) => (seq, Start::After(seq)),
        Start::New(subscription) => (0, Start::New(subscription)),
    };
    let mut follower = match start.follower(state, run).await {
        Ok(follower) => follower,
        Err(err) => {
            let _ = sender.send(error_event(&err)).await;
            return false;
        }
    };
    loop {
        let next = tokio::select! {
            next = follower.next() => next,
            _ = shutdown.wait_for(|shutting_down| *shutting_down) => return false,
            // The client went away: free its slot now, not at the run's next event.
            () = sender.closed() => return true,
        };
        let event = match next {
            Ok(Some(event)) => event,
            // The listener stopped (the process is shutting down).
            Ok(None) => return false,
            // Rolled back while followed: it never happened.
            Err(QueueError::RunNotFound(_)) => return false,
            Err(err) => {
                let _ = sender.send(error_event(&err)).await;
                return false;
            }
        };
        let wanted = match event.event.as_str() {
            "error" => true,
            // The queue's own bookkeeping: the run goes on elsewhere, or it ended (the stream
            // closes, as the official server's do, with no event of its own).
            "drained" | "end" => false,
            mode => modes
                .as_ref()
                .is_none_or(|modes| modes.iter().any(|wanted| wanted == mode)),
        };
        let id = event.seq.to_string();
        let sses = match &mut partial {
            Some(accumulated) if wanted && event.event == "messages" => {
                accumulated.fold(&event.data)
            }
            _ if wanted => vec![(event.event.clone(), event.data.clone())],
            _ => Vec::new(),
        };
        // Events up to `after_seq` were read only to accumulate messages.
        let replayed = event.seq <= after_seq;
        for (name, data) in sses.into_iter().filter(|_| !replayed) {
            let sse = Event::default()
                .event(name)
                .id(id.clone())
                .data(data.to_string());
            if let Err(gone) = send(state, &sender, sse).await {
                return gone;
            }
        }
        if event.event == "end" {
            return false;
        }
    }
}

/// The messages seen so far on a stream, by id, for the `messages` (partial) form.
#[derive(Debug, Default)]
pub(crate) struct Accumulated(HashMap<String, Value>);

impl Accumulated {
    /// The events one stored `[chunk, metadata]` becomes.
    pub(crate) fn fold(&mut self, data: &Value) -> Vec<(String, Value)> {
        let (message, metadata) = (&data[0], &data[1]);
        let Some(id) = message["id"].as_str() else {
            return vec![("messages/complete".into(), json!([message]))];
        };
        let mut sses = Vec::new();
        if !self.0.contains_key(id) {
            sses.push((
                "messages/metadata".into(),
                json!({ id: {"metadata": metadata} }),
            ));
        }
        if message["type"] != "AIMessageChunk" {
            self.0.insert(id.to_owned(), message.clone());
            sses.push(("messages/complete".into(), json!([message])));
            return sses;
        }
        let so_far = self
            .0
            .entry(id.to_owned())
            .or_insert_with(|| json!({"type": "ai", "id": id, "content": ""}));
        add_chunk(so_far, message);
        // A message, as the official server sends it: without what only chunks carry.
        let mut partial = so_far.clone();
        if let Some(fields) = partial.as_object_mut() {
            fields.remove("tool_call_chunks");
            fields.remove("chunk_position");
        }
        sses.push(("messages/partial".into(), json!([partial])));
        sses
    }
}

/// Adds a chunk to the message so far, as LangChain adds message chunks: the text appended, the
/// tool call chunks of the same `index` joined (their `args` are JSON text arriving in pieces),
/// and the tool calls whose `args` are whole JSON so far made `tool_calls`. Fields the message
/// does not have yet (`response_metadata`, `usage_metadata`, ...) come from the chunk.
fn add_chunk(so_far: &mut Value, chunk: &Value) {
    let text = format!(
        "{}{}",
        so_far["content"].as_str().unwrap_or(""),
        chunk["content"].as_str().unwrap_or("")
    );
    so_far["content"] = json!(text);
    let (Some(so_far), Some(chunk)) = (so_far.as_object_mut(), chunk.as_object()) else {
        return;
    };
    for (key, value) in chunk {
        if !matches!(
            key.as_str(),
            "type" | "content" | "tool_calls" | "tool_call_chunks"
        ) && so_far.get(key).is_none_or(Value::is_null)
        {
            so_far.insert(key.clone(), value.clone());
        }
    }
    let Some(pieces) = chunk.get("tool_call_chunks").and_then(Value::as_array) else {
        return;
    };
    let calls = so_far
        .entry("tool_call_chunks")
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .expect("tool_call_chunks is a list");
    for piece in pieces {
        match calls
            .iter_mut()
            .find(|call| !piece["index"].is_null() && call["index"] == piece["index"])
        {
            Some(call) => {
                for field in ["name", "args", "id"] {
                    if let Some(more) = piece[field].as_str() {
                        let joined = format!("{}{more}", call[field].as_str().unwrap_or(""));
                        call[field] = json!(joined);
                    }
                }
            }
            None => calls.push(piece.clone()),
        }
    }
    let tool_calls: Vec<Value> = calls
        .iter()
        .filter_map(|call| {
            let args = call["args"].as_str().unwrap_or("");
            let args: Value = if args.is_empty() {
                json!({})
            } else {
                serde_json::from_str(args).ok()?
            };
            Some(json!({"name": call["name"], "args": args, "id": call["id"], "type": "tool_call"}))
        })
        .collect();
    so_far.insert("tool_calls".into(), json!(tool_calls));
}

pub(crate) fn error_event(err: &QueueError) -> Event {
    tracing::warn!(error = %err, "following a run's events failed");
    Event::default().event("error").data(
        json!({"error": "StreamError", "message": "the run's events could not be read; reconnect with Last-Event-ID"})
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Accumulated;

    #[test]
    fn partial_messages_carry_tool_calls_joined_from_their_chunks() {
        let mut seen = Accumulated::default();
        let metadata = json!({"langgraph_node": "agent"});
        let chunks = [
            json!({"type": "AIMessageChunk", "id": "m1", "content": "", "response_metadata": {},
                   "tool_call_chunks": [{"index": 0, "name": "get_weather", "args": "", "id": "call-1"}]}),
            json!({"type": "AIMessageChunk", "id": "m1", "content": "",
                   "tool_call_chunks": [{"index": 0, "name": null, "args": "{\"city\": ", "id": null}]}),
            json!({"type": "AIMessageChunk", "id": "m1", "content": "",
                   "tool_call_chunks": [{"index": 0, "name": null, "args": "\"Paris\"}", "id": null}]}),
        ];
        let mut partials = Vec::new();
        for chunk in &chunks {
            for (name, data) in seen.fold(&json!([chunk, metadata])) {
                if name == "messages/partial" {
                    partials.push(data[0].clone());
                }
            }
        }
        assert_eq!(partials.len(), 3);
        assert_eq!(
            partials[0]["tool_calls"],
            json!([{"name": "get_weather", "args": {}, "id": "call-1", "type": "tool_call"}])
        );
        assert_eq!(
            partials[1]["tool_calls"],
            json!([]),
            "half an object is no call yet"
        );
        assert_eq!(
            partials[2]["tool_calls"],
            json!([{"name": "get_weather", "args": {"city": "Paris"}, "id": "call-1", "type": "tool_call"}])
        );
        assert!(
            partials[2].get("tool_call_chunks").is_none(),
            "a message, not a chunk"
        );
        assert_eq!(partials[2]["response_metadata"], json!({}));
    }
}
