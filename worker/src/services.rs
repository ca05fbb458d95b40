//! What a Python run's tools ask of the worker beyond its checkpointer and Store, for deep agents
//! (the runner's `mostrador.deepagents` module):
//!
//! * `files`: the thread's files (`queue::files`), read plainly and written fenced by the lease;
//! * `execute`: a command in the [`crate::sandbox`] over those files;
//! * `subagent`: a slot for a subagent delegation, under the run's limit and the worker's (all its
//!   runs together), held until the runner casts `subagent_done` or the run ends;
//! * `span`: the start and end of a model call, a tool call or a delegation, exported as spans
//!   under the run's own (OpenTelemetry, as the worker's other spans).
//!
//! Files are answered at once. A command or a wait for a slot may take long: it runs beside the
//! run's other messages (a drain, a cancel, the checkpointer's calls), and its answer is sent when
//! it is ready; what is still running when the run ends is stopped with it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use mostrador_queue::Error as QueueError;
use mostrador_queue::files::{self, File, NewFile};
use mostrador_queue::saver::Saver;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::sandbox::{self, SandboxConfig};

/// How deep agents are served: the operator's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// The most bytes a thread's files may take together.
    pub files_limit_bytes: i64,
    /// Where commands run; `None`: agents cannot run commands.
    pub sandbox: Option<SandboxConfig>,
    /// Subagent delegations at once in one run.
    pub subagents_per_run: Option<usize>,
    /// Subagent delegations at once in all the runs of this worker process.
    pub subagents_per_worker: Option<usize>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            files_limit_bytes: 64 << 20,
            sandbox: None,
            subagents_per_run: None,
            subagents_per_worker: None,
        }
    }
}

/// The most spans of one run open at once: beyond, new ones are not exported.
const OPEN_SPANS: usize = 10_000;

/// A delegation's permits: the run's and the worker's.
type Slot = (Option<OwnedSemaphorePermit>, Option<OwnedSemaphorePermit>);

/// An answer that took time, and the slot it took if it was a wait for one.
#[derive(Debug)]
struct Ready {
    reply: Result<Value, QueueError>,
    slot: Option<(u64, Slot)>,
}

/// The services of one run.
#[derive(Debug)]
pub struct Services {
    saver: Saver,
    config: Arc<AgentConfig>,
    run_slots: Option<Arc<Semaphore>>,
    worker_slots: Option<Arc<Semaphore>>,
    slots: HashMap<u64, Slot>,
    next_slot: u64,
    working: JoinSet<Ready>,
    spans: HashMap<String, tracing::Span>,
}

impl Services {
    pub fn new(
        saver: Saver,
        config: Arc<AgentConfig>,
        worker_slots: Option<Arc<Semaphore>>,
    ) -> Self {
        Self {
            run_slots: config
                .subagents_per_run
                .map(|n| Arc::new(Semaphore::new(n))),
            saver,
            config,
            worker_slots,
            slots: HashMap::new(),
            next_slot: 0,
            working: JoinSet::new(),
            spans: HashMap::new(),
        }
    }

    /// Whether a call is one of these services'.
    pub fn serves(op: &str) -> bool {
        matches!(op, "files" | "execute" | "subagent")
    }

    /// Answers a call now, or starts its work and answers it from [`Services::next`]: `None`.
    ///
    /// # Errors
    ///
    /// [`QueueError::LeaseLost`].
    pub async fn call(&mut self, message: &Value) -> Result<Option<Value>, QueueError> {
        let id = message["id"].clone();
        match message["op"].as_str() {
            Some("files") => {
                let result = files_op(&self.saver, self.config.files_limit_bytes, message).await;
                reply(id, result).map(Some)
            }
            Some("execute") => {
                let (saver, config) = (self.saver.clone(), self.config.clone());
                let command = message["command"].as_str().unwrap_or_default().to_owned();
                let timeout = message["timeout"].as_u64().map(Duration::from_secs);
                // Under the tool call that runs it.
                let span = tracing::info_span!(
                    parent: &self.parent(&message["span_parent"]),
                    "sandbox",
                    otel.name = "sandbox execution",
                    exit_code = tracing::field::Empty,
                );
                self.working.spawn(
                    async move {
                        let result = execute(&saver, &config, &command, timeout).await;
                        if let Ok(done) = &result {
                            tracing::Span::current()
                                .record("exit_code", done["exit_code"].as_i64().unwrap_or(-1));
                        }
                        Ready {
                            reply: reply(id, result),
                            slot: None,
                        }
                    }
                    .instrument(span),
                );
                Ok(None)
            }
            _ => {
                self.next_slot += 1;
                let slot_id = self.next_slot;
                let (run, worker) = (self.run_slots.clone(), self.worker_slots.clone());
                self.working.spawn(async move {
                    // The run's own first, so one run waiting does not hold the worker's.
                    let run = match run {
                        Some(s) => Some(s.acquire_owned().await.expect("never closed")),
                        None => None,
                    };
                    let worker = match worker {
                        Some(s) => Some(s.acquire_owned().await.expect("never closed")),
                        None => None,
                    };
                    Ready {
                        reply: reply(id, Ok(json!({"slot": slot_id}))),
                        slot: Some((slot_id, (run, worker))),
                    }
                });
                Ok(None)
            }
        }
    }

    /// Whether some work is still to be answered.
    pub fn working(&self) -> bool {
        !self.working.is_empty()
    }

    /// The next answer of work that took time. Cancel-safe.
    pub async fn next(&mut self) -> Option<Result<Value, QueueError>> {
        let ready = match self.working.join_next().await? {
            Ok(ready) => ready,
            Err(err) => {
                return Some(Err(QueueError::Invalid {
                    field: "service",
                    reason: format!("a service's task failed: {err}"),
                }));
            }
        };
        if let Some((id, slot)) = ready.slot {
            self.slots.insert(id, slot);
        }
        Some(ready.reply)
    }

    /// What the runner cast to these services (`subagent_done`, `span`); `false` for another's.
    pub fn cast(&mut self, message: &Value) -> bool {
        match message["op"].as_str() {
            Some("subagent_done") => {
                if let Some(slot) = message["slot"].as_u64() {
                    self.slots.remove(&slot);
                }
                true
            }
            Some("span") => {
                self.span(message);
                true
            }
            _ => false,
        }
    }

    /// The open span `id` names, or the run's.
    fn parent(&self, id: &Value) -> tracing::Span {
        id.as_str()
            .and_then(|id| self.spans.get(id))
            .cloned()
            .unwrap_or_else(tracing::Span::current)
    }

    /// Opens or closes a span of the run's model calls, tool calls and delegations.
    fn span(&mut self, message: &Value) {
        let id = message["id"].as_str().unwrap_or_default();
        if message["phase"] == "end" {
            if let (Some(span), Some(error)) = (self.spans.remove(id), message["error"].as_str()) {
                span.record("otel.status_code", "ERROR");
                span.record("error", error);
            }
            return;
        }
        if self.spans.len() >= OPEN_SPANS {
            return;
        }
        let parent = self.parent(&message["parent"]);
        let text = |key: &str| message[key].as_str().unwrap_or_default().to_owned();
        let span = tracing::info_span!(
            parent: &parent,
            "agent",
            otel.name = %text("name"),
            kind = %text("kind"),
            model = %text("model"),
            tool = %text("tool"),
            subagent = %text("subagent"),
            otel.status_code = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        self.spans.insert(id.to_owned(), span);
    }
}

/// A call's answer: what it returns, or why it failed as the agent should read it. Only a lost
/// lease is not answered.
fn reply(id: Value, result: Result<Value, QueueError>) -> Result<Value, QueueError> {
    match result {
        Ok(result) => Ok(json!({"t": "reply", "id": id, "result": result})),
        Err(err @ QueueError::LeaseLost { .. }) => Err(err),
        Err(QueueError::Invalid { reason, .. }) => {
            Ok(json!({"t": "reply", "id": id, "result": {"error": reason}}))
        }
        Err(err) => Ok(json!({"t": "reply", "id": id, "error": err.to_string()})),
    }
}

async fn execute(
    saver: &Saver,
    config: &AgentConfig,
    command: &str,
    timeout: Option<Duration>,
) -> Result<Value, QueueError> {
    let Some(sandbox) = &config.sandbox else {
        return Err(QueueError::Invalid {
            field: "execute",
            reason: "this worker runs no sandbox (its operator did not enable one)".into(),
        });
    };
    match sandbox::execute(sandbox, saver, config.files_limit_bytes, command, timeout).await {
        Ok(done) => Ok(json!({
            "output": done.output,
            "exit_code": done.exit_code,
            "truncated": done.truncated,
            "files_error": done.files_error,
        })),
        Err(sandbox::SandboxError::Queue(err)) => Err(err),
        Err(err) => Err(QueueError::Invalid {
            field: "execute",
            reason: err.to_string(),
        }),
    }
}

/// One operation on the thread's files (`action`: list, read, read_under, write).
async fn files_op(saver: &Saver, limit: i64, message: &Value) -> Result<Value, QueueError> {
    let (pool, thread_id) = (saver.pool(), saver.thread_id());
    let path = message["path"].as_str().unwrap_or("/");
    match message["action"].as_str() {
        Some("list") => {
            let found = files::list(pool, thread_id, path).await?;
            Ok(found.iter().map(files::FileInfo::json).collect())
        }
        Some("read") => Ok(files::read(pool, thread_id, path)
            .await?
            .map_or(Value::Null, |file| file.json())),
        Some("read_under") => Ok(files::read_under(pool, thread_id, path)
            .await?
            .iter()
            .map(File::json)
            .collect()),
        Some("write") => {
            let mut written = Vec::new();
            for file in message["files"].as_array().into_iter().flatten() {
                let path = file["path"].as_str().unwrap_or_default().to_owned();
                let content = file["content"].as_str().unwrap_or_default();
                let is_binary = file["encoding"] == "base64";
                let content = if is_binary {
                    BASE64.decode(content).map_err(|err| QueueError::Invalid {
                        field: "content",
                        reason: format!("{path}: not base64 ({err})"),
                    })?
                } else {
                    content.as_bytes().to_vec()
                };
                written.push(NewFile {
                    path,
                    content,
                    is_binary,
                });
            }
            let deleted: Vec<String> = message["deleted"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p.as_str().map(str::to_owned))
                .collect();
            let done =
                files::write(pool, &saver.lease(), thread_id, &written, &deleted, limit).await?;
            Ok(json!({"deleted": done.deleted, "total_bytes": done.total_bytes}))
        }
        other => Err(QueueError::Invalid {
            field: "action",
            reason: format!("the runner asked for files {other:?}"),
        }),
    }
}
