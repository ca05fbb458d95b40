//! The runner processes of Python graphs (`python/mostrador_runner.py`, embedded in the binary):
//! LangGraph's own engine, one run at a time per process, and the protocol spoken with them.
//!
//! The worker keeps everything around the engine: the claim, the lease, events, drain, cancel and
//! every database write. The runner's checkpointer asks the worker over a pipe, and the worker
//! executes each request with [`Saver`] ([`call`]; the writes it casts without waiting for an
//! answer are [`write_of`] them), fenced by the run's lease.
//!
//! A process is the unit of isolation. An exception in user code ends its run `error` (as on the
//! official server); a process that dies (a segfault, memory exhaustion, a kill) fails its run
//! retryably, so the next attempt resumes from the last checkpoint, and the other runs, each in
//! a process of its own, never notice. A cancel that the runner does not honour within
//! [`CANCEL_GRACE`] (a node blocked in C code) kills its process.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use mostrador_queue::saver::{
    Blob, Described, NewCheckpoint, Payload, PendingWrite, SavedCheckpoint, Saver, Write,
};
use mostrador_queue::{ClaimedRun, Error as QueueError, ThreadId};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Semaphore;
use uuid::Uuid;

use crate::services::{AgentConfig, Services};

/// The runner, written next to the binary's temporary files at first use.
const RUNNER: &str = include_str!("../python/mostrador_runner.py");
/// What the graphs may import of mostrador (`import mostrador`), written beside the runner.
const PACKAGE: &str = include_str!("../python/mostrador/__init__.py");
const DEEPAGENTS: &str = include_str!("../python/mostrador/deepagents.py");

/// How long a runner has to stop a cancelled run before its process is killed.
pub const CANCEL_GRACE: Duration = Duration::from_secs(1);

/// How long a new runner may take to import the graphs.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(120);

/// Where a worker's Python graphs come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonConfig {
    /// The interpreter of the environment that has `langgraph` and the graphs' dependencies.
    pub python: PathBuf,
    /// The `langgraph.json` that names the graphs.
    pub config: PathBuf,
    /// Its graph ids.
    pub graphs: Vec<String>,
    /// The address space of each runner process, in MiB (`RLIMIT_AS`, set by the runner before
    /// it loads any graph).
    pub memory_limit_mib: Option<u64>,
    /// What deep agents may ask of the worker: their files, a sandbox, subagent slots.
    pub agents: AgentConfig,
}

/// Idle runner processes, started on demand.
#[derive(Debug)]
pub struct Runners {
    config: PythonConfig,
    script: PathBuf,
    idle: Mutex<Vec<Runner>>,
    agents: Arc<AgentConfig>,
    /// The worker's subagent slots, shared by all its runs.
    subagent_slots: Option<Arc<Semaphore>>,
}

/// One runner process.
#[derive(Debug)]
pub struct Runner {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

/// Why the graphs could not be described.
#[derive(Debug, thiserror::Error)]
pub enum DescribeError {
    #[error(transparent)]
    Runner(#[from] RunnerError),
    #[error(transparent)]
    Database(#[from] QueueError),
}

/// Why a runner could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("the Python runner could not start: {0}")]
    Start(String),
    #[error("the Python runner exited")]
    Exited,
    #[error("the Python runner broke the protocol: {0}")]
    Protocol(String),
}

impl Runners {
    /// # Errors
    ///
    /// The runner's script could not be written.
    pub fn new(mut config: PythonConfig) -> std::io::Result<Self> {
        let script = write_script()?;
        // Runners start in the langgraph.json's folder: a relative path (not a bare name, which
        // PATH resolves) is the caller's, relative to where the worker started.
        if config.python.components().count() > 1 && config.python.is_relative() {
            config.python = std::path::absolute(&config.python)?;
        }
        Ok(Self {
            agents: Arc::new(config.agents.clone()),
            subagent_slots: config
                .agents
                .subagents_per_worker
                .map(|n| Arc::new(Semaphore::new(n))),
            config,
            script,
            idle: Mutex::default(),
        })
    }

    /// The services of a run of these graphs (`saver`: its checkpointer, fenced by its lease).
    pub fn services(&self, saver: Saver) -> Services {
        Services::new(saver, self.agents.clone(), self.subagent_slots.clone())
    }

    pub fn serves(&self, graph_id: &str) -> bool {
        self.config.graphs.iter().any(|g| g == graph_id)
    }

    /// An idle runner, or a new one once it has loaded the graphs.
    ///
    /// # Errors
    ///
    /// The process could not start or did not get ready.
    pub async fn take(&self) -> Result<Runner, RunnerError> {
        let idle = self
            .idle
            .lock()
            .expect("runner pool lock is never poisoned")
            .pop();
        match idle {
            Some(runner) => Ok(runner),
            None => self.start().await,
        }
    }

    /// Keeps a runner that finished its run cleanly for the next one.
    pub fn give_back(&self, runner: Runner) {
        self.idle
            .lock()
            .expect("runner pool lock is never poisoned")
            .push(runner);
    }

    /// What LangGraph says of each graph (schemas, drawings, subgraphs), asked of an idle runner
    /// and recorded for the api, which runs no Python.
    ///
    /// # Errors
    ///
    /// No runner could start, or it failed while describing; a database failure.
    pub async fn describe(&self, pool: &mostrador_queue::PgPool) -> Result<(), DescribeError> {
        let mut runner = self.take().await?;
        runner.send(&json!({"t": "describe"})).await?;
        let described = tokio::time::timeout(STARTUP_TIMEOUT, runner.next())
            .await
            .map_err(|_| RunnerError::Start("describing the graphs took too long".into()))??;
        if described["t"] != "described" {
            runner.kill().await;
            return Err(
                RunnerError::Protocol(format!("expected described, got {described:.200}")).into(),
            );
        }
        self.give_back(runner);
        let Some(graphs) = described["graphs"].as_object() else {
            return Err(RunnerError::Protocol("described without graphs".into()).into());
        };
        for (graph_id, description) in graphs {
            mostrador_queue::graphs::record(pool, graph_id, description).await?;
        }
        Ok(())
    }

    async fn start(&self) -> Result<Runner, RunnerError> {
        let mut child = Command::new(&self.config.python)
            .arg(&self.script)
            .arg(&self.config.config)
            .current_dir(
                self.config
                    .config
                    .parent()
                    .filter(|dir| !dir.as_os_str().is_empty())
                    .unwrap_or(Path::new(".")),
            )
            .env("PYTHONUNBUFFERED", "1")
            .env(
                "MOSTRADOR_RUNNER_MEMORY_LIMIT_MIB",
                self.config
                    .memory_limit_mib
                    .map(|mib| mib.to_string())
                    .unwrap_or_default(),
            )
            // User code needs no way into mostrador's database or tokens: the worker writes
            // for it.
            .env_remove("MOSTRADOR_DATABASE_URL")
            .env_remove("DATABASE_URL")
            .env_remove("MOSTRADOR_JWT_SECRET")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| {
                RunnerError::Start(format!("{}: {err}", self.config.python.display()))
            })?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        let mut runner = Runner {
            child,
            stdin,
            stdout,
        };
        let ready = tokio::time::timeout(STARTUP_TIMEOUT, runner.next())
            .await
            .map_err(|_| RunnerError::Start("the graphs took too long to load".into()))??;
        if ready["t"] != "ready" {
            return Err(RunnerError::Protocol(format!(
                "expected ready, got {ready}"
            )));
        }
        tracing::info!(pid = runner.child.id(), graphs = %ready["graphs"], "python runner ready");
        Ok(runner)
    }
}

impl Runner {
    /// The runner's next message.
    ///
    /// # Errors
    ///
    /// The process exited, or wrote something that is not a message. Cancel-safe.
    pub async fn next(&mut self) -> Result<Value, RunnerError> {
        match self.stdout.next_line().await {
            Ok(Some(line)) => serde_json::from_str(&line)
                .map_err(|err| RunnerError::Protocol(format!("{err}: {line:.200}"))),
            Ok(None) | Err(_) => Err(RunnerError::Exited),
        }
    }

    /// # Errors
    ///
    /// The process exited.
    pub async fn send(&mut self, message: &Value) -> Result<(), RunnerError> {
        let mut line = serde_json::to_vec(message).expect("a JSON value always serializes");
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .await
            .map_err(|_| RunnerError::Exited)
    }

    /// Ends the process now (a run it would not stop, or a broken one).
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The message that hands a run to a runner, with the thread's latest checkpoint (which LangGraph
/// reads first) when it could be read, to spare the runner asking for it.
/// `max_concurrency`: the operator's bound on a superstep's tasks at once (a run may ask for
/// fewer, never more).
pub async fn run_message(
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
    json!({"t": "run", "run": spec})
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

/// Writes the embedded runner, with the `mostrador` package its graphs may import, to a new
/// folder of its own in the temporary folder (a name no one could have planted, created only if
/// new); [`Runners`] removes it when dropped. Returns the runner's path.
fn write_script() -> std::io::Result<PathBuf> {
    let folder = std::env::temp_dir().join(format!("mostrador-runner-{}", Uuid::now_v7()));
    std::fs::create_dir(&folder)?;
    std::fs::create_dir(folder.join("mostrador"))?;
    for (path, text) in [
        ("mostrador_runner.py", RUNNER),
        ("mostrador/__init__.py", PACKAGE),
        ("mostrador/deepagents.py", DEEPAGENTS),
    ] {
        std::fs::write(folder.join(path), text)?;
    }
    Ok(folder.join("mostrador_runner.py"))
}

impl Drop for Runners {
    fn drop(&mut self) {
        if let Some(folder) = self.script.parent() {
            let _ = std::fs::remove_dir_all(folder);
        }
    }
}
