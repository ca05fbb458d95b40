//! The runner's checkpointer and store, answered by the worker: each call executed with the run's
//! [`Saver`] (fenced by its lease), the writes it casts ([`write_of`]) held to be written with the
//! checkpoint that follows them.

use std::num::NonZeroU32;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use mostrador_queue::run::RunSpec;
use mostrador_queue::state::saver::{
    Blob, NewCheckpoint, Payload, PendingWrite, SavedCheckpoint, Saver, Write,
};
use mostrador_queue::{ClaimedRun, Error as QueueError, ThreadId};
use serde_json::{Value, json};

use super::protocol::{
    self, BlobJson, Call, Cast, Latest, PutCheckpoint, PutWrites, SavedJson, SavedWriteJson,
    ToRunner,
};

/// The run as its runner executes it, with the thread's latest checkpoint (which LangGraph reads
/// first) when it could be read, to spare the runner asking for it. `max_concurrency`: the
/// operator's bound on a superstep's tasks at once (a run may ask for fewer, never more).
pub async fn run_spec(
    saver: &Saver,
    claimed: &ClaimedRun,
    RunSpec {
        input,
        command,
        mut config,
    }: RunSpec,
    max_concurrency: Option<usize>,
) -> protocol::RunSpec {
    let bound = max_concurrency
        .and_then(|n| u32::try_from(n).ok())
        .and_then(NonZeroU32::new);
    if let Some(bound) = bound {
        config.max_concurrency = Some(
            config
                .max_concurrency
                .map_or(bound, |asked| asked.min(bound)),
        );
    }
    let latest = saver.get("", None).await.ok().map(|latest| Latest {
        checkpoint: latest.map(saved_json),
    });
    protocol::RunSpec {
        run_id: claimed.run_id().0,
        thread_id: claimed.thread_id.0,
        graph_id: claimed.graph_id.clone(),
        assistant_id: claimed.metadata["assistant_id"]
            .as_str()
            .unwrap_or(&claimed.graph_id)
            .to_owned(),
        attempt: claimed.attempt(),
        input: input.unwrap_or(Value::Null),
        command,
        metadata: claimed.metadata.clone(),
        stream_mode: claimed.stream_mode.clone(),
        stream_subgraphs: config.stream_subgraphs,
        interrupt_before: config.interrupt_before.clone(),
        interrupt_after: config.interrupt_after.clone(),
        durability: config.durability,
        checkpoint_id: config.checkpoint_id,
        context: config.context.clone(),
        config: config.to_value(),
        latest,
    }
}

/// Executes one call of the runner's checkpointer or store, after the writes it cast before
/// (`held`, written in the same transaction as a checkpoint, before a read); the reply to send
/// back.
///
/// # Errors
///
/// [`QueueError::LeaseLost`]: the run is no longer this worker's; a transient failure of the
/// database ([`QueueError::is_transient`]), for which the run waits rather than fail.
pub async fn call(
    saver: &Saver,
    mut held: Vec<Write>,
    id: u64,
    call: Call,
) -> Result<ToRunner, QueueError> {
    let result = async {
        match call {
            Call::Get { ns, checkpoint_id } => {
                saver.write(&held).await?;
                let found = saver.get(&ns, checkpoint_id).await?;
                Ok(json!(found.map(saved_json)))
            }
            Call::List { ns, before, limit } => {
                saver.write(&held).await?;
                let listed = saver.list(&ns, before, limit.clamp(1, 10_000)).await?;
                Ok(json!(
                    listed.into_iter().map(saved_json).collect::<Vec<_>>()
                ))
            }
            Call::Put(put) => {
                held.push(checkpoint_of(put)?);
                saver.write(&held).await?;
                Ok(Value::Null)
            }
            Call::Store { ops } => {
                crate::store::batch(saver.pool(), ThreadId(saver.thread_id()), &ops).await
            }
            other => Err(QueueError::Invalid {
                field: "op",
                reason: format!("{other:?} is not the checkpointer's"),
            }),
        }
    }
    .await;
    let (result, error) = match result {
        Ok(result) => (result, None),
        Err(err @ QueueError::LeaseLost { .. }) => return Err(err),
        Err(err) if err.is_transient() => return Err(err),
        Err(QueueError::Invalid { reason, .. }) => (Value::Null, Some(reason)),
        Err(err) => (Value::Null, Some(err.to_string())),
    };
    Ok(ToRunner::Reply { id, result, error })
}

/// The write a `put` or `put_writes` cast asks for; `None` for another cast.
///
/// # Errors
///
/// [`QueueError::Invalid`]: a value is not base64.
pub fn write_of(cast: Cast) -> Result<Option<Write>, QueueError> {
    match cast {
        Cast::Put(put) => checkpoint_of(put).map(Some),
        Cast::PutWrites(writes) => writes_of(writes).map(Some),
        _ => Ok(None),
    }
}

fn checkpoint_of(put: PutCheckpoint) -> Result<Write, QueueError> {
    let blobs = put
        .blobs
        .into_iter()
        .map(|blob| {
            Ok(Blob {
                payload: payload(blob.kind, &blob.bytes)?,
                channel: blob.channel,
                version: blob.version,
            })
        })
        .collect::<Result<Vec<_>, QueueError>>()?;
    Ok(Write::Checkpoint(NewCheckpoint {
        checkpoint_ns: put.ns,
        checkpoint_id: put.checkpoint_id,
        parent_checkpoint_id: put.parent_checkpoint_id,
        saved: put.saved,
        metadata: put.metadata,
        blobs,
    }))
}

fn writes_of(put: PutWrites) -> Result<Write, QueueError> {
    let writes = put
        .writes
        .into_iter()
        .map(|write| {
            Ok(PendingWrite {
                payload: payload(write.kind, &write.bytes)?,
                task_id: write.task_id,
                task_path: write.task_path,
                idx: write.idx,
                channel: write.channel,
            })
        })
        .collect::<Result<Vec<_>, QueueError>>()?;
    Ok(Write::TaskWrites {
        checkpoint_ns: put.ns,
        checkpoint_id: put.checkpoint_id,
        writes,
    })
}

fn saved_json(found: SavedCheckpoint) -> SavedJson {
    SavedJson {
        ns: found.checkpoint_ns,
        checkpoint_id: found.checkpoint_id,
        parent_checkpoint_id: found.parent_checkpoint_id,
        saved: found.saved,
        metadata: found.metadata,
        blobs: found
            .blobs
            .into_iter()
            .map(|blob| BlobJson {
                channel: blob.channel,
                version: blob.version,
                bytes: BASE64.encode(&blob.payload.bytes),
                kind: blob.payload.kind,
            })
            .collect(),
        writes: found
            .writes
            .into_iter()
            .map(|write| SavedWriteJson {
                task_id: write.task_id,
                channel: write.channel,
                bytes: BASE64.encode(&write.payload.bytes),
                kind: write.payload.kind,
            })
            .collect(),
    }
}

fn payload(kind: String, bytes: &str) -> Result<Payload, QueueError> {
    let bytes = BASE64.decode(bytes).map_err(|err| QueueError::Invalid {
        field: "bytes",
        reason: err.to_string(),
    })?;
    Ok(Payload { kind, bytes })
}
