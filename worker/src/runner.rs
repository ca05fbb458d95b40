//! The runner processes of a project's graphs, embedded in the binary: LangGraph's own engine,
//! many runs at once per process, and the protocol spoken with them. Python graphs run in
//! `python/mostrador_runner/` (asyncio tasks), JavaScript graphs in `js/runner.mjs` (tasks of
//! Node's event loop, with the project's own LangGraph.js); both speak the same protocol, and a
//! worker keeps one pool of runners per language.
//!
//! The worker keeps everything around the engine: the claim, the lease, events, drain, cancel and
//! every database write. A runner's checkpointer asks the worker over the process's pipe, and the
//! worker executes each request with the run's [`Saver`](mostrador_queue::state::saver::Saver)
//! ([`checkpointer`]), fenced by the run's lease. Every message of a run carries its number in
//! the process (`"run"`), so the runs of one process share its pipe: one task per process reads
//! its messages and routes each to its run's [`RunLink`] ([`process`]: a process, the runs it
//! hosts, the warm template; here, the pool that places runs and starts processes).
//!
//! Which runs share a process is the operator's choice ([`Isolation`]): any (`shared`, the
//! official server's model), one tenant's (`tenant`), or one run's (`run`). An exception in user
//! code ends its run `error` (as on the official server); a process that dies (a segfault, memory
//! exhaustion, a kill) fails the runs it hosted retryably, so their next attempts resume from
//! their last checkpoints. A cancel that the runner does not honour within [`CANCEL_GRACE`] (a
//! node blocking its event loop, or blocked in C code) kills its process.

pub mod checkpointer;
mod process;
pub mod protocol;

use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use mostrador_queue::state::saver::Saver;
use mostrador_queue::{ClaimedRun, Error as QueueError};
use nix::sys::socket::{ControlMessage, MsgFlags};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use uuid::Uuid;

use crate::services::{AgentConfig, Services};
pub use process::RunLink;
use process::{Process, Readiness, Template};
use protocol::{FromRunner, ToRunner};

/// The runner (`python/`: the `mostrador_runner` package and `runner.py`, which starts it) and what
/// the graphs may import of mostrador (`import mostrador`), written to a folder of their own when
/// a worker starts.
const PYTHON_FILES: [(&str, &str); 22] = [
    ("runner.py", include_str!("../python/runner.py")),
    (
        "mostrador_runner/__init__.py",
        include_str!("../python/mostrador_runner/__init__.py"),
    ),
    (
        "mostrador_runner/api.py",
        include_str!("../python/mostrador_runner/api.py"),
    ),
    (
        "mostrador_runner/auth.py",
        include_str!("../python/mostrador_runner/auth.py"),
    ),
    (
        "mostrador_runner/checkpointer.py",
        include_str!("../python/mostrador_runner/checkpointer.py"),
    ),
    (
        "mostrador_runner/config.py",
        include_str!("../python/mostrador_runner/config.py"),
    ),
    (
        "mostrador_runner/describe.py",
        include_str!("../python/mostrador_runner/describe.py"),
    ),
    (
        "mostrador_runner/encoding.py",
        include_str!("../python/mostrador_runner/encoding.py"),
    ),
    (
        "mostrador_runner/index.py",
        include_str!("../python/mostrador_runner/index.py"),
    ),
    (
        "mostrador_runner/main.py",
        include_str!("../python/mostrador_runner/main.py"),
    ),
    (
        "mostrador_runner/project.py",
        include_str!("../python/mostrador_runner/project.py"),
    ),
    (
        "mostrador_runner/protocol.py",
        include_str!("../python/mostrador_runner/protocol.py"),
    ),
    (
        "mostrador_runner/routes.py",
        include_str!("../python/mostrador_runner/routes.py"),
    ),
    (
        "mostrador_runner/run.py",
        include_str!("../python/mostrador_runner/run.py"),
    ),
    (
        "mostrador_runner/spans.py",
        include_str!("../python/mostrador_runner/spans.py"),
    ),
    (
        "mostrador_runner/state.py",
        include_str!("../python/mostrador_runner/state.py"),
    ),
    (
        "mostrador_runner/thread_events.py",
        include_str!("../python/mostrador_runner/thread_events.py"),
    ),
    (
        "mostrador_runner/user.py",
        include_str!("../python/mostrador_runner/user.py"),
    ),
    (
        "mostrador_runner/streams.py",
        include_str!("../python/mostrador_runner/streams.py"),
    ),
    (
        "mostrador_runner/store.py",
        include_str!("../python/mostrador_runner/store.py"),
    ),
    (
        "mostrador/__init__.py",
        include_str!("../python/mostrador/__init__.py"),
    ),
    (
        "mostrador/deepagents.py",
        include_str!("../python/mostrador/deepagents.py"),
    ),
];

/// The JavaScript runner (`js/`: `runner.mjs` and its modules), which runs a project's JavaScript
/// graphs with the project's own LangGraph.js, written beside the Python one.
const JS_FILES: [(&str, &str); 11] = [
    ("runner.mjs", include_str!("../js/runner.mjs")),
    ("api.mjs", include_str!("../js/api.mjs")),
    ("channel.mjs", include_str!("../js/channel.mjs")),
    ("describe.mjs", include_str!("../js/describe.mjs")),
    ("json.mjs", include_str!("../js/json.mjs")),
    ("project.mjs", include_str!("../js/project.mjs")),
    ("run.mjs", include_str!("../js/run.mjs")),
    ("saver.mjs", include_str!("../js/saver.mjs")),
    ("spans.mjs", include_str!("../js/spans.mjs")),
    ("store.mjs", include_str!("../js/store.mjs")),
    ("watch.mjs", include_str!("../js/watch.mjs")),
];

/// How long a runner has to stop a cancelled run before its process is killed.
pub const CANCEL_GRACE: Duration = Duration::from_secs(1);

/// How long a new runner may take to import the graphs.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(120);

/// Which runs may share a runner process (`--python-isolation`). Graph code is the operator's:
/// the levels bound what code that misbehaves (a compromised dependency, a tool that evaluates
/// what a model wrote) can reach of other runs, at the cost of memory and start-ups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Any runs in any process, as the official server runs them all in one: the density of
    /// asyncio, and a process's crash fails (retryably) every run it hosted.
    #[default]
    Shared,
    /// A process serves one tenant's runs (the thread's tenant, or its owner where there is
    /// none), never another's: what one tenant's run leaves in a process meets only that
    /// tenant's runs.
    Tenant,
    /// A process serves one run and ends with it.
    Run,
}

impl FromStr for Isolation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "shared" => Ok(Self::Shared),
            "tenant" => Ok(Self::Tenant),
            "run" => Ok(Self::Run),
            other => Err(format!(
                "{other:?} is not an isolation level: shared, tenant or run"
            )),
        }
    }
}

/// The language of a project's graphs, and so of the runner that executes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// LangGraph, in the interpreter of the environment that has it (`runner.py`).
    Python,
    /// LangGraph.js, from the project's `node_modules`, in Node.js (`runner.mjs`).
    JavaScript,
}

impl Language {
    /// What runs the graphs, as messages name it.
    pub fn interpreter(self) -> &'static str {
        match self {
            Self::Python => "Python",
            Self::JavaScript => "Node.js",
        }
    }

    /// The runner's name, as a run's error names it (`PythonRunnerDied`).
    pub fn runner(self) -> &'static str {
        match self {
            Self::Python => "PythonRunner",
            Self::JavaScript => "NodeRunner",
        }
    }
}

/// Where a worker's graphs of one language come from, and how their runners are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerConfig {
    pub language: Language,
    /// The interpreter: Python's, of the environment that has `langgraph` and the graphs'
    /// dependencies; or Node.js.
    pub program: PathBuf,
    /// The `langgraph.json` that names the graphs.
    pub config: PathBuf,
    /// Its graph ids.
    pub graphs: Vec<String>,
    /// The memory of each runner process, in MiB: Python's address space (`RLIMIT_AS`, set by the
    /// runner before it loads any graph), Node's heap (`--max-old-space-size`).
    pub memory_limit_mib: Option<u64>,
    /// Which runs may share a process.
    pub isolation: Isolation,
    /// How long a run may hold a shared process's event loop (a blocking call in an async node,
    /// which every run of the process waits for) before it fails and the process is replaced.
    pub blocked_after: Option<Duration>,
    /// Runners fork from a warm template (a process that loaded the project once), not from a
    /// cold interpreter: off for a project whose import starts threads or binds an event loop,
    /// which a fork does not carry over. Node.js runners always start cold.
    pub fork: bool,
    /// How many processes serve shared runs, and how many idle ones are kept ready for the next
    /// tenant or run under the other levels (by default, one per core).
    pub processes: Option<usize>,
    /// What deep agents may ask of the worker: their files, a sandbox, subagent slots.
    pub agents: AgentConfig,
}

/// The runner processes of a worker, and where its runs go.
#[derive(Debug)]
pub struct Runners {
    pool: Arc<Pool>,
    agents: Arc<AgentConfig>,
    /// The worker's subagent slots, shared by all its runs.
    subagent_slots: Option<Arc<Semaphore>>,
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
    #[error("the runner could not start: {0}")]
    Start(String),
    #[error("the runner exited")]
    Exited,
    #[error("the runner broke the protocol: {0}")]
    Protocol(String),
}

impl Runners {
    /// Runners for a worker that executes up to `max_runs` runs at once.
    ///
    /// # Errors
    ///
    /// The runner's script could not be written.
    pub fn new(mut config: RunnerConfig, max_runs: usize) -> std::io::Result<Self> {
        let script = write_script(config.language)?;
        // Runners start in the langgraph.json's folder: a relative path (not a bare name, which
        // PATH resolves) is the caller's, relative to where the worker started.
        if config.program.components().count() > 1 && config.program.is_relative() {
            config.program = std::path::absolute(&config.program)?;
        }
        // A Node.js process cannot be forked into runners.
        config.fork &= config.language == Language::Python;
        // Runners are children of this process, and may run code no one reviewed: they must not
        // read its memory or its environment (`/proc/<worker>/environ`), which hold the
        // platform's secrets. A process that is not dumpable is readable only with
        // CAP_SYS_PTRACE, which a runner started by root is not given either.
        if let Err(err) = nix::sys::prctl::set_dumpable(false) {
            tracing::warn!(error = %err, "the worker could not make itself undumpable");
        }
        let unprivileged = unprivileged();
        let processes = config
            .processes
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
            .max(1);
        Ok(Self {
            agents: Arc::new(config.agents.clone()),
            subagent_slots: config
                .agents
                .subagents_per_worker
                .map(|n| Arc::new(Semaphore::new(n))),
            pool: Arc::new(Pool {
                per_process: max_runs.div_ceil(processes).max(1),
                processes,
                config,
                script,
                next_run: AtomicU64::new(1),
                unprivileged,
                template: Mutex::default(),
                state: Mutex::default(),
            }),
        })
    }

    /// The services of a run of these graphs (`saver`: its checkpointer, fenced by its lease).
    pub fn services(&self, saver: Saver) -> Services {
        Services::new(saver, self.agents.clone(), self.subagent_slots.clone())
    }

    pub fn language(&self) -> Language {
        self.pool.config.language
    }

    pub fn serves(&self, graph_id: &str) -> bool {
        self.pool.config.graphs.iter().any(|g| g == graph_id)
    }

    /// Starts the processes runs will find ready, and waits until they are.
    ///
    /// # Errors
    ///
    /// A process could not start, or did not get ready.
    pub async fn warm(&self) -> Result<(), RunnerError> {
        self.pool.template_ready().await;
        let started: Vec<_> = {
            let mut state = self.pool.lock();
            self.pool.replenish(&mut state);
            state.processes.clone()
        };
        for process in started {
            process.until_ready().await?;
        }
        Ok(())
    }

    /// A place for `claimed` in a process its isolation allows, once that process is ready.
    ///
    /// # Errors
    ///
    /// No process could start, or it did not get ready.
    pub async fn place(&self, claimed: &ClaimedRun) -> Result<RunLink, RunnerError> {
        let key = match self.pool.config.isolation {
            Isolation::Shared => Key::Shared,
            Isolation::Tenant => Key::Tenant(claimed.tenant.clone().unwrap_or_default()),
            Isolation::Run => Key::Run(claimed.run_id().0),
        };
        let link = self.pool.attach(key);
        link.process.until_ready().await?;
        Ok(link)
    }

    /// What LangGraph says of each graph (schemas, drawings, subgraphs), asked of a runner and
    /// recorded for the api, which runs no Python. Under isolation, in a process of its own that
    /// serves no run after (describing runs the project's factories). With `types`, a JavaScript
    /// runner also reads the TypeScript types of `Annotation` states (seconds of work, asked once
    /// the worker serves, recorded over the first description).
    ///
    /// # Errors
    ///
    /// No runner could start, or it failed while describing; a database failure.
    pub async fn describe(
        &self,
        pool: &mostrador_queue::PgPool,
        types: bool,
    ) -> Result<(), DescribeError> {
        let key = match self.pool.config.isolation {
            Isolation::Shared => Key::Shared,
            Isolation::Tenant | Isolation::Run => Key::Run(Uuid::now_v7()),
        };
        let link = self.pool.attach(key);
        link.process.until_ready().await?;
        let (sender, receiver) = oneshot::channel();
        link.process.lock().described = Some(sender);
        link.process.write(&ToRunner::Describe { types }).await?;
        let graphs = tokio::time::timeout(STARTUP_TIMEOUT, receiver)
            .await
            .map_err(|_| RunnerError::Start("describing the graphs took too long".into()))?
            .map_err(|_| RunnerError::Exited)?;
        drop(link);
        for (graph_id, description) in &graphs {
            mostrador_queue::data::graphs::record(pool, graph_id, description).await?;
        }
        Ok(())
    }
}

/// Who a process serves.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Shared,
    Tenant(String),
    Run(Uuid),
}

#[derive(Debug)]
struct Pool {
    config: RunnerConfig,
    script: PathBuf,
    /// Shared processes, and idle ones kept for the other levels.
    processes: usize,
    /// The most runs a shared or tenant's process hosts at once before another is started.
    per_process: usize,
    next_run: AtomicU64,
    /// `setpriv`, to start runners without capabilities when the worker runs as root.
    unprivileged: Option<PathBuf>,
    /// The warm template new runners fork from (`RunnerConfig::fork`).
    template: Mutex<Option<Arc<Template>>>,
    state: Mutex<PoolState>,
}

#[derive(Debug, Default)]
struct PoolState {
    processes: Vec<Arc<Process>>,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state
            .lock()
            .expect("runner pool lock is never poisoned")
    }

    /// A run's place: the least busy process serving `key` with room, else a process that never
    /// served anyone (it serves `key` from now on), else a new one.
    fn attach(self: &Arc<Self>, key: Key) -> RunLink {
        let mut state = self.lock();
        state.processes.retain(|process| !process.lock().gone);
        // Ready processes first, the least busy of them.
        let order = |process: &&Arc<Process>| (!process.is_ready(), process.lock().routes.len());
        let serving = state
            .processes
            .iter()
            .filter(|process| {
                let hosting = process.lock();
                hosting.key.as_ref() == Some(&key)
                    && !hosting.retiring
                    && hosting.routes.len() < self.per_process
            })
            .min_by_key(order)
            .cloned();
        let fresh = || {
            let fresh = state
                .processes
                .iter()
                .filter(|process| process.lock().key.is_none())
                .min_by_key(order)
                .cloned()?;
            fresh.lock().key = Some(key.clone());
            Some(fresh)
        };
        let process = match serving.or_else(fresh) {
            Some(process) => process,
            None => {
                let process = self.spawn(Some(key));
                state.processes.push(Arc::clone(&process));
                process
            }
        };
        let run = self.next_run.fetch_add(1, Ordering::Relaxed);
        let (sender, messages) = mpsc::unbounded_channel();
        process.lock().routes.insert(run, sender);
        self.replenish(&mut state);
        RunLink {
            pool: Arc::clone(self),
            process,
            run,
            messages,
        }
    }

    /// Starts what is missing: the shared processes, or the idle ones kept ready for the next
    /// tenant or run.
    fn replenish(&self, state: &mut PoolState) {
        state.processes.retain(|process| !process.lock().gone);
        let ready = match self.config.isolation {
            Isolation::Shared => state
                .processes
                .iter()
                .filter(|process| !process.lock().retiring)
                .count(),
            Isolation::Tenant | Isolation::Run => state
                .processes
                .iter()
                .filter(|process| process.lock().key.is_none())
                .count(),
        };
        for _ in ready..self.processes {
            let key = (self.config.isolation == Isolation::Shared).then_some(Key::Shared);
            let process = self.spawn(key);
            state.processes.push(process);
        }
    }

    /// A run left `process`: a process that retires, or that served the run alone, ends with its
    /// last run; idle processes of tenants beyond the number kept are ended too.
    fn detach(&self, process: &Arc<Process>, run: u64) {
        let mut state = self.lock();
        let end = {
            let mut hosting = process.lock();
            hosting.routes.remove(&run);
            hosting.routes.is_empty()
                && (hosting.retiring || matches!(hosting.key, Some(Key::Run(_))))
        };
        if end {
            process.kill();
        }
        if self.config.isolation == Isolation::Tenant {
            let idle: Vec<_> = state
                .processes
                .iter()
                .filter(|process| {
                    let hosting = process.lock();
                    hosting.routes.is_empty() && matches!(hosting.key, Some(Key::Tenant(_)))
                })
                .cloned()
                .collect();
            for process in idle.iter().skip(self.processes) {
                process.kill();
            }
        }
        self.replenish(&mut state);
    }

    fn spawn(&self, key: Option<Key>) -> Arc<Process> {
        match self.start(key) {
            Ok(process) => process,
            Err(err) => {
                tracing::error!(error = %err, "runner could not start");
                Process::failed(err.to_string())
            }
        }
    }

    /// A new runner: forked from the warm template when it is ready, else started cold.
    fn start(&self, key: Option<Key>) -> std::io::Result<Arc<Process>> {
        if let Some(template) = self.template() {
            match self.fork(&template, key.clone()) {
                Ok(process) => return Ok(process),
                Err(err) => {
                    tracing::warn!(error = %err, "the python template could not fork: a runner starts cold");
                    template.kill();
                }
            }
        }
        let mut child = self.spawn_with(self.command().stdin(Stdio::piped()))?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        Ok(Process::start(
            Box::new(stdin),
            Box::new(stdout),
            Some(child),
            key,
        ))
    }

    /// A runner forked from `template`: the ends of its pipes go to the template over its socket
    /// (SCM_RIGHTS), and the fork speaks the protocol on them.
    fn fork(&self, template: &Template, key: Option<Key>) -> std::io::Result<Arc<Process>> {
        let (runner_in, to_runner) = std::io::pipe()?;
        let (from_runner, runner_out) = std::io::pipe()?;
        let ends = [runner_in.as_raw_fd(), runner_out.as_raw_fd()];
        nix::sys::socket::sendmsg::<()>(
            template.commands.as_raw_fd(),
            &[IoSlice::new(b"f")],
            &[ControlMessage::ScmRights(&ends)],
            MsgFlags::empty(),
            None,
        )?;
        let writer = pipe::Sender::from_owned_fd(OwnedFd::from(to_runner))?;
        let reader = pipe::Receiver::from_owned_fd(OwnedFd::from(from_runner))?;
        Ok(Process::start(
            Box::new(writer),
            Box::new(reader),
            None,
            key,
        ))
    }

    /// The warm template, when it is ready; one is started when there is none (or it died), and
    /// runners start cold until it is ready.
    fn template(&self) -> Option<Arc<Template>> {
        if !self.config.fork {
            return None;
        }
        let mut template = self
            .template
            .lock()
            .expect("template lock is never poisoned");
        let alive = template
            .as_ref()
            .is_some_and(|t| !matches!(*t.ready.borrow(), Readiness::Failed(_)));
        if !alive {
            *template = match self.start_template() {
                Ok(started) => Some(started),
                Err(err) => {
                    tracing::error!(error = %err, "the python template could not start");
                    None
                }
            };
        }
        template
            .as_ref()
            .filter(|t| matches!(*t.ready.borrow(), Readiness::Ready))
            .cloned()
    }

    /// Waits until the template is ready (or could not be), if runners are forked.
    async fn template_ready(&self) {
        if !self.config.fork {
            return;
        }
        let _ = self.template();
        let ready = self
            .template
            .lock()
            .expect("template lock is never poisoned")
            .as_ref()
            .map(|t| t.ready.clone());
        if let Some(mut ready) = ready {
            let _ = tokio::time::timeout(
                STARTUP_TIMEOUT,
                ready.wait_for(|ready| !matches!(ready, Readiness::Starting)),
            )
            .await;
        }
    }

    fn start_template(&self) -> std::io::Result<Arc<Template>> {
        let (commands, theirs) = std::os::unix::net::UnixStream::pair()?;
        let mut child = self.spawn_with(
            self.command()
                .arg("--template")
                .stdin(Stdio::from(OwnedFd::from(theirs))),
        )?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (readiness, ready) = watch::channel(Readiness::Starting);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            let why = match lines.next_line().await {
                Ok(Some(line)) => match serde_json::from_str::<FromRunner>(&line) {
                    Ok(FromRunner::Ready { protocol, pid, .. })
                        if protocol == protocol::VERSION =>
                    {
                        tracing::info!(pid, "python template ready: runners fork from it");
                        readiness.send_replace(Readiness::Ready);
                        // It says nothing more: its output ends when it does.
                        while let Ok(Some(_)) = lines.next_line().await {}
                        "it exited".to_owned()
                    }
                    _ => format!("it wrote {line:.200}"),
                },
                _ => "it exited while loading the graphs".to_owned(),
            };
            tracing::warn!(why, "python template gone");
            readiness.send_replace(Readiness::Failed(why));
        });
        Ok(Arc::new(Template {
            commands,
            child: Mutex::new(child),
            ready,
        }))
    }

    /// Starts `command` (from [`Pool::command`]), its output read by the worker.
    fn spawn_with(&self, command: &mut Command) -> std::io::Result<Child> {
        command
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| {
                std::io::Error::new(
                    err.kind(),
                    format!("{}: {err}", self.config.program.display()),
                )
            })
    }

    /// A runner's command (a cold runner, or the template with `--template`).
    fn command(&self) -> Command {
        runner_command(&self.config, &self.script, self.unprivileged.as_deref())
    }
}

/// A runner's command: the configured interpreter running `script` in the project's folder,
/// without the platform's secrets or, as root (`unprivileged`: setpriv), any capability.
fn runner_command(config: &RunnerConfig, script: &Path, unprivileged: Option<&Path>) -> Command {
    let mut command = match unprivileged {
        // As root, a runner would read the worker's memory and environment whatever they
        // allow: it starts without any capability.
        Some(setpriv) => {
            let mut command = Command::new(setpriv);
            command
                .args(["--bounding-set=-all", "--inh-caps=-all", "--"])
                .arg(&config.program);
            command
        }
        None => Command::new(&config.program),
    };
    // What the graphs need and none of the platform's secrets: the worker's own settings
    // (its database, tokens, model, exporter) stay out of the runner's environment.
    for (name, _) in std::env::vars_os() {
        if platform_variable(&name) {
            command.env_remove(name);
        }
    }
    let memory_limit = config.memory_limit_mib.map(|mib| mib.to_string());
    if let (Language::JavaScript, Some(mib)) = (config.language, &memory_limit) {
        // Node reserves far more address space than it uses: its heap is what is bounded.
        command.arg(format!("--max-old-space-size={mib}"));
    }
    command
        .arg(script)
        .arg(&config.config)
        .current_dir(
            config
                .config
                .parent()
                .filter(|dir| !dir.as_os_str().is_empty())
                .unwrap_or(Path::new(".")),
        )
        .env("PYTHONUNBUFFERED", "1")
        .env(
            "MOSTRADOR_RUNNER_MEMORY_LIMIT_MIB",
            memory_limit
                .filter(|_| config.language == Language::Python)
                .unwrap_or_default(),
        )
        .env(
            "MOSTRADOR_RUNNER_SPANS",
            if exports_spans() { "1" } else { "" },
        )
        .env(
            "MOSTRADOR_RUNNER_BLOCKED_AFTER",
            config
                .blocked_after
                .filter(|_| config.isolation != Isolation::Run)
                .map(|after| after.as_secs_f64().to_string())
                .unwrap_or_default(),
        )
        .stderr(Stdio::inherit());
    command
}

/// setpriv, to start runners without root's capabilities, when this process is root.
fn unprivileged() -> Option<PathBuf> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let setpriv = PathBuf::from("/usr/bin/setpriv");
    if !setpriv.exists() {
        tracing::warn!("root without /usr/bin/setpriv: runner processes keep its capabilities");
    }
    Some(setpriv).filter(|setpriv| setpriv.exists())
}

/// The api's helper processes for the project's own code (its `auth.path` handlers and `http.app`
/// routes: `runner.py --api`, the `mostrador_runner.api` module; a JavaScript project's
/// `auth.path` and `http.app`: `api.mjs`), started as runners are: the project's interpreter in its
/// folder, without the platform's secrets or capabilities.
#[derive(Debug)]
pub struct ApiProcesses {
    config: RunnerConfig,
    script: PathBuf,
    unprivileged: Option<PathBuf>,
}

impl ApiProcesses {
    /// # Errors
    ///
    /// The runner's files could not be written.
    pub fn new(mut config: RunnerConfig) -> std::io::Result<Self> {
        if config.program.components().count() > 1 && config.program.is_relative() {
            config.program = std::path::absolute(&config.program)?;
        }
        if let Err(err) = nix::sys::prctl::set_dumpable(false) {
            tracing::warn!(error = %err, "the api could not make itself undumpable");
        }
        let script = match config.language {
            Language::Python => write_script(Language::Python)?,
            Language::JavaScript => write_script(Language::JavaScript)?.with_file_name("api.mjs"),
        };
        Ok(Self {
            config,
            script,
            unprivileged: unprivileged(),
        })
    }

    /// The command that starts one, its input and output piped.
    pub fn command(&self) -> Command {
        let mut command = runner_command(&self.config, &self.script, self.unprivileged.as_deref());
        command
            .arg("--api")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        command
    }
}

impl Drop for ApiProcesses {
    fn drop(&mut self) {
        if let Some(folder) = self.script.parent() {
            let _ = std::fs::remove_dir_all(folder);
        }
    }
}

/// A variable of the worker's own configuration, kept from runners: every `MOSTRADOR_*` one (its
/// database, JWT secret, API-key settings), `DATABASE_URL`, the binary's model (`MODEL_*`) and
/// OpenTelemetry's exporter (whose headers may carry a key).
fn platform_variable(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    name.starts_with("MOSTRADOR_")
        || name.starts_with("OTEL_")
        || matches!(
            &*name,
            "DATABASE_URL"
                | "MODEL_API_KEY"
                | "MODEL_BASE_URL"
                | "MODEL_NAME"
                | "MODEL_CONTEXT_WINDOW"
        )
}

/// The worker exports spans: runners send theirs (model and tool calls) to it.
fn exports_spans() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
}

/// Writes the embedded runner of `language` (for Python, with the `mostrador` package its graphs
/// may import) to a new folder of its own in the temporary folder (a name no one could have
/// planted, created only if new); the [`Pool`] removes it when dropped. Returns the path of
/// `runner.py` or `runner.mjs`.
fn write_script(language: Language) -> std::io::Result<PathBuf> {
    let folder = std::env::temp_dir().join(format!("mostrador-runner-{}", Uuid::now_v7()));
    std::fs::create_dir(&folder)?;
    let (files, script): (&[(&str, &str)], _) = match language {
        Language::Python => (&PYTHON_FILES, "runner.py"),
        Language::JavaScript => (&JS_FILES, "runner.mjs"),
    };
    for (path, text) in files {
        let path = folder.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)?;
    }
    Ok(folder.join(script))
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Some(folder) = self.script.parent() {
            let _ = std::fs::remove_dir_all(folder);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PYTHON_FILES;

    /// A module of the runner left out of the files a worker writes fails every run at import.
    #[test]
    fn every_python_module_of_the_runner_is_shipped() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
        for package in ["mostrador_runner", "mostrador"] {
            for entry in std::fs::read_dir(root.join(package)).expect("the runner's sources") {
                let name = entry.expect("an entry").file_name();
                let name = name.to_string_lossy();
                if name.ends_with(".py") {
                    let shipped = format!("{package}/{name}");
                    assert!(
                        PYTHON_FILES.iter().any(|(path, _)| *path == shipped),
                        "{shipped} is not in PYTHON_FILES"
                    );
                }
            }
        }
    }
}
