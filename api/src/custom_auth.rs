//! A project's own authentication and authorization (`auth.path` of its `langgraph.json`), run
//! as the official server runs it: its `@auth.authenticate` handler names the caller of every
//! request, and its `@auth.on...` handlers allow, change or filter each action on threads,
//! assistants, crons and the store ([`Grant`]).
//!
//! The handlers are Python: they run in processes of the api's own (`runner.py --auth`, started
//! by the binary as the workers start their runners: the project's interpreter in its folder,
//! none of the platform's secrets), a few of them, each answering many requests at once over its
//! pipes, one JSON line per message. A process that dies is started again; while none is ready,
//! requests get a 503 with `Retry-After`: never an answer the handlers did not give.

mod filter;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::oneshot;

pub use filter::AuthFilter;

use crate::error::ApiError;

/// The resources whose actions the api asks the project's handlers about (`*`: a handler for
/// every resource).
pub const SERVED: &[&str] = &["*", "threads", "assistants", "crons", "store"];

/// Starts one handler process: the binary's, `runner.py <langgraph.json> --auth` with its input
/// and output piped.
pub type Spawn = Arc<dyn Fn() -> Command + Send + Sync>;

/// How long a process may take to load the project's auth module.
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a handler may take to answer before the request is a 503.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest wait before a dead process is started again.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(5);

/// The user a project's authenticate handler returned, as its handlers and the graphs see it
/// (`langgraph_auth_user`): `identity`, `display_name`, `is_authenticated` and whatever else it
/// holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectUser {
    pub fields: Value,
    pub permissions: Vec<String>,
}

impl ProjectUser {
    pub fn identity(&self) -> &str {
        self.fields["identity"].as_str().unwrap_or_default()
    }
}

/// What a handler made of an action: the value it may have changed (metadata stamped with an
/// owner, a namespace prefixed) and the filter the action's resources must pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub value: Value,
    pub filter: Option<AuthFilter>,
}

impl Grant {
    /// Whether a resource with `metadata` passes the grant's filter.
    pub fn admits(&self, metadata: &Value) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|filter| filter.admits(metadata))
    }

    /// The filter as a query takes it.
    pub fn filter_json(&self) -> Option<Value> {
        self.filter.as_ref().map(AuthFilter::as_json)
    }
}

/// What a request shows the authenticate handler, as officially.
#[derive(Debug)]
pub struct RequestFacts<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub headers: &'a axum::http::HeaderMap,
}

/// The handler processes, and which handlers the project has.
#[derive(Clone)]
pub struct CustomAuth(Arc<Pool>);

impl std::fmt::Debug for CustomAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomAuth")
            .field("processes", &self.0.slots.len())
            .field("handlers", &self.0.handlers)
            .finish_non_exhaustive()
    }
}

struct Pool {
    spawn: Spawn,
    slots: Vec<Mutex<Option<Arc<Link>>>>,
    next: AtomicUsize,
    authenticates: bool,
    /// `(resource, action)` of every handler, `*` for any.
    handlers: BTreeSet<(String, String)>,
}

/// One live process: its input, and the requests waiting for its answers.
struct Link {
    input: tokio::sync::Mutex<ChildStdin>,
    waiting: Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    next_id: AtomicU64,
}

#[derive(Deserialize)]
struct Ready {
    t: String,
    authenticate: bool,
    handlers: Vec<(String, String)>,
}

impl CustomAuth {
    /// Starts `processes` handler processes, and waits until the first has loaded the project's
    /// `Auth` object.
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
            authenticates: ready.authenticate,
            handlers: ready.handlers.into_iter().collect(),
        });
        // Serving from now on, before its task reads its first answer.
        *lock(&pool.slots[0]) = Some(first.link.clone());
        tokio::spawn(supervise(pool.clone(), 0, Some(first)));
        for index in 1..pool.slots.len() {
            tokio::spawn(supervise(pool.clone(), index, None));
        }
        Ok(Self(pool))
    }

    /// Whether the project has a handler for `resource`'s `action` (its own, its resource's,
    /// its action's, or a global one): without one, an action is allowed as it is, without
    /// asking a process.
    pub fn handles(&self, resource: &str, action: &str) -> bool {
        [
            (resource, action),
            (resource, "*"),
            ("*", action),
            ("*", "*"),
        ]
        .iter()
        .any(|(r, a)| {
            self.0
                .handlers
                .contains(&((*r).to_owned(), (*a).to_owned()))
        })
    }

    /// The resources the project's handlers concern (`*`: every one).
    pub fn resources(&self) -> BTreeSet<&str> {
        self.0.handlers.iter().map(|(r, _)| r.as_str()).collect()
    }

    /// The caller of a request, as the authenticate handler names them (`None`: the project has
    /// none, and every request is anonymous).
    ///
    /// # Errors
    ///
    /// The handler's `HTTPException` (a 401 or whatever it raised), a 500 with a correlation id
    /// for a handler that failed otherwise, a 503 while no process is ready.
    pub async fn authenticate(
        &self,
        request: &RequestFacts<'_>,
    ) -> Result<Option<ProjectUser>, ApiError> {
        if !self.0.authenticates {
            return Ok(None);
        }
        let headers: Vec<(&str, &str)> = request
            .headers
            .iter()
            .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
            .collect();
        let answer = self
            .ask(json!({
                "t": "authenticate",
                "method": request.method,
                "path": request.path,
                "query": request.query,
                "headers": headers,
            }))
            .await?;
        let permissions = answer["permissions"]
            .as_array()
            .map(|all| {
                all.iter()
                    .filter_map(|p| p.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        match answer.get("user") {
            Some(fields @ Value::Object(_)) => Ok(Some(ProjectUser {
                fields: fields.clone(),
                permissions,
            })),
            _ => Ok(None),
        }
    }

    /// What the handler for `resource`'s `action` makes of `value`, asked as `user`. Without a
    /// handler for it (or without a user: no authenticate handler) the action is allowed as is.
    ///
    /// # Errors
    ///
    /// A 403 for a handler's `False` or failed assertion, its `HTTPException`, a 500 with a
    /// correlation id for a handler that failed or returned a filter of the wrong shape, a 503
    /// while no process is ready.
    pub async fn event(
        &self,
        user: Option<&ProjectUser>,
        resource: &str,
        action: &str,
        value: Value,
    ) -> Result<Grant, ApiError> {
        let Some(user) = user.filter(|_| self.handles(resource, action)) else {
            return Ok(Grant {
                value,
                filter: None,
            });
        };
        let mut answer = self
            .ask(json!({
                "t": "event",
                "user": user.fields,
                "permissions": user.permissions,
                "resource": resource,
                "action": action,
                "value": value,
            }))
            .await?;
        let filter = match answer["filter"].take() {
            Value::Null => None,
            filter => Some(AuthFilter::new(filter).map_err(bug)?),
        };
        Ok(Grant {
            value: answer["value"].take(),
            filter,
        })
    }

    async fn ask(&self, mut message: Value) -> Result<Value, ApiError> {
        let link = self.live().ok_or_else(unavailable)?;
        let id = link.next_id.fetch_add(1, Ordering::Relaxed);
        message["id"] = json!(id);
        let (answer, answered) = oneshot::channel();
        lock(&link.waiting).insert(id, answer);
        let mut line = serde_json::to_vec(&message).map_err(ApiError::failed)?;
        line.push(b'\n');
        let written = link.input.lock().await.write_all(&line).await;
        let answer = match written {
            Ok(()) => tokio::time::timeout(ANSWER_TIMEOUT, answered).await.ok(),
            Err(_) => None,
        };
        // Not written, the process died with the request (its answer's sender dropped), or it
        // took too long: the handlers gave no answer.
        let Some(Ok(mut answer)) = answer else {
            lock(&link.waiting).remove(&id);
            return Err(unavailable());
        };
        match answer.get_mut("error").map(Value::take) {
            None => Ok(answer),
            Some(error) => Err(refusal(&error)),
        }
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
fn unavailable() -> ApiError {
    ApiError {
        retry_after: Some(1),
        ..ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the project's auth handlers are starting again; try again",
        )
    }
}

/// A handler's mistake: a 500 with a correlation id.
fn bug(why: String) -> ApiError {
    ApiError::failed(format!("the project's auth handler: {why}"))
}

/// The answer a handler gave instead of its result.
fn refusal(error: &Value) -> ApiError {
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
        .map_err(|err| format!("the auth handlers' process could not start: {err}"))?;
    let input = child.stdin.take().ok_or("no input pipe")?;
    let output = child.stdout.take().ok_or("no output pipe")?;
    let mut output = BufReader::new(output);
    let mut line = String::new();
    let read = tokio::time::timeout(LOAD_TIMEOUT, output.read_line(&mut line)).await;
    let ready: Ready = match read {
        Ok(Ok(n)) if n > 0 => serde_json::from_str(&line)
            .map_err(|err| format!("the auth handlers' process said {line:.200}: {err}"))?,
        Ok(_) => {
            return Err(
                "the auth handlers' process exited while loading auth.path (its error is above)"
                    .into(),
            );
        }
        Err(_) => return Err("the auth handlers' process took too long to load auth.path".into()),
    };
    if ready.t != "ready" {
        return Err(format!("the auth handlers' process said {line:.200}"));
    }
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
                        tracing::warn!(line = %format!("{line:.200}"), "auth handlers' process wrote a line that is not an answer");
                        continue;
                    };
                    let waiting = answer["id"]
                        .as_u64()
                        .and_then(|id| lock(&link.waiting).remove(&id));
                    if let Some(waiting) = waiting {
                        let _ = waiting.send(answer);
                    }
                }
                *lock(&pool.slots[index]) = None;
                // Its requests fail (their senders dropped): 503s, never answers it did not give.
                lock(&link.waiting).clear();
                let _ = child.start_kill();
                let status = child.wait().await;
                tracing::warn!(
                    ?status,
                    "an auth handlers' process exited; starting another"
                );
            }
            Err(why) => tracing::warn!(why, "an auth handlers' process could not start"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_RESTART_DELAY);
    }
}
