//! The api's configuration and shared state (the routes are in [`mod@crate::router`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mostrador_graph::Graph;
use mostrador_queue::PgPool;
use mostrador_queue::thread::Visibility;
use mostrador_queue::{Listener, QueueLimit};
use tokio::sync::watch;

use crate::assistants::Assistant;
use crate::auth::{AuthConfig, AuthError, Authenticator, Caller};
use crate::cors::Cors;
use crate::custom_auth::CustomAuth;
use crate::custom_routes::CustomRoutes;
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::serve::Edge;
use crate::store_index::StoreIndex;
use crate::webhooks::WebhookHosts;
use crate::{dashboard, runs};

/// Request bodies larger than this get a 413 when none is configured: room for a few images in
/// a run's messages (as data URLs), as chat clients send them.
pub const BODY_LIMIT_DEFAULT: usize = 10 * 1024 * 1024;

/// Pending runs per graph when no limit is configured.
pub const MAX_PENDING_DEFAULT: i64 = 10_000;

/// Open SSE streams per process when no limit is configured.
pub const MAX_SUBSCRIBERS_DEFAULT: usize = 10_000;

/// The most threads one caller may have, by default: a long-lived product's conversations many
/// times over, while no caller can fill the database every tenant shares.
pub const THREADS_PER_CALLER_DEFAULT: i64 = 1_000_000;

/// Crons per caller (enabled or not) when no limit is configured.
pub const MAX_CRONS_PER_CALLER_DEFAULT: i64 = 100;

/// Open streams and waits of one caller per process when no limit is configured.
pub const MAX_SUBSCRIBERS_PER_CALLER_DEFAULT: usize = 100;

/// How long a caller found over their share of the queue is refused without asking the database.
const OVER_SHARE_COOLDOWN: Duration = Duration::from_secs(1);

/// The bytes of a page of threads (`POST /threads/search`) when no limit is configured.
pub const MAX_PAGE_BYTES_DEFAULT: usize = 32 * 1024 * 1024;

/// How the api behaves.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    pub auth: AuthConfig,
    /// Bodies above this many bytes get a 413 on the routes that carry a run's input, a state's
    /// values or a stored value; 1 MiB (or this, if lower) on the others.
    pub body_limit: usize,
    /// Non-streaming requests taking longer get a 503.
    pub request_timeout: Duration,
    /// Pending runs per graph above which new runs get a 503 with `Retry-After`.
    pub max_pending: i64,
    /// Pending runs of one caller (every graph) above which their new runs get a 429 with
    /// `Retry-After`: no caller fills a graph's queue for everyone.
    pub max_pending_per_caller: i64,
    /// The furthest ahead a run may be delayed (`after_seconds`; a 422 past it).
    pub max_delay: Duration,
    /// Open SSE streams and waits above which new ones get a 503 with `Retry-After`.
    pub max_subscribers: usize,
    /// Open SSE streams and waits of one caller (a subject) above which their new ones get a 429
    /// with `Retry-After`: no caller takes every slot.
    pub max_subscribers_per_caller: usize,
    /// An SSE client that reads nothing for this long while its stream's buffer is full is
    /// disconnected (it reconnects with `Last-Event-ID` when it can read again).
    pub slow_client_timeout: Duration,
    /// Crons one caller may have, enabled or not (a 422 past it).
    pub max_crons_per_caller: i64,
    /// The most supersteps a run may ask for (`config.recursion_limit`; a 422 past it).
    pub max_recursion_limit: u64,
    /// The bytes a page (threads, runs, history, Store items) may hold (a 413 past it, naming
    /// smaller pages): the api holds a page in memory while it answers.
    pub max_page_bytes: usize,
    /// Connections at once, and the time a client has to send a request's headers.
    pub edge: Edge,
    /// Whether `/metrics` is served with the api's routes (`mostrador dev`, on loopback). Else it
    /// is served apart ([`crate::serve::metrics_router`], on the port the operator scrapes), never to the api's
    /// callers.
    pub public_metrics: bool,
    /// A token the dashboard (`/dashboard`) fills in for whoever opens it: `mostrador dev` only.
    pub dashboard_token: Option<String>,
    /// Graphs of a `langgraph.json` (Python or JavaScript), which workers execute with LangGraph
    /// in runner processes: the api
    /// serves them as assistants and their threads' states from the snapshots workers record.
    pub runner_graphs: Vec<String>,
    /// The descriptions of graphs' own assistants (`langgraph.json`'s `description`), by graph id.
    pub graph_descriptions: BTreeMap<String, String>,
    /// Which browser origins may call the api (none by default).
    pub cors: Cors,
    /// Request headers copied into a run's `configurable` (`langgraph.json`'s
    /// `http.configurable_headers`); none without.
    pub configurable_headers: Option<HeaderFilter>,
    /// The time to live of threads created without one (`checkpointer.ttl.default_ttl`); none
    /// without.
    pub default_thread_ttl: Option<mostrador_queue::thread::Ttl>,
    /// What one caller may keep in the Store.
    pub store_quota: mostrador_queue::data::store::StoreQuota,
    /// The most threads one caller may have.
    pub threads_per_caller: i64,
    /// The Store's defaults (`store.ttl`).
    pub store_ttl: StoreTtl,
    /// Route groups switched off (`http.disable_*`): they answer 404, as absent.
    pub disabled_routes: RouteGroups,
    /// Every route below this path (`http.mount_prefix`: `/api`), the health checks at the root
    /// too.
    pub mount_prefix: Option<String>,
    /// `mostrador dev` on loopback: a request without credentials, or with a key that is not
    /// one of mostrador's (the SDK sends `LANGSMITH_API_KEY`'s), acts as this caller, as every
    /// request does on `langgraph dev`, if it comes from this machine (its `Host` is a loopback
    /// name, and a browser's `Origin` one CORS allows). Never set by `api`.
    pub development_caller: Option<Caller>,
    /// Who may do what, graph by graph ([`crate::policy`]); owner-only by default.
    pub policy: Policy,
    /// The hosts webhooks may be sent to; none by default (webhooks are refused).
    pub webhook_hosts: WebhookHosts,
    /// The first retry of a failed webhook waits about twice this, each next one twice longer.
    pub webhook_retry: Duration,
    /// Routes the binary's apps add beside the platform's (the retail app's `/approvals`).
    pub apps: Vec<AppRoutes>,
    /// A project's own auth handlers (`auth.path`): they name every request's caller and decide
    /// every action in place of mostrador's credentials and policy.
    pub custom_auth: Option<CustomAuth>,
    /// `auth.openapi`: the security the project's handlers ask for, in `/openapi.json`.
    pub auth_openapi: Option<serde_json::Value>,
    /// A project's own HTTP routes (`http.app`), before mostrador's.
    pub custom_routes: Option<CustomRoutes>,
    /// A project's semantic index (`store.index`): its embedding function.
    pub store_index: Option<StoreIndex>,
}

/// Routes an app of the binary adds beside the api's own, in the api's terms (its state, its
/// caller, its errors), each with its handler and its part of the OpenAPI document. The api
/// depends on no app: an app depends on the api and hands these to the binary, which registers
/// them, behind the api's layers (authentication, limits, metrics, CORS).
#[derive(Debug, Clone, Copy)]
pub struct AppRoutes {
    pub routes: &'static [crate::openapi::AppRoute],
}

/// Groups of the api's routes, as a `langgraph.json`'s `http.disable_*` names them: each `true`
/// is a group switched off. `/ok`, `/live` and `/ready` answer whatever is off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteGroups {
    pub assistants: bool,
    /// Threads, their state and history (not their runs).
    pub threads: bool,
    /// Runs, on threads or not, and crons.
    pub runs: bool,
    pub store: bool,
    /// `/info`, `/metrics`, `/docs`, `/openapi.json`.
    pub meta: bool,
    /// `/mcp`.
    pub mcp: bool,
    /// `/a2a/...` and `/.well-known/agent-card.json`.
    pub a2a: bool,
}

impl RouteGroups {
    /// Whether the route at `path` (as the route table writes it) is switched off.
    pub fn disables(&self, path: &str) -> bool {
        if path.starts_with("/runs") || path.starts_with("/threads/{thread_id}/runs") {
            self.runs
        } else if path.starts_with("/threads") {
            self.threads
        } else if path.starts_with("/assistants") {
            self.assistants
        } else if path.starts_with("/store") {
            self.store
        } else if path == "/mcp" {
            self.mcp
        } else if path.starts_with("/a2a/") || path == "/.well-known/agent-card.json" {
            self.a2a
        } else {
            self.meta && matches!(path, "/info" | "/metrics" | "/docs" | "/openapi.json")
        }
    }
}

/// The Store's time-to-live defaults, as a `langgraph.json`'s `store.ttl` sets them: the minutes
/// an item put without a `ttl` lives (none: forever), and whether a read restarts an item's time
/// when the client does not say (yes by default, as officially).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoreTtl {
    pub default_minutes: Option<f64>,
    pub refresh_on_read: bool,
}

impl Default for StoreTtl {
    fn default() -> Self {
        Self {
            default_minutes: None,
            refresh_on_read: true,
        }
    }
}

/// Which request headers a run's `configurable` gets, as `langgraph.json`'s
/// `http.configurable_headers` says: those an `includes` pattern matches and no `excludes`
/// pattern does (none without `includes`, as officially); `*` matches any text. Credentials never (`authorization`,
/// `x-api-key`, `x-service-key`, `x-tenant-id`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderFilter {
    pub includes: Vec<String>,
    pub excludes: Vec<String>,
}

impl HeaderFilter {
    /// Whether the header `name` (lowercase) is copied.
    pub fn copies(&self, name: &str) -> bool {
        if matches!(
            name,
            "authorization" | "x-api-key" | "x-service-key" | "x-tenant-id"
        ) {
            return false;
        }
        let matching = |pattern: &String| glob(&pattern.to_ascii_lowercase(), name);
        !self.excludes.iter().any(matching) && self.includes.iter().any(matching)
    }
}

/// Whether `text` is `pattern`, where `*` stands for any text (no other wildcard, so no pattern
/// costs more than a linear pass per star).
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

impl ApiConfig {
    pub fn new(auth: AuthConfig) -> Self {
        Self {
            auth,
            body_limit: BODY_LIMIT_DEFAULT,
            request_timeout: Duration::from_secs(30),
            max_pending: MAX_PENDING_DEFAULT,
            max_pending_per_caller: mostrador_queue::run::MAX_PENDING_PER_CALLER_DEFAULT,
            max_delay: mostrador_queue::run::HORIZON_DEFAULT,
            max_subscribers: MAX_SUBSCRIBERS_DEFAULT,
            max_subscribers_per_caller: MAX_SUBSCRIBERS_PER_CALLER_DEFAULT,
            slow_client_timeout: SLOW_CLIENT_TIMEOUT_DEFAULT,
            edge: Edge::default(),
            max_crons_per_caller: MAX_CRONS_PER_CALLER_DEFAULT,
            max_page_bytes: MAX_PAGE_BYTES_DEFAULT,
            max_recursion_limit: runs::config::RECURSION_LIMIT_MAX,
            public_metrics: false,
            dashboard_token: None,
            runner_graphs: Vec::new(),
            graph_descriptions: BTreeMap::new(),
            cors: Cors::Off,
            development_caller: None,
            configurable_headers: None,
            default_thread_ttl: None,
            store_ttl: StoreTtl::default(),
            store_quota: mostrador_queue::data::store::StoreQuota::default(),
            threads_per_caller: THREADS_PER_CALLER_DEFAULT,
            disabled_routes: RouteGroups::default(),
            mount_prefix: None,
            policy: Policy::default(),
            webhook_hosts: WebhookHosts::default(),
            webhook_retry: Duration::from_secs(5),
            apps: Vec::new(),
            custom_auth: None,
            auth_openapi: None,
            custom_routes: None,
            store_index: None,
        }
    }
}

/// See [`ApiConfig::slow_client_timeout`].
pub const SLOW_CLIENT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);

/// What every handler may use. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    pool: PgPool,
    auth: Authenticator,
    graphs: BTreeMap<String, Graph>,
    runner_graphs: BTreeSet<String>,
    policy: Policy,
    custom_auth: Option<CustomAuth>,
    custom_routes: Option<CustomRoutes>,
    store_index: Option<StoreIndex>,
    /// The store's vectors this process has read (for searches with a query).
    vectors: mostrador_queue::data::store::VectorCache,
    body_limit: usize,
    request_timeout: Duration,
    webhook_hosts: WebhookHosts,
    /// One per graph, by graph id.
    assistants: BTreeMap<String, Assistant>,
    /// The names of Python graphs' own assistants, as their workers described the graphs (a
    /// compiled graph's `name`, as the official server names its assistant): learned once
    /// described, kept for the process's life (a new graph name comes with a new deployment).
    names: std::sync::RwLock<HashMap<String, String>>,
    draining: AtomicBool,
    /// `true` once the pod shuts down: every SSE stream ends.
    shutdown: watch::Sender<bool>,
    listener: Listener,
    queue_limit: QueueLimit,
    max_subscribers: usize,
    max_subscribers_per_caller: usize,
    max_crons_per_caller: i64,
    max_page_bytes: usize,
    max_recursion_limit: u64,
    /// Open streams and waits by caller (those with none are not kept).
    subscribers: std::sync::Mutex<HashMap<String, usize>>,
    /// Callers found over their share of the queue, until when their new runs are refused
    /// without asking the database.
    over_share: std::sync::Mutex<HashMap<String, std::time::Instant>>,
    /// The last readiness check of the database and when it was made: `/ready` is anonymous, so
    /// a flood of probes asks the database once a second at most, one probe at a time.
    readiness: tokio::sync::Mutex<Option<(std::time::Instant, bool)>>,
    slow_client_timeout: Duration,
    cors: Cors,
    development_caller: Option<Caller>,
    configurable_headers: Option<HeaderFilter>,
    default_thread_ttl: Option<mostrador_queue::thread::Ttl>,
    store_ttl: StoreTtl,
    store_quota: mostrador_queue::data::store::StoreQuota,
    threads_per_caller: i64,
    metrics: Metrics,
    /// The dashboard page, as served.
    dashboard: String,
    /// The page with the development token filled in (`mostrador dev`), for this machine only.
    dashboard_dev: Option<String>,
}

impl AppState {
    /// # Errors
    ///
    /// An unusable auth configuration.
    /// `listener` is the process's one LISTEN connection, fanned out to every stream.
    pub fn new(
        pool: PgPool,
        config: &ApiConfig,
        graphs: BTreeMap<String, Graph>,
        listener: Listener,
    ) -> Result<Self, AuthError> {
        let runner_graphs: BTreeSet<String> = config
            .runner_graphs
            .iter()
            .filter(|graph_id| !graphs.contains_key(*graph_id))
            .cloned()
            .collect();
        let assistants = graphs
            .keys()
            .chain(&runner_graphs)
            .map(|graph_id| {
                let mut assistant = Assistant::for_graph(graph_id);
                assistant.description = config.graph_descriptions.get(graph_id).cloned();
                (graph_id.clone(), assistant)
            })
            .collect();
        Ok(Self(Arc::new(Inner {
            pool,
            auth: match Authenticator::new(&config.auth) {
                Ok(auth) => auth,
                // Under a project's own auth handlers mostrador's credentials are never read:
                // none need be configured, and none configured verifies anything.
                Err(_) if config.custom_auth.is_some() && config.auth.jwks_url.is_none() => {
                    Authenticator::new(&AuthConfig {
                        secret: format!("{}{}", uuid::Uuid::new_v4(), uuid::Uuid::new_v4()),
                        ..config.auth.clone()
                    })?
                }
                Err(err) => return Err(err),
            },
            graphs,
            runner_graphs,
            policy: config.policy.clone(),
            custom_auth: config.custom_auth.clone(),
            custom_routes: config.custom_routes.clone(),
            store_index: config.store_index.clone(),
            vectors: mostrador_queue::data::store::VectorCache::default(),
            body_limit: config.body_limit,
            request_timeout: config.request_timeout,
            webhook_hosts: config.webhook_hosts.clone(),
            assistants,
            names: std::sync::RwLock::default(),
            draining: AtomicBool::new(false),
            shutdown: watch::Sender::new(false),
            listener,
            max_subscribers: config.max_subscribers,
            max_subscribers_per_caller: config.max_subscribers_per_caller,
            max_crons_per_caller: config.max_crons_per_caller,
            max_page_bytes: config.max_page_bytes,
            max_recursion_limit: config.max_recursion_limit,
            subscribers: std::sync::Mutex::default(),
            over_share: std::sync::Mutex::default(),
            readiness: tokio::sync::Mutex::default(),
            slow_client_timeout: config.slow_client_timeout,
            cors: config.cors.clone(),
            development_caller: config.development_caller.clone(),
            configurable_headers: config.configurable_headers.clone(),
            default_thread_ttl: config.default_thread_ttl,
            store_ttl: config.store_ttl,
            store_quota: config.store_quota,
            threads_per_caller: config.threads_per_caller,
            metrics: Metrics::default(),
            dashboard: dashboard::page(None),
            dashboard_dev: config
                .dashboard_token
                .as_deref()
                .map(|token| dashboard::page(Some(token))),
            queue_limit: QueueLimit {
                max_pending: config.max_pending,
                max_pending_per_caller: config.max_pending_per_caller,
                horizon: config.max_delay,
                retry_after: Duration::from_secs(5),
            },
        })))
    }

    pub fn pool(&self) -> &PgPool {
        &self.0.pool
    }

    pub fn auth(&self) -> &Authenticator {
        &self.0.auth
    }

    /// A Rust graph of the binary.
    pub fn graph(&self, graph_id: &str) -> Option<&Graph> {
        self.0.graphs.get(graph_id)
    }

    /// Who may do what ([`ApiConfig::policy`]).
    pub fn policy(&self) -> &Policy {
        &self.0.policy
    }

    /// The project's own auth handlers, if it has them (`auth.path`).
    pub fn custom_auth(&self) -> Option<&CustomAuth> {
        self.0.custom_auth.as_ref()
    }

    /// The project's own HTTP routes, if it has them (`http.app`).
    pub fn custom_routes(&self) -> Option<&CustomRoutes> {
        self.0.custom_routes.as_ref()
    }

    /// The project's semantic index, if it has one (`store.index`).
    pub fn store_index(&self) -> Option<&StoreIndex> {
        self.0.store_index.as_ref()
    }

    /// The store's vectors this process has read.
    pub fn vectors(&self) -> &mostrador_queue::data::store::VectorCache {
        &self.0.vectors
    }

    /// The largest body a request may carry.
    pub fn body_limit(&self) -> usize {
        self.0.body_limit
    }

    /// How long a request's body may take to arrive (and a non-streaming request to end).
    pub fn request_timeout(&self) -> Duration {
        self.0.request_timeout
    }

    /// The hosts webhooks may be sent to.
    pub fn webhook_hosts(&self) -> &WebhookHosts {
        &self.0.webhook_hosts
    }

    /// The threads `caller` sees, as the queue's searches filter them (under a project's auth
    /// handlers, every thread: the route adds the filter its handler returns).
    pub fn visibility(&self, caller: &Caller) -> Visibility {
        if self.0.custom_auth.is_some() {
            return Visibility::filtered(None);
        }
        let served = self
            .0
            .graphs
            .keys()
            .chain(&self.0.runner_graphs)
            .map(String::as_str);
        self.0.policy.visibility(caller, served)
    }

    /// Whether `graph_id` is a Python graph (executed by LangGraph in the workers).
    pub fn is_python(&self, graph_id: &str) -> bool {
        self.0.runner_graphs.contains(graph_id)
    }

    /// Whether runs of `graph_id` are served, by either engine.
    pub fn serves(&self, graph_id: &str) -> bool {
        self.graph(graph_id).is_some() || self.is_python(graph_id)
    }

    pub fn assistants(&self) -> impl Iterator<Item = &Assistant> {
        self.0.assistants.values()
    }

    /// Learns the names of the Python graphs' assistants that workers have described since
    /// (one query while some are not yet known, none after). A database that fails leaves the
    /// graph ids as names until the next call.
    pub async fn learn_names(&self) {
        let missing: Vec<String> = {
            let names = self.0.names.read().expect("names are never poisoned");
            self.0
                .runner_graphs
                .iter()
                .filter(|graph_id| !names.contains_key(*graph_id))
                .cloned()
                .collect()
        };
        if missing.is_empty() {
            return;
        }
        if let Ok(found) = mostrador_queue::data::graphs::names(&self.0.pool, &missing).await {
            self.0
                .names
                .write()
                .expect("names are never poisoned")
                .extend(found);
        }
    }

    /// `assistant` with its graph's name, if it is a graph's own assistant and a worker named it.
    pub fn named(&self, mut assistant: Assistant) -> Assistant {
        if assistant.assistant_id == Assistant::for_graph(&assistant.graph_id).assistant_id
            && let Some(name) = self
                .0
                .names
                .read()
                .expect("names are never poisoned")
                .get(&assistant.graph_id)
        {
            assistant.name.clone_from(name);
        }
        assistant
    }

    /// The assistant an id names: its assistant id, or its graph id (as the official server
    /// accepts for runs).
    pub fn assistant(&self, id: &str) -> Option<&Assistant> {
        self.0.assistants.get(id).or_else(|| {
            self.0
                .assistants
                .values()
                .find(|assistant| assistant.assistant_id.to_string() == id)
        })
    }

    /// The bound on each graph's pending runs.
    pub fn queue_limit(&self) -> QueueLimit {
        self.0.queue_limit
    }

    pub fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }

    /// The dashboard's page: with the development token only for a request that names this
    /// machine (`Host`), so a page of another site that a DNS record points here (DNS
    /// rebinding) never reads it.
    pub fn dashboard(&self, host: Option<&str>) -> &str {
        match &self.0.dashboard_dev {
            Some(dev) if host.is_some_and(crate::cors::is_loopback) => dev,
            _ => &self.0.dashboard,
        }
    }

    /// Counts a stream or a wait of `subject` in until the returned guard drops.
    ///
    /// # Errors
    ///
    /// Which limit it is at: the process's, or the caller's own.
    pub fn subscribe(&self, subject: &str) -> Result<Subscriber, AtLimit> {
        let mut by_caller = self.subscribers();
        let mine = by_caller.get(subject).copied().unwrap_or(0);
        if mine >= self.0.max_subscribers_per_caller {
            return Err(AtLimit::Caller);
        }
        let gauge = &self.0.metrics.sse_subscribers;
        if usize::try_from(gauge.inc()).unwrap_or(usize::MAX) >= self.0.max_subscribers {
            gauge.dec();
            return Err(AtLimit::Process);
        }
        by_caller.insert(subject.to_owned(), mine + 1);
        Ok(Subscriber(self.clone(), subject.to_owned()))
    }

    fn subscribers(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.0
            .subscribers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn max_crons_per_caller(&self) -> i64 {
        self.0.max_crons_per_caller
    }

    /// Remembers that `caller` is over their share of the queue: for the next second their new
    /// runs get the same 429 at once, so a flood past the share costs no database work.
    pub fn over_share(&self, caller: &Caller) {
        let until = std::time::Instant::now() + OVER_SHARE_COOLDOWN;
        let mut over = self
            .0
            .over_share
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        over.retain(|_, until| *until > std::time::Instant::now());
        over.insert(caller.subject.clone(), until);
    }

    /// A 429 for a caller found over their share within the last second.
    ///
    /// # Errors
    ///
    /// The 429, with `Retry-After`.
    pub fn within_share(&self, caller: &Caller) -> Result<(), crate::error::ApiError> {
        let over = self
            .0
            .over_share
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match over.get(&caller.subject) {
            Some(until) if *until > std::time::Instant::now() => {
                Err(runs::over_share(self.0.queue_limit.retry_after))
            }
            _ => Ok(()),
        }
    }

    pub fn max_page_bytes(&self) -> usize {
        self.0.max_page_bytes
    }

    pub fn max_recursion_limit(&self) -> u64 {
        self.0.max_recursion_limit
    }

    pub fn slow_client_timeout(&self) -> Duration {
        self.0.slow_client_timeout
    }

    /// What one caller may keep in the Store ([`ApiConfig::store_quota`]).
    pub fn store_quota(&self) -> mostrador_queue::data::store::StoreQuota {
        self.0.store_quota
    }

    /// The most threads one caller may have ([`ApiConfig::threads_per_caller`]), as a new
    /// thread's quota.
    pub fn thread_quota(&self) -> Option<i64> {
        Some(self.0.threads_per_caller)
    }

    /// The Store's defaults ([`ApiConfig::store_ttl`]).
    pub fn store_ttl(&self) -> StoreTtl {
        self.0.store_ttl
    }

    /// The time to live of threads created without one ([`ApiConfig::default_thread_ttl`]).
    pub fn default_thread_ttl(&self) -> Option<mostrador_queue::thread::Ttl> {
        self.0.default_thread_ttl
    }

    /// The request headers a run's `configurable` gets ([`ApiConfig::configurable_headers`]).
    pub fn configurable_headers(&self) -> Option<&HeaderFilter> {
        self.0.configurable_headers.as_ref()
    }

    /// Whether requests without credentials may act as a development caller (`mostrador dev`).
    pub fn has_development_caller(&self) -> bool {
        self.0.development_caller.is_some()
    }

    /// The caller a request without credentials acts as, if it comes from `host` and, from a
    /// browser, `origin` ([`ApiConfig::development_caller`]).
    pub fn development_caller(&self, host: Option<&str>, origin: Option<&str>) -> Option<&Caller> {
        let caller = self.0.development_caller.as_ref()?;
        let local = host.is_some_and(crate::cors::is_loopback);
        let allowed_origin = origin.is_none_or(|origin| self.0.cors.allows(origin));
        (local && allowed_origin).then_some(caller)
    }

    pub fn listener(&self) -> &Listener {
        &self.0.listener
    }

    /// Resolves (`wait_for(|s| *s)`) when the pod shuts down.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.0.shutdown.subscribe()
    }

    /// From now on `/ready` answers 503 and every SSE stream ends.
    pub fn start_draining(&self) {
        self.0.draining.store(true, Ordering::SeqCst);
        self.0.shutdown.send_replace(true);
    }

    pub fn is_draining(&self) -> bool {
        self.0.draining.load(Ordering::SeqCst)
    }

    /// Whether the database serves, as `check` says: asked at most once every `fresh`, by one
    /// caller at a time (the others wait for its answer).
    pub async fn database_ready<F>(&self, fresh: Duration, check: F) -> bool
    where
        F: Future<Output = bool>,
    {
        let mut last = self.0.readiness.lock().await;
        if let Some((at, ready)) = *last
            && at.elapsed() < fresh
        {
            return ready;
        }
        let ready = check.await;
        *last = Some((std::time::Instant::now(), ready));
        ready
    }
}

/// An open SSE stream or wait, counted (for the process and its caller) until dropped.
#[derive(Debug)]
pub struct Subscriber(AppState, String);

/// Why a stream or a wait is refused for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtLimit {
    Process,
    Caller,
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.0.0.metrics.sse_subscribers.dec();
        let mut by_caller = self.0.subscribers();
        if let Some(mine) = by_caller.get_mut(&self.1) {
            *mine -= 1;
            if *mine == 0 {
                by_caller.remove(&self.1);
            }
        }
    }
}
