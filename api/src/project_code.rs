//! The api's helper processes for a project's own code (its `auth.path` handlers, its `http.app`
//! routes, its `store.index` embedding function): `runner.py <langgraph.json> --api`, or Node.js's
//! `api.mjs` for a JavaScript `auth.path` and `http.app`, started by the binary as the workers
//! start their runners (the project's interpreter in its folder, none of the platform's secrets),
//! a few of them, each answering many requests at once over its pipes, one JSON line per message.
//! A process that dies is started again; while none is ready, requests get a 503 with
//! `Retry-After`: never an answer the project's code did not give.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, oneshot};

use crate::error::ApiError;

/// Starts one helper process: the binary's, `runner.py <langgraph.json> --api` with its input
/// and output piped.
pub type Spawn = Arc<dyn Fn() -> Command + Send + Sync>;

/// How long a process may take to load the project's code (and start its app's lifespan).
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// How long an auth handler may take to answer before the request is a 503.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest wait before a dead process is started again.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(5);

/// The processes, and what the project's code is (as the first said when it was ready).
#[derive(Clone)]
pub struct ProjectCode(Arc<Pool>);

impl std::fmt::Debug for ProjectCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectCode")
            .field("processes", &self.0.slots.len())
            .field("handlers", &self.0.ready.handlers)
            .finish_non_exhaustive()
    }
}

struct Pool {
    spawn: Spawn,
    slots: Vec<Mutex<Option<Arc<Link>>>>,
    next: AtomicUsize,
    ready: Ready,
}

/// One live process: its input, and the requests waiting for its answers.
struct Link {
    input: tokio::sync::Mutex<ChildStdin>,
    waiting: Mutex<HashMap<u64, Waiting>>,
    next_id: AtomicU64,
}

/// A request waiting for its answer: one line, or (a route's) lines until its end.
enum Waiting {
    Once(oneshot::Sender<Value>),
    Lines(mpsc::UnboundedSender<Value>),
}

/// What a process says once it has loaded the project's code (a field mostrador does not know
/// is refused: the two sides are written together).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ready {
    t: String,
    pid: u32,
    /// It has an `@auth.authenticate` handler.
    pub authenticate: bool,
    /// `(resource, action)` of every `@auth.on` handler, `*` for any.
    #[serde(default)]
    pub handlers: BTreeSet<(String, String)>,
    /// It loaded the store's embedding function (`store.index`).
    #[serde(default)]
    pub index: bool,
    /// The routes of `http.app`, if it has one.
    #[serde(default)]
    pub routes: Option<Vec<AppRoute>>,
    /// Its WebSocket routes' paths.
    #[serde(default)]
    pub websockets: Vec<String>,
    /// Its middleware, by class name.
    #[serde(default)]
    pub middleware: Vec<String>,
    /// Its OpenAPI document (a FastAPI app's).
    #[serde(default)]
    pub openapi: Option<Value>,
}

/// What the api asks a helper process, one line each (`t` names it; `runner.py --api` and
/// `api.mjs` read the same lines).
#[derive(Debug, Serialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Ask<'a> {
    /// Who calls: the authenticate handler's user, or its refusal.
    Authenticate {
        method: &'a str,
        path: &'a str,
        query: &'a str,
        headers: Vec<(&'a str, &'a str)>,
    },
    /// What the handler of `resource`'s `action` makes of `value`: the value, and a filter.
    Event {
        user: &'a Value,
        permissions: &'a [String],
        resource: &'a str,
        action: &'a str,
        value: Value,
    },
    /// The embedded fields of a store item's `value` (`index`: the put's own, or null).
    Embed { value: &'a Value, index: &'a Value },
    /// The embedding of a store search's query.
    EmbedQuery { query: &'a str },
    /// A request to the project's app, answered in lines: its start, its body's pieces, its end.
    Http {
        method: &'a str,
        path: &'a str,
        query: &'a str,
        headers: Vec<(&'a str, &'a str)>,
        /// Base64.
        body: String,
        user: Option<&'a Value>,
        permissions: Option<&'a [String]>,
    },
}

/// An [`Ask`] under the id its answer will carry.
#[derive(Serialize)]
struct Line<'a> {
    id: u64,
    #[serde(flatten)]
    ask: &'a Ask<'a>,
}

/// A route of a project's app: a path (Starlette's, `{param}` and `{param:path}`), its methods
/// (`None`: any), or a mount (`prefix`: every path below it).
#[derive(Debug, Clone, Deserialize)]
pub struct AppRoute {
    pub path: String,
    pub methods: Option<Vec<String>>,
    pub prefix: bool,
}

impl ProjectCode {
    /// Starts `processes` helper processes, and waits until the first has loaded the project's
    /// code.
    ///
    /// # Errors
    ///
    /// Why the first could not start or load it (its traceback went to the api's standard error).
    pub async fn start(spawn: Spawn, processes: usize) -> Result<Self, String> {
        let (first, ready) = start_one(&spawn).await?;
        let pool = Arc::new(Pool {
            spawn,
            slots: (0..processes.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            ready,
        });
        // Serving from now on, before its task reads its first answer.
        *lock(&pool.slots[0]) = Some(first.link.clone());
        tokio::spawn(supervise(pool.clone(), 0, Some(first)));
        for index in 1..pool.slots.len() {
            tokio::spawn(supervise(pool.clone(), index, None));
        }
        Ok(Self(pool))
    }

    /// What the project's code is.
    pub fn ready(&self) -> &Ready {
        &self.0.ready
    }

    /// `message`'s one answer (an auth handler's).
    ///
    /// # Errors
    ///
    /// The answer's refusal; a 503 when no process answered.
    pub async fn ask(&self, message: &Ask<'_>) -> Result<Value, ApiError> {
        let (answer, answered) = oneshot::channel();
        let (link, id) = self.send(message, Waiting::Once(answer)).await?;
        // The process died with the request (its answer's sender dropped), or took too long:
        // the project's code gave no answer.
        let Ok(Ok(mut answer)) = tokio::time::timeout(ANSWER_TIMEOUT, answered).await else {
            lock(&link.waiting).remove(&id);
            return Err(unavailable());
        };
        match answer.get_mut("error").map(Value::take) {
            None => Ok(answer),
            Some(error) => Err(refusal(&error)),
        }
    }

    /// `message`'s answer as it comes (a route's): its lines up to its `end` or `error`; the
    /// receiver closes early when the process dies.
    ///
    /// # Errors
    ///
    /// A 503 when no process took it.
    pub async fn ask_lines(
        &self,
        message: &Ask<'_>,
    ) -> Result<mpsc::UnboundedReceiver<Value>, ApiError> {
        let (lines, answer) = mpsc::unbounded_channel();
        self.send(message, Waiting::Lines(lines)).await?;
        Ok(answer)
    }

    /// Writes `message` to a live process under a new id, its answer awaited by `waiting`.
    async fn send(&self, ask: &Ask<'_>, waiting: Waiting) -> Result<(Arc<Link>, u64), ApiError> {
        let link = self.live().ok_or_else(unavailable)?;
        let id = link.next_id.fetch_add(1, Ordering::Relaxed);
        let mut line = serde_json::to_vec(&Line { id, ask }).map_err(ApiError::failed)?;
        line.push(b'\n');
        lock(&link.waiting).insert(id, waiting);
        if link.input.lock().await.write_all(&line).await.is_err() {
            lock(&link.waiting).remove(&id);
            return Err(unavailable());
        }
        Ok((link, id))
    }

    /// A live process, the next in turn.
    fn live(&self) -> Option<Arc<Link>> {
        let slots = &self.0.slots;
        let start = self.0.next.fetch_add(1, Ordering::Relaxed);
        (0..slots.len()).find_map(|i| lock(&slots[(start + i) % slots.len()]).clone())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The 503 of a request no process could answer.
pub(crate) fn unavailable() -> ApiError {
    ApiError {
        retry_after: Some(1),
        ..ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the project's code is starting again; try again",
        )
    }
}

/// The project's code's mistake: a 500 with a correlation id.
pub(crate) fn bug(why: String) -> ApiError {
    ApiError::failed(format!("the project's code: {why}"))
}

/// The answer the project's code gave instead of its result.
pub(crate) fn refusal(error: &Value) -> ApiError {
    let detail = error["detail"].as_str().unwrap_or_default().to_owned();
    if error["bug"].as_bool() == Some(true) {
        return bug(detail);
    }
    let status = error["status"]
        .as_u64()
        .and_then(|status| u16::try_from(status).ok())
        .and_then(|status| StatusCode::from_u16(status).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = error["headers"]
        .as_object()
        .map(|headers| {
            headers
                .iter()
                .filter_map(|(name, value)| Some((name.clone(), value.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    ApiError {
        headers,
        ..ApiError::new(status, detail)
    }
}

/// A process that said it is ready.
struct Started {
    link: Arc<Link>,
    output: ChildStdout,
    child: tokio::process::Child,
}

/// Starts a process and waits for it to say it is ready (and which handlers it has).
async fn start_one(spawn: &Spawn) -> Result<(Started, Ready), String> {
    let mut child = spawn()
        .spawn()
        .map_err(|err| format!("the project's helper process could not start: {err}"))?;
    let input = child.stdin.take().ok_or("no input pipe")?;
    let output = child.stdout.take().ok_or("no output pipe")?;
    let mut output = BufReader::new(output);
    let mut line = String::new();
    let read = tokio::time::timeout(LOAD_TIMEOUT, output.read_line(&mut line)).await;
    let ready: Ready = match read {
        Ok(Ok(n)) if n > 0 => serde_json::from_str(&line)
            .map_err(|err| format!("the project's helper process said {line:.200}: {err}"))?,
        Ok(_) => {
            return Err(
                "the project's helper process exited while loading auth.path (its error is above)"
                    .into(),
            );
        }
        Err(_) => {
            return Err("the project's helper process took too long to load auth.path".into());
        }
    };
    if ready.t != "ready" {
        return Err(format!("the project's helper process said {line:.200}"));
    }
    tracing::info!(
        pid = ready.pid,
        "a helper process of the project's code is ready"
    );
    let link = Arc::new(Link {
        input: tokio::sync::Mutex::new(input),
        waiting: Mutex::default(),
        next_id: AtomicU64::new(0),
    });
    let started = Started {
        link,
        output: output.into_inner(),
        child,
    };
    Ok((started, ready))
}

/// Keeps slot `index` served: routes its process's answers, and starts a new one when it dies.
async fn supervise(pool: Arc<Pool>, index: usize, mut first: Option<Started>) {
    let mut delay = Duration::from_millis(100);
    loop {
        let started = match first.take() {
            Some(started) => Ok(started),
            None => start_one(&pool.spawn).await.map(|(started, _)| started),
        };
        match started {
            Ok(Started {
                link,
                output,
                mut child,
            }) => {
                *lock(&pool.slots[index]) = Some(link.clone());
                delay = Duration::from_millis(100);
                let mut lines = BufReader::new(output).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let Ok(answer) = serde_json::from_str::<Value>(&line) else {
                        tracing::warn!(line = %format!("{line:.200}"), "a helper process wrote a line that is not an answer");
                        continue;
                    };
                    let Some(id) = answer["id"].as_u64() else {
                        continue;
                    };
                    let last = answer.get("end").is_some() || answer.get("error").is_some();
                    let mut waiting = lock(&link.waiting);
                    match waiting.remove(&id) {
                        Some(Waiting::Once(sender)) => {
                            let _ = sender.send(answer);
                        }
                        // Kept until its last line, while someone reads it.
                        Some(Waiting::Lines(sender)) if sender.send(answer).is_ok() && !last => {
                            waiting.insert(id, Waiting::Lines(sender));
                        }
                        Some(Waiting::Lines(_)) | None => {}
                    }
                }
                *lock(&pool.slots[index]) = None;
                // Its requests fail (their senders dropped): 503s, never answers it did not give.
                lock(&link.waiting).clear();
                let _ = child.start_kill();
                let status = child.wait().await;
                tracing::warn!(
                    ?status,
                    "a helper process of the project's code exited; starting another"
                );
            }
            Err(why) => tracing::warn!(
                why,
                "a helper process of the project's code could not start"
            ),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_RESTART_DELAY);
    }
}
