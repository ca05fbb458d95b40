//! The runner's checkpointer and store, answered by the worker: each call executed with the run's
//! [`Saver`] (fenced by its lease), the writes it casts ([`write_of`]) held to be written with the
//! checkpoint that follows them, and the described states ([`described_of`]) for the api.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use mostrador_queue::saver::{
    Blob, Described, NewCheckpoint, Payload, PendingWrite, SavedCheckpoint, Saver, Write,
};
use mostrador_queue::{ClaimedRun, Error as QueueError, ThreadId};
use serde_json::{Value, json};
use uuid::Uuid;

/// The message that starts a run in its runner, with the thread's latest checkpoint (which LangGraph
/// reads first) when it could be read, to spare the runner asking for it.
/// `max_concurrency`: the operator's bound on a superstep's tasks at once (a run may ask for
/// fewer, never more).
pub async fn start_message(
    saver: &Saver,
    claimed: &ClaimedRun,
    max_concurrency: Option<usize>,
) -> Value {
    let mut spec = run_spec(claimed);
    if let Some(bound) = max_concurrency {
        let asked = claimed.config["max_concurrency"].as_u64();
        let allowed = asked.map_or(bound, |n| usize::try_from(n).unwrap_or(bound).min(bound));
        spec["config"]["max_concurrency"] = json!(allowed);
    }
    if let Ok(latest) = saver.get("", None).await {
        spec["latest"] = latest.map_or(Value::Null, saved_json);
    }
    json!({"t": "start", "spec": spec})
}

/// The run as the runner reads it.
fn run_spec(claimed: &ClaimedRun) -> Value {
    let config = &claimed.config;
    json!({
        "run_id": claimed.run_id().0,
        "thread_id": claimed.thread_id.0,
        "graph_id": claimed.graph_id,
        "assistant_id": claimed.metadata.get("assistant_id").cloned().unwrap_or(json!(claimed.graph_id)),
        "attempt": claimed.attempt(),
        "input": claimed.input,
        "command": claimed.command,
        "config": config,
        "metadata": claimed.metadata,
        "stream_mode": claimed.stream_mode,
        "stream_subgraphs": config.get("stream_subgraphs").and_then(Value::as_bool).unwrap_or(false),
        "interrupt_before": config.get("interrupt_before"),
        "interrupt_after": config.get("interrupt_after"),
        "durability": config.get("durability"),
        "checkpoint_id": config.get("checkpoint_id"),
        "context": config.get("context"),
    })
}

/// Executes one call of the runner's checkpointer, after the writes it cast before (`held`,
/// written in the same transaction as a checkpoint, before a read); the reply to send back.
///
/// # Errors
///
/// [`QueueError::LeaseLost`]: the run is no longer this worker's.
pub async fn call(
    saver: &Saver,
    mut held: Vec<Write>,
    message: &Value,
) -> Result<Value, QueueError> {
    let id = &message["id"];
    let ns = message["ns"].as_str().unwrap_or_default();
    let result = async {
        match message["op"].as_str() {
            Some("get") => {
                saver.write(&held).await?;
                let checkpoint_id = uuid_field(&message["checkpoint_id"]);
                let found = saver.get(ns, checkpoint_id).await?;
                Ok(found.map_or(Value::Null, saved_json))
            }
            Some("list") => {
                saver.write(&held).await?;
                let limit = message["limit"].as_i64().unwrap_or(1000).clamp(1, 10_000);
                let listed = saver
                    .list(ns, uuid_field(&message["before"]), limit)
                    .await?;
                Ok(Value::Array(listed.into_iter().map(saved_json).collect()))
            }
            Some("put") => {
                held.push(write_of(message)?);
                saver.write(&held).await?;
                Ok(Value::Null)
            }
            Some("store") => {
                crate::store::batch(saver.pool(), ThreadId(saver.thread_id()), &message["ops"])
                    .await
            }
            other => Err(QueueError::Invalid {
                field: "op",
                reason: format!("the runner asked for {other:?}"),
            }),
        }
    }
    .await;
    match result {
        Ok(result) => Ok(json!({"t": "reply", "id": id, "result": result})),
        Err(err @ QueueError::LeaseLost { .. }) => Err(err),
        Err(QueueError::Invalid { reason, .. }) => {
            Ok(json!({"t": "reply", "id": id, "error": reason}))
        }
        Err(err) => Ok(json!({"t": "reply", "id": id, "error": err.to_string()})),
    }
}

/// The write a `put` or `put_writes` message asks for.
///
/// # Errors
///
/// [`QueueError::Invalid`]: the message is not one.
pub fn write_of(message: &Value) -> Result<Write, QueueError> {
    let checkpoint_ns = text(&message["ns"]);
    let checkpoint_id = required_uuid(&message["checkpoint_id"], "checkpoint_id")?;
    match message["op"].as_str() {
        Some("put") => {
            let blobs = message["blobs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|blob| {
                    Ok(Blob {
                        channel: text(&blob["channel"]),
                        version: blob["version"]
                            .as_i64()
                            .ok_or_else(|| QueueError::Invalid {
                                field: "version",
                                reason: format!(
                                    "channel versions are integers here, not {}",
                                    blob["version"]
                                ),
                            })?,
                        payload: payload(blob)?,
                    })
                })
                .collect::<Result<Vec<_>, QueueError>>()?;
            Ok(Write::Checkpoint(NewCheckpoint {
                checkpoint_ns,
                checkpoint_id,
                parent_checkpoint_id: uuid_field(&message["parent_checkpoint_id"]),
                saved: message["saved"].clone(),
                metadata: message["metadata"].clone(),
                blobs,
            }))
        }
        Some("put_writes") => {
            let writes = message["writes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|write| {
                    Ok(PendingWrite {
                        task_id: text(&write["task_id"]),
                        task_path: text(&write["task_path"]),
                        idx: write["idx"]
                            .as_i64()
                            .and_then(|idx| i32::try_from(idx).ok())
                            .unwrap_or_default(),
                        channel: text(&write["channel"]),
                        payload: payload(write)?,
                    })
                })
                .collect::<Result<Vec<_>, QueueError>>()?;
            Ok(Write::TaskWrites {
                checkpoint_ns,
                checkpoint_id,
                writes,
            })
        }
        other => Err(QueueError::Invalid {
            field: "op",
            reason: format!("{other:?} is not a write"),
        }),
    }
}

/// The state a `describe` cast carries.
///
/// # Errors
///
/// [`QueueError::Invalid`]: it names no checkpoint.
pub fn described_of(message: &Value) -> Result<Described, QueueError> {
    Ok(Described {
        checkpoint_id: required_uuid(&message["checkpoint_id"], "checkpoint_id")?,
        snapshot: message["snapshot"].clone(),
    })
}

fn saved_json(found: SavedCheckpoint) -> Value {
    let payload_json = |payload: &Payload| (payload.kind.clone(), BASE64.encode(&payload.bytes));
    json!({
        "ns": found.checkpoint_ns,
        "checkpoint_id": found.checkpoint_id,
        "parent_checkpoint_id": found.parent_checkpoint_id,
        "saved": found.saved,
        "metadata": found.metadata,
        "blobs": found.blobs.iter().map(|blob| {
            let (kind, bytes) = payload_json(&blob.payload);
            json!({"channel": blob.channel, "version": blob.version, "type": kind, "bytes": bytes})
        }).collect::<Vec<_>>(),
        "writes": found.writes.iter().map(|write| {
            let (kind, bytes) = payload_json(&write.payload);
            json!({"task_id": write.task_id, "channel": write.channel, "type": kind, "bytes": bytes})
        }).collect::<Vec<_>>(),
    })
}

fn payload(value: &Value) -> Result<Payload, QueueError> {
    let bytes = BASE64
        .decode(value["bytes"].as_str().unwrap_or_default())
        .map_err(|err| QueueError::Invalid {
            field: "bytes",
            reason: err.to_string(),
        })?;
    Ok(Payload {
        kind: text(&value["type"]),
        bytes,
    })
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn uuid_field(value: &Value) -> Option<Uuid> {
    value.as_str().and_then(|s| Uuid::parse_str(s).ok())
}

fn required_uuid(value: &Value, field: &'static str) -> Result<Uuid, QueueError> {
    uuid_field(value).ok_or_else(|| QueueError::Invalid {
        field,
        reason: format!("{value} is not a checkpoint id"),
    })
}
