//! A runner process (a cold one, a fork of the warm template, or the template itself), the runs
//! it hosts, and each run's place in it: one task per process reads its messages and routes each
//! to its run's [`RunLink`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::Child;
use tokio::sync::{mpsc, oneshot, watch};

use super::protocol::{self, FromRunner, RunSpec, ToRunner};
use super::{CANCEL_GRACE, Key, Pool, RunnerError, STARTUP_TIMEOUT};

/// The warm template: a process that loaded the project once and forks runners.
#[derive(Debug)]
pub(super) struct Template {
    /// Its standard input: a socket the pipes of each new runner are passed over.
    pub(super) commands: std::os::unix::net::UnixStream,
    pub(super) child: Mutex<Child>,
    pub(super) ready: watch::Receiver<Readiness>,
}

impl Template {
    pub(super) fn kill(&self) {
        let _ = self
            .child
            .lock()
            .expect("template lock is never poisoned")
            .start_kill();
    }
}

/// Where a runner's messages are written, and read from.
pub(super) type Writer = Box<dyn AsyncWrite + Send + Unpin>;
pub(super) type Reader = Box<dyn AsyncRead + Send + Unpin>;

/// One runner process.
pub(super) struct Process {
    /// Its process id, once known (0 before, and once it is gone).
    pub(super) pid: AtomicU32,
    /// Where messages to it are written, one line at a time (`None` once it is gone).
    writer: tokio::sync::Mutex<Option<Writer>>,
    /// The process, when the worker started it (a forked one is the template's child).
    child: Mutex<Option<Child>>,
    pub(super) ready: watch::Receiver<Readiness>,
    hosting: Mutex<Hosting>,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("pid", &self.pid)
            .field("hosting", &self.hosting)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
pub(super) enum Readiness {
    Starting,
    Ready,
    Failed(String),
}

/// What a process serves.
#[derive(Debug, Default)]
pub(super) struct Hosting {
    /// Who it serves; none yet for a process kept ready.
    pub(super) key: Option<Key>,
    /// The messages of each run it hosts, by the run's number.
    pub(super) routes: HashMap<u64, mpsc::UnboundedSender<FromRunner>>,
    /// The answer to a `describe`, awaited.
    pub(super) described: Option<oneshot::Sender<serde_json::Map<String, Value>>>,
    /// It takes no new run (it ran out of memory) and ends with its last.
    pub(super) retiring: bool,
    pub(super) gone: bool,
}

impl Process {
    /// A process speaking the protocol on `writer` and `reader`, read by a task of its own.
    pub(super) fn start(
        writer: Writer,
        reader: Reader,
        child: Option<Child>,
        key: Option<Key>,
    ) -> Arc<Self> {
        let (readiness, ready) = watch::channel(Readiness::Starting);
        let process = Arc::new(Self {
            pid: AtomicU32::new(child.as_ref().and_then(Child::id).unwrap_or_default()),
            writer: tokio::sync::Mutex::new(Some(writer)),
            child: Mutex::new(child),
            ready,
            hosting: Mutex::new(Hosting {
                key,
                ..Hosting::default()
            }),
        });
        tokio::spawn(read(Arc::clone(&process), reader, readiness));
        process
    }

    /// A process that could not start: every run placed there fails with why.
    pub(super) fn failed(why: String) -> Arc<Self> {
        let (_, ready) = watch::channel(Readiness::Failed(why));
        Arc::new(Self {
            pid: AtomicU32::new(0),
            writer: tokio::sync::Mutex::new(None),
            child: Mutex::new(None),
            ready,
            hosting: Mutex::new(Hosting {
                gone: true,
                ..Hosting::default()
            }),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Hosting> {
        self.hosting
            .lock()
            .expect("runner process lock is never poisoned")
    }

    pub(super) fn is_ready(&self) -> bool {
        matches!(*self.ready.borrow(), Readiness::Ready)
    }

    pub(super) async fn until_ready(&self) -> Result<(), RunnerError> {
        let mut ready = self.ready.clone();
        let waited = tokio::time::timeout(
            STARTUP_TIMEOUT,
            ready.wait_for(|ready| !matches!(ready, Readiness::Starting)),
        )
        .await;
        let outcome = match waited {
            Err(_) => Err(RunnerError::Start(
                "the graphs took too long to load".into(),
            )),
            Ok(Err(_)) => Err(RunnerError::Exited),
            Ok(Ok(ready)) => match &*ready {
                Readiness::Failed(why) => Err(RunnerError::Start(why.clone())),
                _ => Ok(()),
            },
        };
        if outcome.is_err() {
            self.kill();
        }
        outcome
    }

    /// Writes one message.
    pub(super) async fn write(&self, message: &ToRunner) -> Result<(), RunnerError> {
        let mut line = serde_json::to_vec(message).expect("a JSON value always serializes");
        line.push(b'\n');
        let mut writer = self.writer.lock().await;
        let Some(pipe) = writer.as_mut() else {
            return Err(RunnerError::Exited);
        };
        if pipe.write_all(&line).await.is_err() {
            *writer = None;
            return Err(RunnerError::Exited);
        }
        Ok(())
    }

    /// Ends the process now; the task reading it then fails its runs.
    pub(super) fn kill(&self) {
        if let Some(child) = self
            .child
            .lock()
            .expect("runner child lock is never poisoned")
            .as_mut()
        {
            let _ = child.start_kill();
            return;
        }
        // A fork: by its id while it lives (the template reaps it once dead, and its id may
        // then be another's), else its input closes and it exits.
        let pid = self.pid.load(Ordering::Acquire);
        if pid != 0 && !self.lock().gone {
            let _ = signal::kill(Pid::from_raw(pid.cast_signed()), Signal::SIGKILL);
        } else if let Ok(mut writer) = self.writer.try_lock() {
            *writer = None;
        }
    }
}

/// Reads a process's messages and routes each to its run, until the process is gone.
async fn read(process: Arc<Process>, reader: Reader, readiness: watch::Sender<Readiness>) {
    let mut lines = BufReader::new(reader).lines();
    let why = loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) | Err(_) => break "it exited".to_owned(),
        };
        let message: FromRunner = match serde_json::from_str(&line) {
            Ok(message) => message,
            Err(err) => break format!("it wrote {line:.200}: {err}"),
        };
        if let Some(run) = message.run() {
            let route = process.lock().routes.get(&run).cloned();
            match (route, message) {
                (Some(route), message) => {
                    let _ = route.send(message);
                }
                // A run the worker let go of (it stopped it): a call gets no answer to wait for,
                // and the rest is dropped.
                (None, FromRunner::Call { id, .. }) => {
                    let reply = ToRunner::Reply {
                        id,
                        result: Value::Null,
                        error: Some("the run has ended".into()),
                    };
                    let _ = process.write(&reply).await;
                }
                (None, _) => {}
            }
            continue;
        }
        match message {
            FromRunner::Ready {
                protocol,
                pid,
                graphs,
            } if protocol == protocol::VERSION => {
                process.pid.store(pid, Ordering::Release);
                tracing::info!(pid, ?graphs, "runner ready");
                readiness.send_replace(Readiness::Ready);
            }
            FromRunner::Ready { protocol, .. } => {
                break format!(
                    "it speaks protocol {protocol}, not {}: another version of mostrador's runner",
                    protocol::VERSION
                );
            }
            FromRunner::Blocked { .. } => break "a task blocked its event loop".to_owned(),
            FromRunner::Described { graphs } => {
                if let Some(sender) = process.lock().described.take() {
                    let _ = sender.send(graphs);
                }
            }
            other => break format!("it sent {other:?} for no run"),
        }
    };
    if matches!(*readiness.borrow(), Readiness::Starting) {
        readiness.send_replace(Readiness::Failed(why.clone()));
    }
    // Killed (a protocol broken) before it counts as gone: a fork's id is its own until then.
    process.kill();
    *process.writer.lock().await = None;
    let hosted = {
        let mut hosting = process.lock();
        hosting.gone = true;
        hosting.described = None;
        std::mem::take(&mut hosting.routes)
    };
    let pid = process.pid.swap(0, Ordering::AcqRel);
    if !hosted.is_empty() {
        tracing::warn!(pid, runs = hosted.len(), why, "runner gone");
    }
    // Its runs' links see their messages end: each fails its run retryably.
    drop(hosted);
    let child = process
        .child
        .lock()
        .expect("runner child lock is never poisoned")
        .take();
    if let Some(mut child) = child {
        let _ = child.wait().await;
    }
}

/// A run's place in a runner process: its messages, and the way to send it more.
#[derive(Debug)]
pub struct RunLink {
    pub(super) pool: Arc<Pool>,
    pub(super) process: Arc<Process>,
    /// Its number in the process.
    pub(super) run: u64,
    pub(super) messages: mpsc::UnboundedReceiver<FromRunner>,
}

impl RunLink {
    /// The run's next message.
    ///
    /// # Errors
    ///
    /// The process is gone. Cancel-safe.
    pub async fn next(&mut self) -> Result<FromRunner, RunnerError> {
        self.messages.recv().await.ok_or(RunnerError::Exited)
    }

    /// Starts the run.
    ///
    /// # Errors
    ///
    /// The process is gone.
    pub async fn start(&self, spec: RunSpec) -> Result<(), RunnerError> {
        let start = ToRunner::Start {
            run: self.run,
            spec: Box::new(spec),
        };
        self.process.write(&start).await
    }

    /// Answers one of the run's calls.
    ///
    /// # Errors
    ///
    /// The process is gone.
    pub async fn reply(&self, reply: &ToRunner) -> Result<(), RunnerError> {
        self.process.write(reply).await
    }

    /// # Errors
    ///
    /// The process is gone.
    pub async fn drain(&self, reason: String) -> Result<(), RunnerError> {
        let drain = ToRunner::Drain {
            run: self.run,
            reason,
        };
        self.process.write(&drain).await
    }

    /// # Errors
    ///
    /// The process is gone.
    pub async fn cancel(&self) -> Result<(), RunnerError> {
        self.process
            .write(&ToRunner::Cancel { run: self.run })
            .await
    }

    /// The process takes no other run, and ends once its runs have (it ran out of memory and may
    /// hold on to it).
    pub fn retire(&self) {
        self.process.lock().retiring = true;
    }

    /// Ends the process, and every run it hosts (retryably): it broke the protocol, or did not
    /// stop a run in time.
    pub fn kill(&self) {
        self.process.kill();
    }

    /// Stops a run the worker gave up on (its lease lost, its time out, its checkpoint not
    /// written): cancelled in its process, which is killed if the run has not stopped within
    /// [`CANCEL_GRACE`]. A process that serves this run alone is killed at once.
    pub async fn stop(mut self) {
        if matches!(self.process.lock().key, Some(Key::Run(_))) {
            self.kill();
            return;
        }
        if self.cancel().await.is_err() {
            return;
        }
        let stopped = tokio::time::timeout(CANCEL_GRACE, async {
            while let Ok(message) = self.next().await {
                if matches!(message, FromRunner::Done { .. }) {
                    return true;
                }
            }
            false
        })
        .await;
        if !matches!(stopped, Ok(true)) {
            self.kill();
        }
    }
}

impl Drop for RunLink {
    fn drop(&mut self) {
        self.pool.detach(&self.process, self.run);
    }
}
