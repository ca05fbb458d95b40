//! The protocol's WebSocket (`GET /threads/{thread_id}/stream/events`, upgraded): commands in,
//! their answers and the thread's events out, on one socket, each event sent once however many
//! of the socket's subscriptions admit it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use mostrador_queue::ThreadId;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::commands::{self, Answer, Commands, Done};
use super::events::{Filter, Numbering, Out, follow};
use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::RunHeaders;
use crate::stream::STREAM_BUFFER;
use crate::stream::thread::Asker;

/// `GET /threads/{thread_id}/stream/events`: the WebSocket, for whoever the handshake's
/// credentials name.
pub async fn socket(
    upgrade: WebSocketUpgrade,
    State(state): State<AppState>,
    caller: Caller,
    run_headers: RunHeaders,
    Path(thread_id): Path<String>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Ok(id) = Uuid::parse_str(&thread_id) else {
        return Err(ApiError::thread_not_found());
    };
    let slot = crate::stream::slot(&state, &caller)?;
    let asker = Arc::new(Asker {
        caller: caller.clone(),
        uri,
        headers,
    });
    let commands = Commands {
        state,
        caller,
        run_headers,
        thread_id,
    };
    Ok(upgrade.on_upgrade(move |socket| async move {
        session(socket, commands, asker, ThreadId(id)).await;
        drop(slot);
    }))
}

/// One socket's life: its commands answered in order, its subscriptions followed until it
/// closes.
async fn session(socket: WebSocket, commands: Commands, asker: Arc<Asker>, thread_id: ThreadId) {
    let (mut to_client, mut from_client) = socket.split();
    let (sender, mut outgoing) = mpsc::channel::<String>(STREAM_BUFFER);
    let writer = tokio::spawn(async move {
        while let Some(text) = outgoing.recv().await {
            if to_client.send(Message::Text(text.into())).await.is_err() {
                break;
            }
        }
    });
    let sent = Arc::new(Mutex::new(HashSet::new()));
    let through = Arc::new(AtomicI64::new(0));
    let mut subscriptions: HashMap<Uuid, JoinHandle<()>> = HashMap::new();
    let mut shutdown = commands.state.shutdown_signal();
    loop {
        let message = tokio::select! {
            message = from_client.next() => message,
            _ = shutdown.wait_for(|shutting_down| *shutting_down) => break,
            () = sender.closed() => break,
        };
        let text = match message {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Close(_)) | Err(_)) | None => break,
            Some(Ok(_)) => continue,
        };
        let answer = match serde_json::from_str::<Value>(text.as_str()) {
            Err(_) => Answer::error(
                Value::Null,
                "invalid_argument",
                "Protocol commands must be valid JSON.",
            ),
            Ok(command) => match commands::read(&command) {
                Err(malformed) => malformed,
                Ok((id, method, params)) => match method.as_str() {
                    "subscription.subscribe" | "subscription.reconnect" => {
                        match commands::subscription(&method, id.clone(), &params) {
                            Err(refused) => refused,
                            Ok(()) => {
                                let subscription_id = Uuid::new_v4();
                                let numbering = Numbering {
                                    filter: Filter::lenient(&params),
                                    seq: 0,
                                    out: Out::Socket {
                                        sender: sender.clone(),
                                        sent: Arc::clone(&sent),
                                        through: Arc::clone(&through),
                                    },
                                    state: commands.state.clone(),
                                };
                                let asker = Arc::clone(&asker);
                                let follower = tokio::spawn(async move {
                                    follow(numbering, &asker, thread_id).await;
                                });
                                subscriptions.insert(subscription_id, follower);
                                Answer::success(
                                    id,
                                    Done::Subscribed {
                                        subscription_id,
                                        replayed_events: 0,
                                    },
                                )
                            }
                        }
                    }
                    "subscription.unsubscribe" => {
                        let gone = params
                            .get("subscription_id")
                            .and_then(Value::as_str)
                            .and_then(|named| Uuid::parse_str(named).ok())
                            .and_then(|named| subscriptions.remove(&named));
                        let known = gone.inspect(JoinHandle::abort).is_some();
                        commands::unsubscribed(id, &params, known)
                    }
                    "agent.getTree" => commands::no_session(id),
                    _ => commands.run(id, &method, params).await,
                },
            },
        };
        let answer = answer.applied_through(through.load(Ordering::Relaxed));
        let Ok(text) = serde_json::to_string(&answer) else {
            break;
        };
        if sender.send(text).await.is_err() {
            break;
        }
    }
    for follower in subscriptions.into_values() {
        follower.abort();
    }
    drop(sender);
    let _ = writer.await;
}
