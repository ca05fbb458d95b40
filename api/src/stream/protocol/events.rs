//! The protocol's events (`POST /threads/{thread_id}/stream/events`): a thread's runs read
//! from the first, each event numbered once, sent to the subscriber whose filter it passes.

use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use mostrador_queue::run::event::{self, EventFollower, QueuedRun};
use mostrador_queue::{Error as QueueError, Thread, ThreadId, run, thread};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{MARKER, supported};
use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::stream::thread::Asker;
use crate::stream::{respond, send};

/// How often a stream with nothing to follow looks for new runs anyway (an enqueue's wake-up
/// may be missed).
const RECHECK: Duration = Duration::from_secs(2);

/// The body of `POST /threads/{thread_id}/stream/events`, as documented (it is read leniently,
/// as officially: [`Filter::parse`]).
#[derive(Debug, ToSchema)]
#[expect(
    dead_code,
    reason = "the body's documentation: it is read by Filter::parse"
)]
pub struct EventsRequest {
    /// `values`, `updates`, `messages`, `tools`, `custom`, `lifecycle`, `input`, `tasks`,
    /// `checkpoints`, or `custom:<name>`.
    #[schema(min_items = 1)]
    channels: Vec<String>,
    /// Namespace prefixes; a segment without `:` names a node, whatever its task.
    namespaces: Option<Vec<Vec<String>>>,
    /// How many segments below a prefix an event may be.
    #[schema(minimum = 0)]
    depth: Option<u64>,
    /// Only events after this `seq`.
    #[schema(minimum = 0)]
    since: Option<u64>,
}

/// What a subscriber asked for: the body of `POST …/stream/events`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Filter {
    channels: Vec<String>,
    /// Namespace prefixes (none: every namespace).
    namespaces: Vec<Vec<String>>,
    /// How many segments below a prefix an event may be (none: any).
    depth: Option<usize>,
    /// Only events after this `seq`.
    since: i64,
}

impl Filter {
    /// The body as the official server reads it: `channels` strictly, the rest leniently.
    fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let Ok(body) = serde_json::from_slice::<Value>(body) else {
            return Err(ApiError::bad_request("Invalid JSON body"));
        };
        let required =
            || ApiError::bad_request("channels is required and must be a non-empty array");
        let channels = body
            .get("channels")
            .and_then(Value::as_array)
            .filter(|channels| !channels.is_empty())
            .ok_or_else(required)?;
        let unsupported: Vec<String> = channels
            .iter()
            .filter(|channel| !channel.as_str().is_some_and(supported))
            .take(5)
            .map(|channel| match channel {
                Value::String(text) => text.clone(),
                // Python's `repr` of what is not a string, as the official refusal lists it.
                other => crate::mcp::python_repr(other),
            })
            .collect();
        if !unsupported.is_empty() {
            return Err(ApiError::bad_request(format!(
                "channels contains unsupported entries: {}. Allowed: values, updates, messages, \
                 tools, custom, lifecycle, input, tasks, or any `custom:<name>`.",
                unsupported.join(", ")
            )));
        }
        Ok(Self::lenient(&body))
    }

    /// A body whose channels were checked: the rest read leniently, as officially (what is not
    /// a list of namespaces, a depth or a `seq` is left out).
    pub(super) fn lenient(body: &Value) -> Self {
        let namespaces = body
            .get("namespaces")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|namespace| {
                namespace
                    .as_array()?
                    .iter()
                    .map(|part| part.as_str().map(str::to_owned))
                    .collect::<Option<Vec<String>>>()
            })
            .collect();
        let count = |key: &str| body.get(key).and_then(Value::as_u64);
        Self {
            channels: body
                .get("channels")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            namespaces,
            depth: count("depth").and_then(|depth| usize::try_from(depth).ok()),
            since: count("since")
                .and_then(|since| i64::try_from(since).ok())
                .unwrap_or(0),
        }
    }

    /// Whether an event of `method` in `namespace` with `data` is this subscriber's.
    fn admits(&self, method: &str, namespace: &[String], data: &Value) -> bool {
        let channel = if method == "input.requested" {
            "input"
        } else {
            method
        };
        let named = (channel == "custom")
            .then(|| data.get("name").and_then(Value::as_str))
            .flatten();
        let channel_ok = self.channels.iter().any(|wanted| {
            wanted == channel
                || named.is_some_and(|name| wanted.strip_prefix("custom:") == Some(name))
        });
        channel_ok
            && (self.namespaces.is_empty()
                || self.namespaces.iter().any(|prefix| {
                    is_under(namespace, prefix)
                        && self
                            .depth
                            .is_none_or(|depth| namespace.len() - prefix.len() <= depth)
                }))
    }
}

/// Whether `namespace` starts with `prefix`; a prefix segment without `:` names a node, whatever
/// its task.
fn is_under(namespace: &[String], prefix: &[String]) -> bool {
    prefix.len() <= namespace.len()
        && prefix.iter().zip(namespace).all(|(wanted, segment)| {
            wanted == segment
                || (!wanted.contains(':') && segment.split(':').next() == Some(wanted.as_str()))
        })
}

/// One event of the protocol as a stream sends it.
#[derive(Debug, Serialize)]
struct Envelope<'a> {
    r#type: &'static str,
    event_id: String,
    seq: i64,
    method: &'a str,
    params: Params,
}

#[derive(Debug, Serialize, Deserialize)]
struct Params {
    namespace: Vec<String>,
    timestamp: i64,
    data: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<String>,
}

/// An event as a protocol run's runner stored it.
#[derive(Debug, Deserialize)]
struct Stored {
    #[serde(flatten)]
    params: Params,
    event_id: Option<String>,
}

/// `POST /threads/{thread_id}/stream/events`.
pub async fn events(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let filter = Filter::parse(&body)?;
    let Ok(id) = Uuid::parse_str(&thread_id) else {
        return Err(ApiError::thread_not_found());
    };
    let slot = crate::stream::slot(&state, &caller)?;
    let asker = Asker {
        caller,
        uri,
        headers,
    };
    let events = respond(slot, move |sender| async move {
        // The answer's head goes at once, with a first comment: a thread may have nothing to
        // send yet, and a client waits for the head before it closes the stream this one
        // replaces.
        if sender
            .send(Event::default().comment("heartbeat"))
            .await
            .is_err()
        {
            return;
        }

        let numbering = Numbering {
            filter,
            seq: 0,
            out: Out::Sse(sender),
            state: state.clone(),
        };
        follow(numbering, &asker, ThreadId(id)).await;
    });
    let mut response = events.into_response();
    let answer_headers = response.headers_mut();
    answer_headers.insert(header::CACHE_CONTROL, "no-store".parse().expect("a header"));
    answer_headers.insert("x-accel-buffering", "no".parse().expect("a header"));
    Ok(response)
}

/// Waits until the thread is there for the caller: made, and theirs to read.
async fn appeared(
    state: &AppState,
    asker: &Asker,
    thread_id: ThreadId,
    out: &Out,
) -> Option<Thread> {
    let mut shutdown = state.shutdown_signal();
    let mut queued = state.listener().queued();
    loop {
        match thread::get(state.pool(), thread_id).await {
            Ok(thread) if asker.still_may(state, &thread).await.is_ok() => return Some(thread),
            Ok(_) | Err(QueueError::ThreadNotFound(_)) => {}
            Err(err) => {
                tracing::warn!(error = %err, "a thread stream could not read its thread");
                return None;
            }
        }
        tokio::select! {
            woken = queued.recv() => if matches!(woken, Err(RecvError::Closed)) { return None },
            () = tokio::time::sleep(RECHECK) => {}
            _ = shutdown.wait_for(|shutting_down| *shutting_down) => return None,
            () = out.closed() => return None,
        }
    }
}

/// Follows the thread `thread_id` names for `numbering`'s subscriber, from its first run.
///
/// A thread the client has named but that no run has made yet is waited for, as officially (the
/// SDK opens its streams around `run.start`). So is one the caller may not see: to a stranger,
/// another's thread looks like one not made yet.
pub(super) async fn follow(mut numbering: Numbering, asker: &Asker, thread_id: ThreadId) {
    let state = numbering.state.clone();
    let Some(thread) = appeared(&state, asker, thread_id, &numbering.out).await else {
        return;
    };
    follow_thread(&state, &thread, asker, &mut numbering).await;
}

/// Where a subscriber's events go.
pub(super) enum Out {
    /// An SSE answer's.
    Sse(mpsc::Sender<Event>),
    /// A socket's, shared by its subscriptions: each event goes once, the first time one of
    /// them admits it.
    Socket {
        sender: mpsc::Sender<String>,
        sent: Arc<Mutex<HashSet<i64>>>,
        /// The highest `seq` its subscriptions have numbered.
        through: Arc<AtomicI64>,
    },
}

impl Out {
    /// Sends a numbered event. `Err` when the subscriber is gone or stopped reading.
    async fn send(
        &self,
        state: &AppState,
        method: &str,
        envelope: &Envelope<'_>,
    ) -> Result<(), ()> {
        let data = serde_json::to_string(envelope).map_err(drop)?;
        match self {
            Out::Sse(sender) => {
                let sse = Event::default()
                    .event(method)
                    .id(envelope.seq.to_string())
                    .data(data);
                send(state, sender, sse).await.map_err(drop)
            }
            Out::Socket { sender, sent, .. } => {
                let first = sent.lock().expect("never poisoned").insert(envelope.seq);
                if !first {
                    return Ok(());
                }
                sender
                    .send_timeout(data, state.slow_client_timeout())
                    .await
                    .map_err(drop)
            }
        }
    }

    /// Resolves once the subscriber is gone.
    async fn closed(&self) {
        match self {
            Out::Sse(sender) => sender.closed().await,
            Out::Socket { sender, .. } => sender.closed().await,
        }
    }
}

/// A subscriber's numbering of the thread's events, and what it sends of them.
pub(super) struct Numbering {
    pub(super) filter: Filter,
    /// The `seq` of the last event numbered.
    pub(super) seq: i64,
    pub(super) out: Out,
    pub(super) state: AppState,
}

impl Numbering {
    /// Numbers one event and sends it if the subscriber asked for it. `Err` when the stream is
    /// over.
    async fn next(&mut self, method: &str, params: Params, event_id: String) -> Result<(), ()> {
        self.seq += 1;
        if let Out::Socket { through, .. } = &self.out {
            through.fetch_max(self.seq, Ordering::Relaxed);
        }
        if self.seq <= self.filter.since
            || !self.filter.admits(method, &params.namespace, &params.data)
        {
            return Ok(());
        }
        let envelope = Envelope {
            r#type: "event",
            event_id,
            seq: self.seq,
            method,
            params,
        };
        self.out.send(&self.state, method, &envelope).await
    }
}

async fn follow_thread(
    state: &AppState,
    thread: &Thread,
    asker: &Asker,
    numbering: &mut Numbering,
) {
    let mut shutdown = state.shutdown_signal();
    let mut queued = state.listener().queued();
    let mut after = 0;
    loop {
        let next = match event::next_on_thread(state.pool(), thread.thread_id, after).await {
            Ok(next) => next,
            Err(err) => {
                tracing::warn!(error = %err, "a thread stream could not read its runs");
                return;
            }
        };
        let Some(queued_run) = next else {
            tokio::select! {
                woken = queued.recv() => if matches!(woken, Err(RecvError::Closed)) { return },
                () = tokio::time::sleep(RECHECK) => {}
                _ = shutdown.wait_for(|shutting_down| *shutting_down) => return,
                () = numbering.out.closed() => return,
            }
            continue;
        };
        if asker.still_may(state, thread).await.is_err() {
            return;
        }
        if !queued_run.state_update
            && follow_run(state, thread, &queued_run, numbering)
                .await
                .is_err()
        {
            return;
        }
        after = queued_run.queue_seq;
    }
}

/// Numbers one run's events, its root lifecycle around them, until its end. `Err` when the
/// stream is over.
async fn follow_run(
    state: &AppState,
    thread: &Thread,
    queued: &QueuedRun,
    numbering: &mut Numbering,
) -> Result<(), ()> {
    let run = match run::get(state.pool(), thread.thread_id, queued.run_id).await {
        Ok(run) => run,
        // Rolled back: it never happened.
        Err(QueueError::RunNotFound(_)) => return Ok(()),
        Err(err) => {
            tracing::warn!(error = %err, "a thread stream could not read a run");
            return Err(());
        }
    };
    let protocol = run.config["configurable"][MARKER] == Value::Bool(true);
    let run_id = run.run_id.0;
    // When the run started, and when it ended: the same on every connection.
    let lifecycle =
        |status: &str, at: Option<chrono::DateTime<chrono::Utc>>, error: Option<String>| {
            let mut data = Map::new();
            data.insert("event".into(), status.into());
            data.insert("graph_name".into(), run.graph_id.clone().into());
            if let Some(error) = error {
                data.insert("error".into(), error.into());
            }
            let params = Params {
                namespace: Vec::new(),
                timestamp: at.unwrap_or(run.created_at).timestamp_millis(),
                data: Value::Object(data),
                node: None,
            };
            (params, format!("synth:{run_id}:lc||{status}"))
        };
    let mut follower =
        match EventFollower::start(state.pool().clone(), state.listener(), run.run_id, 0).await {
            Ok(follower) => follower,
            Err(QueueError::RunNotFound(_)) => return Ok(()),
            Err(err) => {
                tracing::warn!(error = %err, "a thread stream could not read a run's events");
                return Err(());
            }
        };
    let mut shutdown = state.shutdown_signal();
    let mut running = false;
    let mut interrupted = false;
    let mut error: Option<String> = None;
    loop {
        let next = tokio::select! {
            next = follower.next() => next,
            _ = shutdown.wait_for(|shutting_down| *shutting_down) => return Err(()),
            () = numbering.out.closed() => return Err(()),
        };
        let stored = match next {
            Ok(Some(stored)) => stored,
            Ok(None) => return Err(()),
            // Rolled back while followed: no end, as officially.
            Err(QueueError::RunNotFound(_)) => return Ok(()),
            Err(err) => {
                tracing::warn!(error = %err, "a thread stream could not read a run's events");
                return Err(());
            }
        };
        if !running {
            running = true;
            // The run as it started (the one read before its first event may be pending).
            let started = run::get(state.pool(), thread.thread_id, queued.run_id)
                .await
                .ok()
                .and_then(|run| run.started_at);
            let (params, event_id) = lifecycle("running", started, None);
            numbering.next("lifecycle", params, event_id).await?;
        }
        let method = stored.event.split('|').next().unwrap_or_default();
        match method {
            "end" => {
                let status = match stored.data["status"].as_str() {
                    Some("success") => "completed",
                    Some("interrupted") => "interrupted",
                    _ => "failed",
                };
                // A run that stopped for input ended when it said so (its status is `success`).
                if interrupted {
                    return Ok(());
                }
                let error = (status == "failed").then(|| error.take().unwrap_or_default());
                // The run as it ended (the one read before its end may be older).
                let ended = run::get(state.pool(), thread.thread_id, queued.run_id)
                    .await
                    .ok()
                    .and_then(|run| run.finished_at);
                let (params, event_id) = lifecycle(status, ended, error);
                return numbering.next("lifecycle", params, event_id).await;
            }
            "error" => {
                error = stored.data["message"].as_str().map(str::to_owned);
            }
            _ if protocol => {
                let Ok(Stored { params, event_id }) = serde_json::from_value::<Stored>(stored.data)
                else {
                    continue;
                };
                if method == "lifecycle"
                    && params.namespace.is_empty()
                    && params.data["event"] == "interrupted"
                {
                    interrupted = true;
                }
                let event_id =
                    event_id.unwrap_or_else(|| format!("{}-{}", queued.queue_seq, stored.seq));
                numbering.next(method, params, event_id).await?;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn filter(body: Value) -> Filter {
        Filter::parse(body.to_string().as_bytes()).expect("a filter")
    }

    #[test]
    fn a_namespace_prefix_without_a_task_names_the_node_whatever_its_task() {
        let child = vec!["child:1f2e".to_owned()];
        let wanted = filter(json!({"channels": ["values"], "namespaces": [["child"]]}));
        assert!(wanted.admits("values", &child, &Value::Null));
        let other = filter(json!({"channels": ["values"], "namespaces": [["child:nope"]]}));
        assert!(!other.admits("values", &child, &Value::Null));
        let root_only = filter(json!({"channels": ["values"], "namespaces": [[]], "depth": 0}));
        assert!(root_only.admits("values", &[], &Value::Null));
        assert!(!root_only.admits("values", &child, &Value::Null));
    }

    #[test]
    fn interrupts_are_the_input_channel_and_custom_events_match_their_name() {
        let wanted = filter(json!({"channels": ["input", "custom:progress"]}));
        assert!(wanted.admits("input.requested", &[], &Value::Null));
        assert!(wanted.admits("custom", &[], &json!({"name": "progress"})));
        assert!(!wanted.admits("custom", &[], &json!({"name": "other"})));
        assert!(!wanted.admits("values", &[], &Value::Null));
    }

    #[test]
    fn a_filter_refuses_what_the_official_server_refuses_and_reads_the_rest_leniently() {
        for body in [
            json!({}),
            json!({"channels": []}),
            json!({"channels": "values"}),
        ] {
            let refused = Filter::parse(body.to_string().as_bytes()).expect_err("refused");
            assert_eq!(
                refused.detail,
                "channels is required and must be a non-empty array"
            );
        }
        let refused =
            Filter::parse(br#"{"channels": ["debug", 3, "custom:", null]}"#).expect_err("refused");
        assert_eq!(
            refused.detail,
            "channels contains unsupported entries: debug, 3, custom:, None. Allowed: values, \
             updates, messages, tools, custom, lifecycle, input, tasks, or any `custom:<name>`."
        );
        let lenient = filter(
            json!({"channels": ["values"], "namespaces": "bad", "depth": true, "since": true}),
        );
        assert_eq!(
            lenient,
            Filter {
                channels: vec!["values".into()],
                namespaces: Vec::new(),
                depth: None,
                since: 0
            }
        );
    }
}
