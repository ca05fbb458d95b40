//! `GET /threads/{thread_id}/stream`: the events of a thread's runs, one run after another in
//! queue order, for as long as the client listens (the stream does not end by itself).
//!
//! Each event's id is `<run's place in the queue>-<event's seq>`, in the form of the official
//! server's ids, so `Last-Event-ID` resumes across runs. Without it the stream starts now: the
//! run in flight from its next event, then the runs queued after it.

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use mostrador_queue::run::event::{self, EventFollower, QueuedRun};
use mostrador_queue::{Error as QueueError, Thread, run};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::{Accumulated, Messages, error_event, respond, send};
use crate::app::AppState;
use crate::auth::Caller;
use crate::authorize::visible_thread;
use crate::custom_auth::RequestFacts;
use crate::error::ApiError;

/// How often a thread stream with nothing to follow looks for new runs anyway: the wake-up of an
/// enqueue may be missed (a delayed run sends none).
const RECHECK: Duration = Duration::from_secs(2);

/// Which of a thread's events a client asked for (`stream_modes`, comma-separated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Modes {
    /// `run_modes` (the default): every event of the runs, each run's `metadata` first and a
    /// `metadata` `run_done` last.
    runs: bool,
    /// `lifecycle`: only the runs' `metadata` events.
    lifecycle: bool,
    /// `state_update`: the thread's state after each update of it.
    state_update: bool,
}

impl Modes {
    fn parse(query: &[(String, String)]) -> Result<Self, ApiError> {
        let names: Vec<&str> = query
            .iter()
            .filter(|(key, _)| key == "stream_modes")
            .flat_map(|(_, value)| value.split(','))
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .collect();
        if names.is_empty() {
            return Ok(Self {
                runs: true,
                lifecycle: false,
                state_update: false,
            });
        }
        if let Some(unknown) = names
            .iter()
            .find(|name| !matches!(**name, "run_modes" | "lifecycle" | "state_update"))
        {
            return Err(ApiError::unprocessable(format!(
                "Invalid stream mode: {unknown}"
            )));
        }
        Ok(Self {
            runs: names.contains(&"run_modes"),
            lifecycle: names.contains(&"lifecycle"),
            state_update: names.contains(&"state_update"),
        })
    }

    fn metadata(self) -> bool {
        self.runs || self.lifecycle
    }
}

/// Where the stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// No `Last-Event-ID`: from what happens next.
    Now,
    /// After event `seq` of the run at `queue_seq` (`seq` 0: after that run's `metadata`).
    After { queue_seq: i64, seq: i64 },
}

impl Start {
    /// `Last-Event-ID` as the official server takes it: `-` (from the start), `<a>`, `<a>-<b>` or
    /// `<a>-*` (after all of `a`).
    fn parse(headers: &HeaderMap) -> Result<Self, ApiError> {
        let Some(value) = headers.get("last-event-id") else {
            return Ok(Self::Now);
        };
        let invalid = || {
            ApiError::unprocessable(
                "Invalid last-event-id: must be an event id of this thread's stream",
            )
        };
        let value = value.to_str().map_err(|_| invalid())?.trim();
        if value.is_empty() {
            return Ok(Self::Now);
        }
        if value == "-" {
            return Ok(Self::After {
                queue_seq: 0,
                seq: 0,
            });
        }
        let number = |text: &str| {
            (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
                .then(|| text.parse::<i64>().ok())
                .flatten()
                .ok_or_else(invalid)
        };
        let (queue_seq, seq) = match value.split_once('-') {
            None => (number(value)?, 0),
            Some((queue_seq, "*")) => (number(queue_seq)?, i64::MAX),
            Some((queue_seq, seq)) => (number(queue_seq)?, number(seq)?),
        };
        Ok(Self::After { queue_seq, seq })
    }
}

/// `GET /threads/{thread_id}/stream`.
pub async fn join(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let modes = Modes::parse(&query)?;
    let start = Start::parse(&headers)?;
    let thread = visible_thread(&state, &caller, &thread_id).await?;
    let slot = crate::stream::slot(&state, &caller)?;
    let events = respond(slot, move |sender| async move {
        let asker = Asker {
            caller,
            uri,
            headers,
        };
        follow_thread(&state, &thread, &asker, modes, start, &sender).await;
    });
    Ok(events.into_response())
}

/// Who opened a thread's stream, and the headers they opened it with: before each run it
/// follows, the stream asks again whether they still may (a key revoked, a token expired, the
/// thread no longer visible to them end it).
pub(super) struct Asker {
    pub(super) caller: Caller,
    pub(super) uri: axum::http::Uri,
    pub(super) headers: HeaderMap,
}

impl Asker {
    pub(super) async fn still_may(
        &self,
        state: &AppState,
        thread: &Thread,
    ) -> Result<(), ApiError> {
        let request = RequestFacts {
            method: "GET",
            path: self.uri.path(),
            query: self.uri.query().unwrap_or_default(),
            headers: &self.headers,
        };
        let again = Caller::of(&request, state).await?;
        if again.subject != self.caller.subject {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "the credential names someone else now",
            ));
        }
        visible_thread(state, &again, &thread.thread_id.0.to_string())
            .await
            .map(drop)
    }
}

/// What became of following one run.
enum Followed {
    /// Its end was sent (or it was rolled back): on to the next run.
    Over,
    /// The stream is over (the client went away, stopped reading, or the process shuts down).
    Stop,
}

async fn follow_thread(
    state: &AppState,
    thread: &Thread,
    asker: &Asker,
    modes: Modes,
    start: Start,
    sender: &mpsc::Sender<Event>,
) {
    let mut shutdown = state.shutdown_signal();
    // Subscribed before the first look, so no enqueue between a look and the wait is missed.
    let mut queued = state.listener().queued();
    // The runs up to `after` are followed; `within` is where to resume the one after it.
    let (mut after, mut within) = match start {
        Start::After { queue_seq, seq } => (queue_seq - 1, Some((queue_seq, seq))),
        Start::Now => match event::now_on_thread(state.pool(), thread.thread_id).await {
            // A run that has sent events: from its next one.
            Ok(Ok(run)) if run.event_seq > 0 => {
                (run.queue_seq - 1, Some((run.queue_seq, run.event_seq)))
            }
            // A run yet to start: whole, its `metadata` first.
            Ok(Ok(run)) => (run.queue_seq - 1, None),
            Ok(Err(last)) => (last, None),
            Err(err) => {
                let _ = sender.send(error_event(&err)).await;
                return;
            }
        },
    };
    loop {
        let next = match event::next_on_thread(state.pool(), thread.thread_id, after).await {
            Ok(next) => next,
            Err(err) => {
                let _ = sender.send(error_event(&err)).await;
                return;
            }
        };
        let Some(run) = next else {
            tokio::select! {
                woken = queued.recv() => if matches!(woken, Err(RecvError::Closed)) { return },
                () = tokio::time::sleep(RECHECK) => {}
                _ = shutdown.wait_for(|shutting_down| *shutting_down) => return,
                () = sender.closed() => return,
            }
            continue;
        };
        if let Err(refused) = asker.still_may(state, thread).await {
            tracing::info!(thread_id = %thread.thread_id.0, detail = refused.detail, "thread stream ended: its caller may no longer follow it");
            let _ =
                sender
                    .send(Event::default().event("error").data(
                        json!({"error": "Unauthorized", "message": refused.detail}).to_string(),
                    ))
                    .await;
            return;
        }
        let from = within
            .take()
            .and_then(|(queue_seq, seq)| (queue_seq == run.queue_seq).then_some(seq));
        match follow_run(state, thread, &run, from, modes, sender).await {
            Followed::Over => after = run.queue_seq,
            Followed::Stop => return,
        }
    }
}

/// Sends one run's events after `from` (all, its `metadata` first, for `None`) until its end.
async fn follow_run(
    state: &AppState,
    thread: &Thread,
    queued: &QueuedRun,
    from: Option<i64>,
    modes: Modes,
    sender: &mpsc::Sender<Event>,
) -> Followed {
    let id = |seq: i64| format!("{}-{seq}", queued.queue_seq);
    let sent = |sse: Event| async move {
        match send(state, sender, sse).await {
            Ok(()) => None,
            Err(_) => Some(Followed::Stop),
        }
    };
    let run = match run::get(state.pool(), thread.thread_id, queued.run_id).await {
        Ok(run) => run,
        // Rolled back: it never happened.
        Err(QueueError::RunNotFound(_)) => return Followed::Over,
        Err(err) => {
            let _ = sender.send(error_event(&err)).await;
            return Followed::Stop;
        }
    };
    let run_id = run.run_id.0;
    if from.is_none() && !queued.state_update && modes.metadata() {
        let metadata = json!({"run_id": run_id, "attempt": run.attempt.max(1)});
        let sse = Event::default()
            .event("metadata")
            .id(id(0))
            .data(metadata.to_string());
        if let Some(stop) = sent(sse).await {
            return stop;
        }
    }
    let after_seq = from.unwrap_or(0);
    // Partial messages accumulate every chunk of a message: read from the start, send what
    // follows `after_seq`.
    let mut partial = (Messages::asked(run.stream_mode.iter().map(String::as_str))
        == Messages::Partial)
        .then(Accumulated::default);
    let read_from = if partial.is_some() { 0 } else { after_seq };
    let mut follower = match EventFollower::start(
        state.pool().clone(),
        state.listener(),
        run.run_id,
        read_from,
    )
    .await
    {
        Ok(follower) => follower,
        Err(QueueError::RunNotFound(_)) => return Followed::Over,
        Err(err) => {
            let _ = sender.send(error_event(&err)).await;
            return Followed::Stop;
        }
    };
    let mut shutdown = state.shutdown_signal();
    // The checkpoint a state update wrote.
    let mut updated: Option<Uuid> = None;
    loop {
        let next = tokio::select! {
            next = follower.next() => next,
            _ = shutdown.wait_for(|shutting_down| *shutting_down) => return Followed::Stop,
            () = sender.closed() => return Followed::Stop,
        };
        let event = match next {
            Ok(Some(event)) => event,
            Ok(None) => return Followed::Stop,
            Err(QueueError::RunNotFound(_)) => return Followed::Over,
            Err(err) => {
                let _ = sender.send(error_event(&err)).await;
                return Followed::Stop;
            }
        };
        let replayed = event.seq <= after_seq;
        let sses: Vec<(String, Value)> = match event.event.as_str() {
            "update_state" => {
                updated = event.data["checkpoint_id"]
                    .as_str()
                    .and_then(|id| Uuid::parse_str(id).ok());
                Vec::new()
            }
            "end" if queued.state_update => {
                match updated.filter(|_| modes.state_update && !replayed) {
                    Some(checkpoint_id) => {
                        match crate::state::state_json(state, thread, Some(checkpoint_id), false)
                            .await
                        {
                            Ok(updated) => vec![(
                                "state_update".into(),
                                json!({"state": updated, "thread_id": thread.thread_id.0}),
                            )],
                            Err(err) => {
                                tracing::warn!(error = ?err, "reading an updated state failed");
                                Vec::new()
                            }
                        }
                    }
                    None => Vec::new(),
                }
            }
            "end" if modes.metadata() => vec![(
                "metadata".into(),
                json!({"status": "run_done", "run_id": run_id}),
            )],
            // The queue's own bookkeeping, and a state update's workings.
            "end" | "drained" => Vec::new(),
            _ if queued.state_update || !modes.runs => Vec::new(),
            "messages" => match &mut partial {
                Some(accumulated) => accumulated.fold(&event.data),
                None => vec![(event.event.clone(), event.data.clone())],
            },
            _ => vec![(event.event.clone(), event.data.clone())],
        };
        if !replayed {
            for (name, data) in sses {
                let sse = Event::default()
                    .event(name)
                    .id(id(event.seq))
                    .data(data.to_string());
                if let Some(stop) = sent(sse).await {
                    return stop;
                }
            }
        }
        if event.event == "end" {
            return Followed::Over;
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderMap;

    use super::{Modes, Start};

    fn start(id: &str) -> Result<Start, u16> {
        let mut headers = HeaderMap::new();
        headers.insert("last-event-id", id.parse().expect("a header value"));
        Start::parse(&headers).map_err(|err| err.status.as_u16())
    }

    #[test]
    fn last_event_ids_are_read_as_the_official_server_reads_them() {
        assert_eq!(
            Start::parse(&HeaderMap::new()).expect("no header"),
            Start::Now
        );
        assert_eq!(
            start("-"),
            Ok(Start::After {
                queue_seq: 0,
                seq: 0
            })
        );
        assert_eq!(
            start("12-3"),
            Ok(Start::After {
                queue_seq: 12,
                seq: 3
            })
        );
        assert_eq!(
            start("12"),
            Ok(Start::After {
                queue_seq: 12,
                seq: 0
            })
        );
        assert_eq!(
            start("12-*"),
            Ok(Start::After {
                queue_seq: 12,
                seq: i64::MAX
            })
        );
        for bad in ["-1", "a-1", "1-", "1-b", "1--2"] {
            assert_eq!(start(bad), Err(422), "{bad}");
        }
    }

    #[test]
    fn stream_modes_default_to_the_runs_and_refuse_unknown_names() {
        let query = |value: &str| vec![("stream_modes".to_owned(), value.to_owned())];
        assert_eq!(
            Modes::parse(&[]).expect("the default"),
            Modes {
                runs: true,
                lifecycle: false,
                state_update: false
            }
        );
        assert_eq!(
            Modes::parse(&query("lifecycle,state_update")).expect("two modes"),
            Modes {
                runs: false,
                lifecycle: true,
                state_update: true
            }
        );
        assert_eq!(
            Modes::parse(&query("values"))
                .expect_err("not a thread mode")
                .status
                .as_u16(),
            422
        );
    }
}
