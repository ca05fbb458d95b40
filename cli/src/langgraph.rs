//! `langgraph.json`, the official configuration of a project: its `graphs` (id →
//! `path.py:attr` or `module:attr`, or `./src/graph.ts:attr` for JavaScript) name the graphs that
//! workers execute with LangGraph, in the interpreter `--python` names (LangGraph.js, in the
//! Node.js `--node` names); the runners read `dependencies` and `env` themselves. Every other
//! key is honoured or refused at start-up by name, never ignored.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use mostrador_api::app::{HeaderFilter, RouteGroups, StoreTtl};
use mostrador_api::cors::ProjectCors;
use mostrador_queue::thread::Ttl;
use mostrador_worker::runner::{Isolation, Language};
use mostrador_worker::{AgentConfig, RunnerConfig, SandboxConfig};
use serde_json::Value;

use crate::App;

/// A project's graphs (Python and JavaScript), as `dev`, `api` and `worker` take them.
#[derive(Debug, Clone, Args)]
pub(crate) struct PythonArgs {
    #[command(flatten)]
    pub(crate) quota: crate::QuotaArgs,

    /// A `langgraph.json` whose graphs to serve (Python graphs, executed by the `langgraph`
    /// package of --python's environment; TypeScript and JavaScript graphs, by the project's
    /// LangGraph.js in --node), in place of the binary's example graphs.
    #[arg(long = "config", env = "MOSTRADOR_LANGGRAPH_CONFIG")]
    langgraph_config: Option<PathBuf>,

    /// With --config, serve the binary's example graphs (the retail app's) beside the project's.
    #[arg(long, env = "MOSTRADOR_EXAMPLE_GRAPHS")]
    example_graphs: bool,

    /// The Python interpreter that runs the graphs (the one with `langgraph` and the graphs'
    /// dependencies installed).
    #[arg(long, env = "MOSTRADOR_PYTHON", default_value = "python3")]
    python: PathBuf,

    /// The Node.js that runs the project's JavaScript graphs (`./src/graph.ts:graph`), with the
    /// LangGraph.js of the project's `node_modules`.
    #[arg(long, env = "MOSTRADOR_NODE", default_value = "node")]
    node: PathBuf,

    /// The address space each runner process may use, in MiB (its `RLIMIT_AS`): a run that
    /// needs more fails with `MemoryError`, retryably, and its process is replaced, instead of
    /// the pod running out of memory. None by default.
    #[arg(long, env = "MOSTRADOR_PYTHON_MEMORY_LIMIT_MIB", value_parser = clap::value_parser!(u64).range(256..))]
    python_memory_limit_mib: Option<u64>,

    /// Which runs may share a runner process: `shared` (any, as the official server runs them
    /// all in one process: the most runs per MiB), `tenant` (a process serves one tenant's runs,
    /// the thread's tenant or its owner where there is none, and never another's) or `run` (a
    /// process per run, ended with it). See docs/python-graphs.md for what each protects.
    #[arg(long, env = "MOSTRADOR_PYTHON_ISOLATION", default_value = "shared")]
    python_isolation: Isolation,

    /// How long a run may hold a shared runner's event loop (a blocking call in an async node,
    /// which the runs beside it wait for) before it fails and its process is replaced; 0: never.
    #[arg(long, env = "MOSTRADOR_PYTHON_BLOCKED_AFTER", default_value = "30s", value_parser = crate::duration::parse_duration)]
    python_blocked_after: std::time::Duration,

    /// Start each runner process cold (a new interpreter importing the graphs), not forked from
    /// a warm template that loaded them once: for a project whose import starts threads or binds
    /// an event loop, which a fork does not carry over.
    #[arg(long, env = "MOSTRADOR_PYTHON_NO_FORK")]
    python_no_fork: bool,

    /// Runner processes that share the runs (`shared`), or kept ready for the next tenant or
    /// run (`tenant`, `run`) [default: one per core].
    #[arg(long, env = "MOSTRADOR_PYTHON_PROCESSES", value_parser = clap::value_parser!(u64).range(1..=1024))]
    python_processes: Option<u64>,

    /// The most a thread's files (deep agents' files, kept by the worker) may take together, in
    /// MiB: a write past it is refused and the agent told why.
    #[arg(long, env = "MOSTRADOR_THREAD_FILES_LIMIT_MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    thread_files_limit_mib: u64,

    /// Runs deep agents' commands (`execute`) in a bubblewrap sandbox per command, with this
    /// `bwrap` binary (for example `/usr/bin/bwrap`); without it, agents cannot run commands.
    #[arg(long, env = "MOSTRADOR_SANDBOX_BWRAP")]
    sandbox_bwrap: Option<PathBuf>,

    /// The longest a sandboxed command may run (it asks for less with its own timeout).
    #[arg(long, env = "MOSTRADOR_SANDBOX_TIMEOUT", default_value = "120s", value_parser = crate::duration::parse_duration)]
    sandbox_timeout: std::time::Duration,

    /// CPU seconds of a sandboxed command.
    #[arg(long, env = "MOSTRADOR_SANDBOX_CPU_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    sandbox_cpu_seconds: u64,

    /// The address space of each process of a sandboxed command, in MiB.
    #[arg(long, env = "MOSTRADOR_SANDBOX_MEMORY_MIB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(64..))]
    sandbox_memory_mib: u64,

    /// Sandboxed commands running at once in a worker process; the others wait their turn.
    #[arg(long, env = "MOSTRADOR_SANDBOX_COMMANDS", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1024))]
    sandbox_commands: u64,

    /// Processes (and threads) the worker's user may have while a sandboxed command forks
    /// (`RLIMIT_NPROC`; counted with the worker's own, and not applied to root): a fork bomb
    /// stops there, not at the node's limit.
    #[arg(long, env = "MOSTRADOR_SANDBOX_PROCESSES", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(16..))]
    sandbox_processes: u64,

    /// Lets sandboxed commands reach the network (they have none by default).
    #[arg(long, env = "MOSTRADOR_SANDBOX_NETWORK")]
    sandbox_network: bool,

    /// Subagent delegations at once in one run (deepagents' `task` tool, through
    /// `mostrador.deepagents.SubagentLimit`); none by default.
    #[arg(long, env = "MOSTRADOR_SUBAGENTS_PER_RUN", value_parser = clap::value_parser!(u64).range(1..))]
    subagents_per_run: Option<u64>,

    /// Subagent delegations at once in all the runs of a worker process; none by default.
    #[arg(long, env = "MOSTRADOR_SUBAGENTS_PER_WORKER", value_parser = clap::value_parser!(u64).range(1..))]
    subagents_per_worker: Option<u64>,
}

impl PythonArgs {
    /// The Python graphs, if a `langgraph.json` is given.
    ///
    /// # Errors
    ///
    /// The file cannot be read, or names no graph.
    pub(crate) fn runners(&self) -> anyhow::Result<Vec<RunnerConfig>> {
        let Some(path) = &self.langgraph_config else {
            return Ok(Vec::new());
        };
        let project = read_project(path)?;
        let (javascript, python): (Vec<String>, Vec<String>) = project
            .graphs
            .into_keys()
            .partition(|id| project.javascript.contains(id));
        [
            (Language::Python, python),
            (Language::JavaScript, javascript),
        ]
        .into_iter()
        .filter(|(_, graphs)| !graphs.is_empty())
        .map(|(language, graphs)| self.runner(path, language, graphs))
        .collect()
    }

    /// The project's Python code beside its graphs (`auth.path`, `http.app`, `store.index`),
    /// run as its Python graphs are.
    pub(crate) fn python_code(&self) -> anyhow::Result<Option<RunnerConfig>> {
        self.code_in(Language::Python)
    }

    /// The project's code in `language` beside its graphs, run as its graphs in it are.
    fn code_in(&self, language: Language) -> anyhow::Result<Option<RunnerConfig>> {
        let Some(path) = &self.langgraph_config else {
            return Ok(None);
        };
        self.runner(path, language, Vec::new()).map(Some)
    }

    fn runner(
        &self,
        path: &Path,
        language: Language,
        graphs: Vec<String>,
    ) -> anyhow::Result<RunnerConfig> {
        // The runners start in its folder: they need its absolute path.
        let path = std::fs::canonicalize(path)?;
        Ok(RunnerConfig {
            language,
            program: match language {
                Language::Python => self.python.clone(),
                Language::JavaScript => self.node.clone(),
            },
            config: path,
            graphs,
            memory_limit_mib: self.python_memory_limit_mib,
            isolation: self.python_isolation,
            fork: !self.python_no_fork,
            blocked_after: Some(self.python_blocked_after).filter(|after| !after.is_zero()),
            processes: self
                .python_processes
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            agents: self.agents(),
        })
    }

    fn agents(&self) -> AgentConfig {
        let sandbox = self.sandbox_bwrap.clone().map(|bwrap| SandboxConfig {
            timeout: self.sandbox_timeout,
            cpu_seconds: self.sandbox_cpu_seconds,
            memory_mib: self.sandbox_memory_mib,
            network: self.sandbox_network,
            commands: usize::try_from(self.sandbox_commands).unwrap_or(usize::MAX),
            processes: self.sandbox_processes,
            ..SandboxConfig::new(bwrap)
        });
        let slots = |n: Option<u64>| n.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        AgentConfig {
            files_limit_bytes: i64::try_from(self.thread_files_limit_mib << 20).unwrap_or(i64::MAX),
            sandbox,
            subagents_per_run: slots(self.subagents_per_run),
            subagents_per_worker: slots(self.subagents_per_worker),
        }
    }

    /// The project's graphs' ids, of every language (none without a `langgraph.json`).
    pub(crate) fn graph_ids(&self) -> anyhow::Result<Vec<String>> {
        Ok(self
            .project()?
            .map(|project| project.graphs.into_keys().collect())
            .unwrap_or_default())
    }

    /// The project of the `langgraph.json`, if one is given.
    pub(crate) fn project(&self) -> anyhow::Result<Option<Project>> {
        self.langgraph_config
            .as_deref()
            .map(read_project)
            .transpose()
    }

    /// The graphs of the binary served beside the project's: none of its example app's (the
    /// retail graphs) unless asked for, so a project lists its own graphs only.
    pub(crate) fn beside(&self, graphs: App) -> App {
        if self.langgraph_config.is_some() && graphs.example && !self.example_graphs {
            App::NONE
        } else {
            graphs
        }
    }
}

/// What mostrador takes of a `langgraph.json`: its Python graphs (id, and the description its
/// assistant carries), once every key it sets has been checked to be one mostrador honours.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Project {
    /// Graph id → the description of `"graphs": {id: {"path", "description"}}`, if any.
    pub graphs: std::collections::BTreeMap<String, Option<String>>,
    /// The ids of its JavaScript graphs (`./src/graph.ts:graph`); the others are Python's.
    pub javascript: std::collections::BTreeSet<String>,
    /// `http.cors`: the api's CORS rules, in place of `--cors-allow-origins`.
    pub cors: Option<ProjectCors>,
    /// `http.configurable_headers`: request headers a run's `configurable` gets.
    pub configurable_headers: Option<HeaderFilter>,
    /// `checkpointer.ttl`: the time to live of threads created without one.
    pub thread_ttl: Option<Ttl>,
    /// `store.ttl`: the Store's defaults.
    pub store_ttl: StoreTtl,
    /// `http.disable_*`: route groups switched off.
    pub disabled_routes: RouteGroups,
    /// `http.disable_webhooks`: no run may name a webhook.
    pub disable_webhooks: bool,
    /// `http.mount_prefix`: every route below it.
    pub mount_prefix: Option<String>,
    /// `auth.path`: the project's own auth handlers (a `langgraph_sdk.Auth` object).
    pub auth_path: Option<String>,
    /// `auth.openapi`: the security they ask for, in `/openapi.json`.
    pub auth_openapi: Option<Value>,
    /// `http.app`: the project's own HTTP routes (a Starlette or FastAPI app).
    pub app_path: Option<String>,
    /// `http.enable_custom_route_auth`: its routes' callers named by the auth handlers.
    pub custom_route_auth: bool,
    /// `store.index`: the store's semantic index (its embedding function is the project's code).
    pub store_index: bool,
}

/// Keys that only shape a built image (`mostrador dockerfile` reads them): nothing at run time.
const BUILD_KEYS: &[&str] = &[
    "python_version",
    "api_version",
    "base_image",
    "image_distro",
    "pip_config_file",
    "pip_installer",
    "source",
    "dockerfile_lines",
    "keep_pkg_tools",
    "_INTERNAL_docker_tag",
    "project_root",
    "package",
    "node_version",
];

/// Keys the official server honours that mostrador does not yet, each with what to do instead.
/// A project that sets one is refused at start-up: it would otherwise run without what it says.
const REFUSED: &[(&str, &str)] = &[
    (
        "checkpointer.path",
        "mostrador keeps every checkpoint in its own fenced PostgreSQL checkpointer: remove the key",
    ),
    (
        "checkpointer.backend",
        "mostrador keeps every checkpoint in its own fenced PostgreSQL checkpointer: remove the key",
    ),
    (
        "checkpointer.serde",
        "the checkpointer's serializer cannot be configured in mostrador yet: remove the key",
    ),
    (
        "store.path",
        "mostrador keeps the store in PostgreSQL: remove the key",
    ),
    (
        "encryption",
        "at-rest encryption hooks do not run in mostrador: remove the key",
    ),
    (
        "priority",
        "run priority hooks do not run in mostrador: remove the key",
    ),
    (
        "webhooks",
        "webhook policy comes from --webhook-hosts (MOSTRADOR_WEBHOOK_HOSTS): remove the key",
    ),
    (
        "ui",
        "generative UI bundles are not served by mostrador: remove the key",
    ),
    (
        "ui_config",
        "generative UI bundles are not served by mostrador: remove the key",
    ),
];

/// Keys of `http` that need no work here: mostrador has no UI routes to switch off, and it logs no
/// request header. (The other `disable_*` switch route groups off.)
const HTTP_MOOT: &[&str] = &["disable_ui", "logging_headers"];

/// The `langgraph.json` at `path`, checked.
///
/// # Errors
///
/// The file cannot be read, names no graph, or sets a key mostrador does not honour.
pub(crate) fn read_project(path: &Path) -> anyhow::Result<Project> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("failed to read {}", path.display()))?;
    project(&text).with_context(|| format!("{} cannot be served", path.display()))
}

/// A `langgraph.json`'s text, checked.
pub(crate) fn project(text: &str) -> anyhow::Result<Project> {
    let config: Value = serde_json::from_str(text)?;
    let config = config.as_object().context("it is not a JSON object")?;
    let mut refused = Vec::new();
    let (mut cors, mut configurable_headers) = (None, None);
    let (mut thread_ttl_found, mut store_ttl_found) = (None, StoreTtl::default());
    let (mut disabled_routes, mut disable_webhooks) = (RouteGroups::default(), false);
    let (mut mount_prefix, mut auth_path, mut auth_openapi) = (None, None, None);
    let (mut app_path, mut custom_route_auth, mut store_index) = (None, false, false);
    for (key, value) in config {
        match key.as_str() {
            "graphs" | "dependencies" | "env" | "$schema" => {}
            key if BUILD_KEYS.contains(&key) => {}
            "http" | "store" | "checkpointer" | "auth" => {
                let Some(fields) = value.as_object() else {
                    if !value.is_null() {
                        refused.push(format!("{key}: must be an object"));
                    }
                    continue;
                };
                for (field, value) in fields {
                    if value.is_null() || (key == "http" && HTTP_MOOT.contains(&field.as_str())) {
                        continue;
                    }
                    if key == "http" && field == "cors" {
                        match cors_rules(value) {
                            Ok(rules) => cors = Some(rules),
                            Err(why) => refused.push(format!("http.cors: {why}")),
                        }
                        continue;
                    }
                    if key == "checkpointer" && field == "ttl" {
                        match thread_ttl(value) {
                            Ok(ttl) => thread_ttl_found = ttl,
                            Err(why) => refused.push(format!("checkpointer.ttl: {why}")),
                        }
                        continue;
                    }
                    if key == "store" && field == "ttl" {
                        match store_ttl(value) {
                            Ok(ttl) => store_ttl_found = ttl,
                            Err(why) => refused.push(format!("store.ttl: {why}")),
                        }
                        continue;
                    }
                    if key == "store" && field == "index" {
                        match check_store_index(value) {
                            Ok(()) => store_index = true,
                            Err(why) => refused.push(format!("store.index: {why}")),
                        }
                        continue;
                    }
                    if key == "http" && field.starts_with("disable_") {
                        let Some(off) = value.as_bool() else {
                            refused.push(format!("http.{field}: must be true or false"));
                            continue;
                        };
                        match field.as_str() {
                            "disable_assistants" => disabled_routes.assistants = off,
                            "disable_threads" => disabled_routes.threads = off,
                            "disable_runs" => disabled_routes.runs = off,
                            "disable_store" => disabled_routes.store = off,
                            "disable_meta" => disabled_routes.meta = off,
                            "disable_mcp" => disabled_routes.mcp = off,
                            "disable_a2a" => disabled_routes.a2a = off,
                            "disable_webhooks" => disable_webhooks = off,
                            _ => refused.push(format!(
                                "http.{field}: not a key the official server reads either"
                            )),
                        }
                        continue;
                    }
                    if key == "http" && field == "mount_prefix" {
                        match value.as_str() {
                            Some(prefix)
                                if prefix.len() > 1
                                    && prefix.starts_with('/')
                                    && !prefix.ends_with('/')
                                    && !prefix.contains(['{', '}', '*']) =>
                            {
                                mount_prefix = Some(prefix.to_owned());
                            }
                            _ => refused.push(
                                "http.mount_prefix: must start with '/' and not end with one \
                                 (/api, /v1, /api/v1)"
                                    .to_owned(),
                            ),
                        }
                        continue;
                    }
                    // The project's own code: a Python object, as a graph is named.
                    if (key.as_str(), field.as_str()) == ("http", "app")
                        || (key.as_str(), field.as_str()) == ("auth", "path")
                    {
                        let found = match value.as_str() {
                            Some(path) if path.contains(':') => Some(path.to_owned()),
                            _ => {
                                refused.push(format!(
                                    "{key}.{field}: must be './file.py:name' or 'module:name'"
                                ));
                                None
                            }
                        };
                        if key == "http" {
                            app_path = found;
                        } else {
                            auth_path = found;
                        }
                        continue;
                    }
                    if key == "http" && field == "enable_custom_route_auth" && value.is_boolean() {
                        custom_route_auth = value == &Value::Bool(true);
                        continue;
                    }
                    // Middleware of the app is refused when it starts (it would wrap mostrador's
                    // routes): the order has nothing to order.
                    if key == "http" && field == "middleware_order" {
                        if !matches!(value.as_str(), Some("auth_first" | "middleware_first")) {
                            refused.push(
                                "http.middleware_order: must be auth_first or middleware_first"
                                    .to_owned(),
                            );
                        }
                        continue;
                    }
                    if key == "auth" && field == "openapi" {
                        if value.is_object() {
                            auth_openapi = Some(value.clone());
                        } else {
                            refused.push("auth.openapi: must be an object".to_owned());
                        }
                        continue;
                    }
                    if key == "auth" && field == "allow_langsmith_api_keys" && value.is_boolean() {
                        if value == &Value::Bool(true) {
                            refused.push(
                                "auth.allow_langsmith_api_keys: mostrador does not verify \
                                 LangSmith API keys: remove the key, and let the handlers \
                                 authenticate every request"
                                    .to_owned(),
                            );
                        }
                        continue;
                    }
                    // Studio's own sign-in (LangSmith's) is not served here: nothing to disable.
                    if key == "auth" && field == "disable_studio_auth" && value.is_boolean() {
                        continue;
                    }
                    if key == "http" && field == "configurable_headers" {
                        match header_filter(value) {
                            Ok(filter) => configurable_headers = Some(filter),
                            Err(why) => refused.push(format!("http.configurable_headers: {why}")),
                        }
                        continue;
                    }
                    let name = format!("{key}.{field}");
                    refused.push(if REFUSED.iter().any(|(refused, _)| *refused == name) {
                        refusal(&name)
                    } else {
                        format!("{name}: not a key the official server reads either")
                    });
                }
            }
            key if REFUSED.iter().any(|(refused, _)| *refused == key) => {
                if !value.is_null() {
                    refused.push(refusal(key));
                }
            }
            key => refused.push(format!(
                "{key}: not a key of langgraph.json (a typo?); remove it"
            )),
        }
    }
    let graphs = config
        .get("graphs")
        .and_then(Value::as_object)
        .context("it has no \"graphs\" object")?;
    anyhow::ensure!(!graphs.is_empty(), "its \"graphs\" object names no graph");
    let mut found = std::collections::BTreeMap::new();
    let mut javascript = std::collections::BTreeSet::new();
    for (id, spec) in graphs {
        let path = spec
            .as_str()
            .or_else(|| spec.get("path").and_then(Value::as_str));
        let Some((location, _attribute)) = path.and_then(|path| path.rsplit_once(':')) else {
            refused.push(format!(
                "graphs.{id}: must be \"./file.py:attribute\" or \"package.module:attribute\""
            ));
            continue;
        };
        if is_javascript(location) {
            javascript.insert(id.clone());
        }
        let description = spec
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned);
        found.insert(id.clone(), description);
    }
    if !refused.is_empty() {
        anyhow::bail!(
            "it sets what mostrador does not honour:\n  {}",
            refused.join("\n  ")
        );
    }
    Ok(Project {
        graphs: found,
        javascript,
        cors,
        configurable_headers,
        thread_ttl: thread_ttl_found,
        store_ttl: store_ttl_found,
        disabled_routes,
        disable_webhooks,
        mount_prefix,
        auth_path,
        auth_openapi,
        app_path,
        custom_route_auth,
        store_index,
    })
}

/// A graph's or code's file is JavaScript (or TypeScript), as the official CLI tells them apart.
fn is_javascript(path: &str) -> bool {
    let file = path.split(':').next().unwrap_or(path);
    [".ts", ".mts", ".cts", ".js", ".mjs", ".cjs", ".tsx", ".jsx"]
        .iter()
        .any(|ext| file.ends_with(ext))
}

/// A `store.index` mostrador serves as the official server does: `embed` (a function's path or a
/// `provider:model`), `dims`, `fields`; the distance is cosine. Its search is exact, so the
/// approximate index's tuning (`ann_index_config`) has nothing to tune.
fn check_store_index(value: &Value) -> Result<(), String> {
    let index = value.as_object().ok_or("must be an object")?;
    for (field, value) in index {
        match field.as_str() {
            "embed" if value.as_str().is_some_and(is_javascript) => {
                return Err(
                    "embed names a JavaScript function, which mostrador does not run: name a \
                     'provider:model' (openai:text-embedding-3-small) or a Python function \
                     ('./file.py:function'), which embed for JavaScript graphs too"
                        .into(),
                );
            }
            "embed" if value.as_str().is_some_and(|embed| embed.contains(':')) => {}
            "embed" => {
                return Err(
                    "embed must be './file.py:function' or 'provider:model' (openai:text-embedding-3-small)"
                        .into(),
                );
            }
            "dims"
                if value
                    .as_u64()
                    .is_some_and(|dims| (1..=16_384).contains(&dims)) => {}
            "dims" => return Err("dims must be a whole number from 1 to 16384".into()),
            "fields"
                if value
                    .as_array()
                    .is_some_and(|paths| paths.iter().all(Value::is_string)) => {}
            "fields" => return Err("fields must be a list of paths (\"$\", \"text\", ...)".into()),
            "distance_type" if value == "cosine" => {}
            "distance_type" => {
                return Err(format!(
                    "distance_type {value}: mostrador ranks by cosine similarity only"
                ));
            }
            "ann_index_config" => {}
            other => return Err(format!("{other}: not a key of an index")),
        }
    }
    if !index.contains_key("embed") {
        return Err("it names no embedding function (embed)".into());
    }
    Ok(())
}

/// How many helper processes serve a project's own code: two, so one that dies (or is
/// restarted) leaves the other answering.
const HELPER_PROCESSES: usize = 2;

/// The project's own code for the api (`auth.path`, `http.app`, `store.index`'s embedding
/// function), started in helper processes and loaded: none without any of these keys. Its handlers decide who may do what (a policy file beside
/// them is refused); its app's routes come before mostrador's.
///
/// # Errors
///
/// `--policy` beside `auth.path`, code that could not be loaded, or an app mostrador cannot serve
/// as the official server would (middleware around every route, WebSocket routes).
pub(crate) async fn project_code(
    python: &PythonArgs,
    policy_set: bool,
    config: &mut mostrador_api::ApiConfig,
) -> anyhow::Result<()> {
    let Some(project) = python.project()? else {
        return Ok(());
    };
    if project.auth_path.is_none() && project.app_path.is_none() && !project.store_index {
        return Ok(());
    }
    // JavaScript `auth.path` and `http.app` are answered by Node.js helpers (`api.mjs`), Python
    // ones (and `store.index`'s embedding function) by Python helpers: one kind per project.
    let paths = [project.auth_path.as_deref(), project.app_path.as_deref()];
    let language = if paths.iter().flatten().any(|path| is_javascript(path)) {
        anyhow::ensure!(
            paths.iter().flatten().all(|path| is_javascript(path)) && !project.store_index,
            "auth.path, http.app and store.index mix JavaScript and Python: mostrador answers a \
             project's own code in one language"
        );
        Language::JavaScript
    } else {
        Language::Python
    };
    let Some(helper_config) = python.code_in(language)? else {
        return Ok(());
    };
    anyhow::ensure!(
        project.auth_path.is_none() || !policy_set,
        "the project's auth handlers (auth.path) decide who may do what: remove --policy \
         (MOSTRADOR_POLICY), or auth.path"
    );
    let processes =
        std::sync::Arc::new(mostrador_worker::runner::ApiProcesses::new(helper_config)?);
    let spawn: mostrador_api::project_code::Spawn =
        std::sync::Arc::new(move || processes.command());
    let code = mostrador_api::project_code::ProjectCode::start(spawn, HELPER_PROCESSES)
        .await
        .map_err(|why| {
            anyhow::anyhow!("the project's code (auth.path, http.app, store.index): {why}")
        })?;
    if project.store_index {
        config.store_index = mostrador_api::store_index::StoreIndex::of(&code);
        anyhow::ensure!(
            config.store_index.is_some(),
            "store.index: the helper processes loaded no embedding function"
        );
    }
    if let Some(auth_path) = &project.auth_path {
        let auth = mostrador_api::custom_auth::CustomAuth::of(&code);
        let unserved: Vec<&str> = auth
            .resources()
            .into_iter()
            .filter(|resource| !mostrador_api::custom_auth::SERVED.contains(resource))
            .collect();
        anyhow::ensure!(
            unserved.is_empty(),
            "auth.path {auth_path}: it has handlers for {unserved:?}, which mostrador does not \
             ask (it asks those of {:?}): they would not run",
            mostrador_api::custom_auth::SERVED
        );
        tracing::info!(auth_path, resources = ?auth.resources(), "the project's auth handlers decide who may do what");
        config.custom_auth = Some(auth);
    }
    if let Some(app_path) = &project.app_path {
        let ready = code.ready();
        anyhow::ensure!(
            ready.middleware.is_empty(),
            "http.app {app_path}: its middleware ({}) would wrap every route of the server, \
             mostrador's too, which mostrador does not run through Python: move it into the \
             app's routes (CORS: http.cors)",
            ready.middleware.join(", ")
        );
        anyhow::ensure!(
            ready.websockets.is_empty(),
            "http.app {app_path}: mostrador does not serve WebSocket routes ({})",
            ready.websockets.join(", ")
        );
        // The official JS server authenticates every route of the app when the project has auth.
        let authenticated = match language {
            Language::JavaScript => project.auth_path.is_some(),
            Language::Python => project.custom_route_auth,
        };
        let routes = mostrador_api::custom_routes::CustomRoutes::of(&code, authenticated)
            .map_err(|why| anyhow::anyhow!("http.app {app_path}: {why}"))?;
        tracing::info!(
            app_path,
            routes = ready.routes.as_ref().map_or(0, Vec::len),
            "the project's app serves its routes"
        );
        config.custom_routes = routes;
    }
    Ok(())
}

impl Project {
    /// What the api takes of it: the descriptions of the graphs' assistants, CORS (in place of
    /// `cors`, from `--cors-allow-origins`) and the headers runs get.
    pub(crate) fn configure(project: Option<Self>, config: &mut mostrador_api::ApiConfig) {
        let Some(project) = project else {
            return;
        };
        config.graph_descriptions = project
            .graphs
            .into_iter()
            .filter_map(|(id, description)| Some((id, description?)))
            .collect();
        if let Some(rules) = project.cors {
            config.cors = mostrador_api::cors::Cors::Project(rules);
        }
        config.configurable_headers = project.configurable_headers;
        config.default_thread_ttl = project.thread_ttl;
        config.store_ttl = project.store_ttl;
        config.disabled_routes = project.disabled_routes;
        config.mount_prefix = project.mount_prefix;
        config.auth_openapi = project.auth_openapi;
        if project.disable_webhooks {
            config.webhook_hosts = mostrador_api::webhooks::WebhookHosts::default();
        }
    }
}

/// `http.cors`, with Starlette's defaults for what it leaves out.
fn cors_rules(value: &Value) -> Result<ProjectCors, String> {
    let fields = value.as_object().ok_or("must be an object")?;
    let mut rules = ProjectCors::default();
    for (field, value) in fields {
        let list = || strings(value).ok_or(format!("{field} must be a list of strings"));
        match field.as_str() {
            "allow_origins" => rules.allow_origins = list()?,
            "allow_methods" => rules.allow_methods = list()?,
            "allow_headers" => rules.allow_headers = list()?,
            "expose_headers" => rules.expose_headers = list()?,
            "allow_origin_regex" => {
                rules.allow_origin_regex = match value {
                    Value::Null => None,
                    Value::String(pattern) => Some(pattern.clone()),
                    _ => return Err("allow_origin_regex must be a string".into()),
                };
            }
            "allow_credentials" => {
                rules.allow_credentials = value
                    .as_bool()
                    .ok_or("allow_credentials must be true or false")?;
            }
            "max_age" => {
                rules.max_age = value
                    .as_u64()
                    .ok_or("max_age must be a number of seconds")?;
            }
            other => return Err(format!("{other} is not a CORS setting")),
        }
    }
    rules
        .origin_regex()
        .map_err(|err| format!("allow_origin_regex does not compile: {err}"))?;
    Ok(rules)
}

/// `checkpointer.ttl`: `default_ttl` (minutes) and `strategy` (`delete` or `keep_latest`) give
/// threads created without a time to live theirs; `sweep_interval_minutes` and `sweep_limit` are
/// the workers' (every worker sweeps at its `--sweep-interval`, a bounded batch at a time).
fn thread_ttl(value: &Value) -> Result<Option<Ttl>, String> {
    let fields = value.as_object().ok_or("must be an object")?;
    let (mut minutes, mut strategy) = (None, None);
    for (field, value) in fields {
        match (field.as_str(), value) {
            (_, Value::Null) => {}
            ("strategy", Value::String(name)) => strategy = Some(name.as_str()),
            ("default_ttl", value) => {
                minutes = Some(
                    value
                        .as_f64()
                        .ok_or("default_ttl must be a number of minutes")?,
                );
            }
            ("sweep_interval_minutes" | "sweep_limit", value) if value.is_number() => {}
            (other, _) => return Err(format!("{other} is not a thread time-to-live setting")),
        }
    }
    match minutes {
        None if strategy.is_none_or(|name| matches!(name, "delete" | "keep_latest")) => Ok(None),
        None => Err("strategy must be delete or keep_latest".into()),
        Some(minutes) => Ttl::new(minutes, strategy).map(Some).ok_or_else(|| {
            "default_ttl must be minutes above 0 and strategy delete or keep_latest".into()
        }),
    }
}

/// `store.ttl`: `default_ttl` (minutes) of items put without one, `refresh_on_read`;
/// `sweep_interval_minutes` is the workers' (they sweep at their `--sweep-interval`).
fn store_ttl(value: &Value) -> Result<StoreTtl, String> {
    let fields = value.as_object().ok_or("must be an object")?;
    let mut ttl = StoreTtl::default();
    for (field, value) in fields {
        match (field.as_str(), value) {
            (_, Value::Null) => {}
            ("default_ttl", value) => {
                ttl.default_minutes = Some(
                    value
                        .as_f64()
                        .filter(|minutes| *minutes > 0.0)
                        .ok_or("default_ttl must be a number of minutes above 0")?,
                );
            }
            ("refresh_on_read", Value::Bool(refresh)) => ttl.refresh_on_read = *refresh,
            ("refresh_on_read", _) => return Err("refresh_on_read must be true or false".into()),
            ("sweep_interval_minutes", value) if value.is_number() => {}
            (other, _) => return Err(format!("{other} is not a store time-to-live setting")),
        }
    }
    Ok(ttl)
}

/// `http.configurable_headers`: `includes` and `excludes` (or `include`, `exclude`).
fn header_filter(value: &Value) -> Result<HeaderFilter, String> {
    let fields = value.as_object().ok_or("must be an object")?;
    let mut filter = HeaderFilter::default();
    for (field, value) in fields {
        let list = strings(value).ok_or(format!("{field} must be a list of strings"))?;
        match field.as_str() {
            "includes" | "include" => filter.includes = list,
            "excludes" | "exclude" => filter.excludes = list,
            other => return Err(format!("{other} is not includes or excludes")),
        }
    }
    Ok(filter)
}

/// A JSON list of strings (null: none).
fn strings(value: &Value) -> Option<Vec<String>> {
    match value {
        Value::Null => Some(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect(),
        _ => None,
    }
}

fn refusal(name: &str) -> String {
    let (_, what) = REFUSED
        .iter()
        .find(|(refused, _)| *refused == name)
        .expect("a refused key has its message");
    format!("{name}: {what}")
}

#[cfg(test)]
mod tests;

/// The project's embedding function (`store.index`) for the Rust nodes a worker runs (a Python
/// graph's runner embeds its own): the api's helper processes of `mostrador dev`, or, in
/// `mostrador worker`, one of its own, started when a node first needs it.
struct WorkerEmbed {
    spawn: Option<mostrador_api::project_code::Spawn>,
    index: tokio::sync::OnceCell<mostrador_api::store_index::StoreIndex>,
}

impl WorkerEmbed {
    async fn index(&self) -> Result<&mostrador_api::store_index::StoreIndex, String> {
        self.index
            .get_or_try_init(|| async {
                let spawn = self.spawn.clone().ok_or("no helper process to start")?;
                let code = mostrador_api::project_code::ProjectCode::start(spawn, 1).await?;
                mostrador_api::store_index::StoreIndex::of(&code)
                    .ok_or_else(|| "the helper process loaded no embedding function".to_owned())
            })
            .await
    }
}

impl mostrador_worker::store::Embed for WorkerEmbed {
    fn documents<'a>(
        &'a self,
        value: &'a Value,
        index: &'a Value,
    ) -> mostrador_worker::store::EmbedFuture<'a, Vec<mostrador_queue::data::store::Embedded>> {
        Box::pin(async move {
            let embedded = self.index().await?.embed(value, index).await;
            embedded.map_err(|err| err.detail)
        })
    }

    fn query<'a>(&'a self, query: &'a str) -> mostrador_worker::store::EmbedFuture<'a, Vec<f32>> {
        Box::pin(async move {
            let vector = self.index().await?.query(query).await;
            vector.map_err(|err| err.detail)
        })
    }
}

/// Gives this process's worker the project's embedding function, if the project has a
/// `store.index`, for what Rust nodes and JavaScript graphs put and search: `shared`, the api's (`mostrador dev`), or a helper process of the
/// worker's own, started when first needed.
///
/// # Errors
///
/// The helper's files could not be written.
pub(crate) fn embed_in_the_worker(
    python: &PythonArgs,
    shared: Option<mostrador_api::store_index::StoreIndex>,
) -> anyhow::Result<()> {
    let (Some(project), Some(python_config)) = (python.project()?, python.python_code()?) else {
        return Ok(());
    };
    if !project.store_index {
        return Ok(());
    }
    let embed = match shared {
        Some(index) => WorkerEmbed {
            spawn: None,
            index: tokio::sync::OnceCell::new_with(Some(index)),
        },
        None => {
            let processes =
                std::sync::Arc::new(mostrador_worker::runner::ApiProcesses::new(python_config)?);
            WorkerEmbed {
                spawn: Some(std::sync::Arc::new(move || processes.command())),
                index: tokio::sync::OnceCell::new(),
            }
        }
    };
    mostrador_worker::store::set_embed(Box::new(embed));
    Ok(())
}
