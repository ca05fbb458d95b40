//! What the end-to-end tests share: the test database, worker processes of the `mostrador-e2e`
//! binary, and the executions its graph nodes record and announce.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use mostrador_queue::run::event::EventFollower;
use mostrador_queue::run::{self, NewRun};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{Listener, Run, RunStatus};
use serde_json::Value;
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use uuid::Uuid;

/// The database of one test, with the executions table, and its URL for worker processes.
pub struct Db {
    pub pool: PgPool,
    pub url: String,
    listener: Listener,
}

impl Db {
    pub async fn new(pool: PgPool) -> Self {
        mostrador_tests::create_executions_table(&pool)
            .await
            .expect("executions table");
        let options = pool.connect_options();
        let url = format!(
            "postgres://{}@{}:{}/{}",
            options.get_username(),
            options.get_host(),
            options.get_port(),
            options
                .get_database()
                .expect("the test database has a name"),
        );
        let listener = Listener::start(pool.clone(), std::future::pending())
            .await
            .expect("listener");
        Self {
            pool,
            url,
            listener,
        }
    }

    /// A new thread with one run of `graph` queued on it.
    pub async fn enqueue(&self, graph: &str, input: Value) -> Run {
        self.enqueue_with(graph, |new| NewRun {
            input: Some(input),
            ..new
        })
        .await
    }

    /// A new thread with one run of `graph`, as `edit` makes it, queued on it.
    pub async fn enqueue_with(&self, graph: &str, edit: impl FnOnce(NewRun) -> NewRun) -> Run {
        let thread = thread::create(&self.pool, &NewThread::new(graph, "ana"))
            .await
            .expect("thread");
        let new = edit(NewRun::new(thread.thread_id, graph));
        run::enqueue(&self.pool, &new, None)
            .await
            .expect("enqueue")
            .run
    }

    pub async fn run(&self, run: &Run) -> Run {
        run::get(&self.pool, run.thread_id, run.run_id)
            .await
            .expect("run")
    }

    /// Follows the run's events from the first.
    pub async fn follow(&self, run: &Run) -> EventFollower {
        EventFollower::start(self.pool.clone(), &self.listener, run.run_id, 0)
            .await
            .expect("follow")
    }

    /// Waits, without polling, for the run's `end` event; then returns the run.
    pub async fn until_end(&self, run: &Run, within: Duration) -> Run {
        let mut follower = EventFollower::start(self.pool.clone(), &self.listener, run.run_id, 0)
            .await
            .expect("follow");
        let ended = tokio::time::timeout(within, async {
            while let Some(event) = follower.next().await.expect("events") {
                if event.event == "end" {
                    return;
                }
            }
        })
        .await;
        let now = self.run(run).await;
        assert!(ended.is_ok(), "run did not end within {within:?}: {now:?}");
        now
    }

    /// How many times each node of the thread recorded `phase`.
    pub async fn counts(&self, thread_id: Uuid, phase: &str) -> BTreeMap<String, i64> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "select node, count(*) from e2e_executions
             where thread_id = $1 and phase = $2 group by node",
        )
        .bind(thread_id)
        .bind(phase)
        .fetch_all(&self.pool)
        .await
        .expect("counts");
        rows.into_iter().collect()
    }

    /// The values of the thread's latest checkpoint.
    pub async fn values(&self, thread_id: Uuid) -> Value {
        use mostrador_graph::Checkpointer;
        let saved = mostrador_queue::PgCheckpointer::new(self.pool.clone())
            .get(thread_id, None)
            .await
            .expect("checkpoint")
            .expect("the thread has a checkpoint");
        Value::Object(saved.values)
    }
}

/// One execution a node recorded.
#[derive(Debug, Clone)]
pub struct Execution {
    pub thread_id: Uuid,
    pub node: String,
    pub phase: String,
}

/// Executions as nodes announce them.
pub struct Executions(PgListener);

impl Executions {
    pub async fn listen(db: &Db) -> Self {
        let mut listener = PgListener::connect_with(&db.pool).await.expect("listen");
        listener
            .listen(mostrador_tests::EXECUTIONS)
            .await
            .expect("listen");
        Self(listener)
    }

    /// The next announced execution that `wanted` accepts.
    pub async fn until(&mut self, wanted: impl Fn(&Execution) -> bool) -> Execution {
        let next = async {
            loop {
                let notification = self.0.recv().await.expect("notification");
                let data: Value =
                    serde_json::from_str(notification.payload()).expect("execution payload");
                let text = |key: &str| data[key].as_str().unwrap_or_default().to_owned();
                let execution = Execution {
                    thread_id: text("thread_id").parse().expect("thread id"),
                    node: text("node"),
                    phase: text("phase"),
                };
                if wanted(&execution) {
                    return execution;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(60), next)
            .await
            .expect("the execution was announced within a minute")
    }
}

/// The `mostrador-e2e` binary the tests start: this build's, or the one `MOSTRADOR_E2E_BIN` names
/// (the soak measures latency on a release build: `.ci/run` sets it).
pub fn this_binary() -> PathBuf {
    std::env::var_os("MOSTRADOR_E2E_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_mostrador-e2e")),
        PathBuf::from,
    )
}

/// A `mostrador-e2e` process: a worker, unless started with [`Worker::spawn`].
pub struct Worker {
    child: Child,
    /// Kept: the child forgets its id once it has exited.
    pub pid: u32,
    pub name: String,
    port: u16,
    log: PathBuf,
}

impl Worker {
    /// Starts a worker on the test database; `args` add to or override the defaults (a short
    /// poll and sweep interval).
    pub fn start(db: &Db, name: &str, args: &[&str]) -> Self {
        Self::start_from(&this_binary(), db, name, args)
    }

    /// [`Worker::start`] with another build of the binary (an earlier release's).
    pub fn start_from(binary: &Path, db: &Db, name: &str, args: &[&str]) -> Self {
        let mut all = vec![
            "--name",
            name,
            "--poll-interval",
            "200ms",
            "--sweep-interval",
            "300ms",
        ];
        all.extend_from_slice(args);
        Self::spawn_process(binary, &db.url, name, "worker", &all, &[])
    }

    /// [`Worker::spawn`] with another build of the binary (an earlier release's).
    pub fn spawn_from(binary: &Path, db: &Db, name: &str, command: &str, args: &[&str]) -> Self {
        Self::spawn_process(binary, &db.url, name, command, args, &[])
    }

    /// Starts another command of the binary (`api`, ...) on the test database and a free port.
    pub fn spawn(db: &Db, name: &str, command: &str, args: &[&str]) -> Self {
        Self::spawn_at(&db.url, name, command, args)
    }

    /// [`Worker::spawn`] with extra environment variables.
    pub fn spawn_with_env(
        db: &Db,
        name: &str,
        command: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        Self::spawn_process(&this_binary(), &db.url, name, command, args, env)
    }

    /// [`Worker::spawn`] connecting with `url` (another role, ...).
    pub fn spawn_at(url: &str, name: &str, command: &str, args: &[&str]) -> Self {
        Self::spawn_process(&this_binary(), url, name, command, args, &[])
    }

    fn spawn_process(
        binary: &Path,
        url: &str,
        name: &str,
        command: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("e2e-logs");
        std::fs::create_dir_all(&dir).expect("log directory");
        let database = url.rsplit('/').next().unwrap_or("db");
        let log = dir.join(format!("{database}-{name}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let mut child = Command::new(binary);
        if command == "dev" {
            // The secret the tests mint `dev`'s tokens with (without one it makes its own).
            child.env("MOSTRADOR_JWT_SECRET", crate::retail::DEV_SECRET);
        }
        let child = child
            .arg(command)
            .args(["--database-url", url])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .env("RUST_LOG", "info,sqlx=warn")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .expect("the mostrador-e2e binary starts");
        Self {
            pid: child.id().expect("a child just started has an id"),
            child,
            name: name.to_owned(),
            port,
            log,
        }
    }

    /// Whether the process is still running (it did not exit or crash).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM, as Kubernetes does to stop a pod.
    pub fn terminate(&self) {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "SIGTERM delivered");
    }

    /// Sends SIGKILL (an OOM kill, a node lost) and reaps the process.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("SIGKILL delivered");
    }

    /// Waits for the process to exit.
    pub async fn exit(&mut self, within: Duration) -> ExitStatus {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(status) => status.expect("wait"),
            Err(_) => panic!(
                "worker {} did not exit within {within:?}\n{}",
                self.name,
                self.log()
            ),
        }
    }

    /// The worker's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The process's HTTP address.
    pub fn addr(&self) -> (&'static str, u16) {
        ("127.0.0.1", self.port)
    }

    /// `GET path` on the process's HTTP port: status code and body.
    pub async fn get(&self, path: &str) -> std::io::Result<(u16, String)> {
        self.request("GET", path, &[], "").await
    }

    /// A request on the process's HTTP port: status code and body.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> std::io::Result<(u16, String)> {
        http(self.port, method, path, headers, body).await
    }
    /// Waits until the worker answers `/ready` with `status`.
    pub async fn until_ready_is(&self, status: u16) {
        let within = Duration::from_secs(20);
        let polled = tokio::time::timeout(within, async {
            // The worker is another process: its HTTP port is the only signal there is.
            while self.get("/ready").await.ok().map(|(code, _)| code) != Some(status) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(
            polled.is_ok(),
            "worker {} did not answer /ready with {status} within {within:?}\n{}",
            self.name,
            self.log()
        );
    }
}

/// An HTTP/1.1 request to `127.0.0.1:port`: status code and body.
pub async fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<(u16, String)> {
    let (status, _, body) = http_with_head(port, method, path, headers, body).await?;
    Ok((status, body))
}

/// [`http`], with the answer's head (its status line and headers) too.
pub async fn http_with_head(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<(u16, String, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {response:?}")))?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Ok((
        status,
        head.to_owned(),
        if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        },
    ))
}

/// Ends with `status` or panics with the run.
pub fn assert_status(run: &Run, status: RunStatus) {
    assert_eq!(run.status, status, "{run:?}");
}

/// The payload of a `Transfer-Encoding: chunked` body.
fn dechunk(mut body: &str) -> String {
    let mut payload = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        payload.push_str(&rest[..size]);
        body = rest[size..].strip_prefix("\r\n").unwrap_or(&rest[size..]);
    }
    payload
}

/// The server-sent events of a body: `(event, id, data)`, comments skipped.
pub fn sse_events(body: &str) -> Vec<(String, Option<i64>, Value)> {
    body.split("\n\n")
        .filter_map(|block| {
            let (mut event, mut id, mut data) = (None, None, None);
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event: ") {
                    event = Some(value.to_owned());
                } else if let Some(value) = line.strip_prefix("id: ") {
                    id = value.parse().ok();
                } else if let Some(value) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(value).ok();
                }
            }
            Some((event?, id, data?))
        })
        .collect()
}

/// A TCP proxy to Postgres that the test can cut (every connection through it is closed, and new
/// ones are refused, as when a node loses the network) or turn to another server (as a
/// managed Postgres's service turns to the new primary after a failover).
pub struct Proxy {
    pub port: u16,
    cut: tokio::sync::watch::Sender<bool>,
    target: std::sync::Arc<std::sync::Mutex<(String, u16)>>,
}

impl Proxy {
    pub async fn start(target: (String, u16)) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (cut, is_cut) = tokio::sync::watch::channel(false);
        let target = std::sync::Arc::new(std::sync::Mutex::new(target));
        let to = target.clone();
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                if *is_cut.borrow() {
                    continue; // dropped: refused
                }
                let target = to
                    .lock()
                    .expect("the target lock is never poisoned")
                    .clone();
                let mut is_cut = is_cut.clone();
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    let (mut client, mut server) = (client, server);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = is_cut.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Self { port, cut, target }
    }

    /// Closes every connection through it and refuses new ones.
    pub fn cut(&self) {
        let _ = self.cut.send(true);
    }

    /// New connections go to `target`, and are accepted again.
    pub fn turn_to(&self, target: (String, u16)) {
        *self
            .target
            .lock()
            .expect("the target lock is never poisoned") = target;
        let _ = self.cut.send(false);
    }
}
