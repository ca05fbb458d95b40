//! What a Python run's tools ask of the worker beyond its checkpointer and Store, for deep agents
//! (the runner's `mostrador.deepagents` module):
//!
//! * `files`: the thread's files (`queue::state::files`), read plainly and written fenced by the lease;
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
use mostrador_queue::state::files::{self, File, NewFile};
use mostrador_queue::state::saver::Saver;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::runner::protocol::{Call, Cast, FilesCall, SpanJson, ToRunner};
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
    reply: Result<ToRunner, QueueError>,
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
    pub fn serves(call: &Call) -> bool {
        matches!(
            call,
            Call::Files(_) | Call::Execute { .. } | Call::Subagent {}
        )
    }

    /// Answers a call now, or starts its work and answers it from [`Services::next`]: `None`.
    ///
    /// # Errors
    ///
    /// [`QueueError::LeaseLost`].
    pub async fn call(&mut self, id: u64, call: Call) -> Result<Option<ToRunner>, QueueError> {
        match call {
            Call::Files(files) => {
                let result = files_op(&self.saver, self.config.files_limit_bytes, files).await;
                reply(id, result).map(Some)
            }
            Call::Execute {
                command,
                timeout,
                span_parent,
            } => {
                let (saver, config) = (self.saver.clone(), self.config.clone());
                let timeout = timeout.map(Duration::from_secs);
                // Under the tool call that runs it.
                let span = tracing::info_span!(
                    parent: &self.parent(span_parent.as_deref()),
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
            Call::Subagent {} => {
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
            other => Err(QueueError::Invalid {
                field: "op",
                reason: format!("{other:?} is not a service's"),
            }),
        }
    }

    /// Whether some work is still to be answered.
    pub fn working(&self) -> bool {
        !self.working.is_empty()
    }

    /// The next answer of work that took time. Cancel-safe.
    pub async fn next(&mut self) -> Option<Result<ToRunner, QueueError>> {
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
    pub fn cast(&mut self, cast: Cast) -> Option<Cast> {
        match cast {
            Cast::SubagentDone { slot } => {
                self.slots.remove(&slot);
                None
            }
            Cast::Span(span) => {
                self.span(span);
                None
            }
            other => Some(other),
        }
    }

    /// The open span `id` names, or the run's.
    fn parent(&self, id: Option<&str>) -> tracing::Span {
        id.and_then(|id| self.spans.get(id))
            .cloned()
            .unwrap_or_else(tracing::Span::current)
    }

    /// Opens or closes a span of the run's model calls, tool calls and delegations.
    fn span(&mut self, span: SpanJson) {
        let (id, parent, name, kind, model, tool, subagent) = match span {
            SpanJson::End { id, error } => {
                if let (Some(span), Some(error)) = (self.spans.remove(&id), error) {
                    span.record("otel.status_code", "ERROR");
                    span.record("error", error);
                }
                return;
            }
            SpanJson::Start {
                id,
                parent,
                name,
                kind,
                model,
                tool,
                subagent,
            } => (id, parent, name, kind, model, tool, subagent),
        };
        if self.spans.len() >= OPEN_SPANS {
            return;
        }
        let parent = self.parent(parent.as_deref());
        let span = tracing::info_span!(
            parent: &parent,
            "agent",
            otel.name = %name,
            kind = %kind,
            model = %model.unwrap_or_default(),
            tool = %tool.unwrap_or_default(),
            subagent = %subagent.unwrap_or_default(),
            otel.status_code = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        self.spans.insert(id, span);
    }
}

/// A call's answer: what it returns, or why it failed as the agent should read it. Only a lost
/// lease is not answered.
fn reply(id: u64, result: Result<Value, QueueError>) -> Result<ToRunner, QueueError> {
    let (result, error) = match result {
        Ok(result) => (result, None),
        Err(err @ QueueError::LeaseLost { .. }) => return Err(err),
        Err(QueueError::Invalid { reason, .. }) => (json!({"error": reason}), None),
        Err(err) => (Value::Null, Some(err.to_string())),
    };
    Ok(ToRunner::Reply { id, result, error })
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

/// One operation on the thread's files.
async fn files_op(saver: &Saver, limit: i64, call: FilesCall) -> Result<Value, QueueError> {
    let (pool, thread_id) = (saver.pool(), saver.thread_id());
    match call {
        FilesCall::List { path } => {
            let found = files::list(pool, thread_id, &path).await?;
            Ok(found.iter().map(files::FileInfo::json).collect())
        }
        FilesCall::Read { path } => Ok(files::read(pool, thread_id, &path)
            .await?
            .map_or(Value::Null, |file| file.json())),
        FilesCall::ReadUnder { path } => Ok(files::read_under(pool, thread_id, &path)
            .await?
            .iter()
            .map(File::json)
            .collect()),
        FilesCall::Write { files, deleted } => {
            let mut written = Vec::new();
            for file in files {
                let is_binary = file.encoding == "base64";
                let content = if is_binary {
                    BASE64
                        .decode(&file.content)
                        .map_err(|err| QueueError::Invalid {
                            field: "content",
                            reason: format!("{}: not base64 ({err})", file.path),
                        })?
                } else {
                    file.content.into_bytes()
                };
                written.push(NewFile {
                    path: file.path,
                    content,
                    is_binary,
                });
            }
            let done =
                files::write(pool, &saver.lease(), thread_id, &written, &deleted, limit).await?;
            Ok(json!({"deleted": done.deleted, "total_bytes": done.total_bytes}))
        }
    }
}
