//! A managed high-availability Postgres failing over under mostrador, as CloudNativePG or Patroni
//! do it: a primary with a synchronous standby, the primary lost mid-load (an immediate stop, a
//! crash as far as its clients can tell), the standby promoted, and the service the processes
//! connect to turned to it. Nothing acknowledged is lost: every run whose enqueue returned, and
//! every run seen finished, is on the new primary, and the worker finishes the rest there.
//!
//! It runs two clusters of its own (`initdb`, `pg_basebackup`, as the `postgres` user when the
//! test runs as root), so it is not part of the parallel suite: `.ci/run` runs it on its own
//! (`--run-ignored only`).

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mostrador_graph::Checkpointer as _;
use mostrador_queue::run::{self, NewRun};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{RunId, RunStatus};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions as _, PgPool};

use crate::support::{Proxy, Worker};

/// A cluster of this test's, in a folder of its own.
pub(crate) struct Cluster {
    pub(crate) bin: PathBuf,
    data: PathBuf,
    pub(crate) port: u16,
}

/// One of PostgreSQL's programs, to be run as `postgres` when this test runs as root (they
/// refuse root).
pub(crate) fn pg_command(bin: &Path, program: &str) -> Command {
    if std::fs::metadata("/proc/self").expect("procfs").uid() == 0 {
        let mut command = Command::new("runuser");
        command
            .args(["-u", "postgres", "--"])
            .arg(bin.join(program));
        command
    } else {
        Command::new(bin.join(program))
    }
}

/// Runs one of PostgreSQL's programs; panics with its output when it fails.
pub(crate) fn pg(bin: &Path, program: &str, args: &[&str]) {
    let output = pg_command(bin, program)
        .args(args)
        .output()
        .expect("the program starts");
    assert!(
        output.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// The folder of PostgreSQL's programs (where `initdb` really is: a folder on the PATH may link
/// it alone, and `pg_basebackup` is beside it).
fn postgres_bin() -> PathBuf {
    let initdb = mostrador::postgres_binaries()
        .expect("PostgreSQL's programs (initdb, pg_ctl)")
        .join("initdb");
    std::fs::canonicalize(initdb)
        .expect("initdb")
        .parent()
        .expect("its folder")
        .to_owned()
}

impl Cluster {
    /// A cluster to be made in `data`, on a free port.
    pub(crate) fn new(data: PathBuf) -> Self {
        Self {
            bin: postgres_bin(),
            data,
            port: free_port(),
        }
    }

    pub(crate) fn path(&self) -> &str {
        self.data.to_str().expect("a UTF-8 path")
    }

    /// Appends settings to the cluster's configuration.
    pub(crate) fn configure(&self, settings: &str) {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(self.data.join("postgresql.auto.conf"))
            .expect("the cluster's configuration");
        writeln!(file, "{settings}").expect("written");
    }

    pub(crate) fn start(&self) {
        let log = self.data.with_extension("log");
        pg(
            &self.bin,
            "pg_ctl",
            &[
                "-D",
                self.path(),
                "-l",
                log.to_str().expect("UTF-8"),
                "-w",
                "start",
            ],
        );
    }

    /// An immediate stop: no checkpoint, connections cut, as when the node is lost.
    fn crash(&self) {
        pg(
            &self.bin,
            "pg_ctl",
            &["-D", self.path(), "-m", "immediate", "-w", "stop"],
        );
    }

    fn promote(&self) {
        pg(&self.bin, "pg_ctl", &["-D", self.path(), "-w", "promote"]);
    }

    pub(crate) fn options(&self) -> PgConnectOptions {
        PgConnectOptions::new()
            .host("127.0.0.1")
            .port(self.port)
            .username("postgres")
            .database("postgres")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = pg_command(&self.bin, "pg_ctl")
            .args(["-D", self.path(), "-m", "immediate", "stop"])
            .output();
    }
}

/// A primary, and a standby that streams from it through `replication` (a proxy the test may
/// cut); with `synchronous`, the primary waits for the standby at each commit.
async fn primary_and_standby(root: &Path, synchronous: bool) -> (Cluster, Cluster, Proxy) {
    let primary = Cluster::new(root.join("primary"));
    let bin = primary.bin.clone();
    pg(
        &bin,
        "initdb",
        &[
            "-D",
            primary.path(),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
        ],
    );
    let waits_for = if synchronous { "standby" } else { "" };
    primary.configure(&format!(
        "port = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
         wal_level = replica\nmax_wal_senders = 4\n\
         synchronous_standby_names = '{waits_for}'\nsynchronous_commit = on",
        primary.port,
        root.display(),
    ));
    primary.start();
    let replication = Proxy::start(("127.0.0.1".into(), primary.port)).await;
    let standby = Cluster {
        bin: bin.clone(),
        data: root.join("standby"),
        port: free_port(),
    };
    let from = format!(
        "host=127.0.0.1 port={} user=postgres application_name=standby",
        replication.port
    );
    pg(
        &bin,
        "pg_basebackup",
        &["-d", &from, "-D", standby.path(), "-R", "-X", "stream"],
    );
    standby.configure(&format!("port = {}", standby.port));
    standby.start();
    let admin = connect(primary.options()).await;
    let streaming = Instant::now();
    let wanted = if synchronous { "sync" } else { "async" };
    loop {
        let state: Option<String> = sqlx::query_scalar(
            "select sync_state from pg_stat_replication \
             where application_name = 'standby' and state = 'streaming'",
        )
        .fetch_optional(&admin)
        .await
        .expect("replication");
        if state.as_deref() == Some(wanted) {
            break;
        }
        assert!(
            streaming.elapsed() < Duration::from_secs(30),
            "the standby is {state:?}, not {wanted}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    admin.close().await;
    (primary, standby, replication)
}

/// A folder the `postgres` user may write in, removed at the end.
pub(crate) struct Folder(pub(crate) PathBuf);

impl Folder {
    pub(crate) fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("mostrador-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("a folder");
        if std::fs::metadata("/proc/self").expect("procfs").uid() == 0 {
            let status = Command::new("chown")
                .args(["postgres:postgres", path.to_str().expect("UTF-8")])
                .status()
                .expect("chown");
            assert!(status.success());
        }
        Self(path)
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) async fn connect(options: PgConnectOptions) -> PgPool {
    PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy_with(options.disable_statement_logging())
}

/// What a failover left behind.
#[derive(Debug)]
struct Outcome {
    /// Runs whose enqueue returned.
    acknowledged: usize,
    /// Of those, the ones the new primary does not have.
    lost: usize,
    /// Runs seen finished on the old primary that are not finished on the new one.
    unfinished: usize,
    /// From the primary's loss to the service turned to the promoted standby.
    promoted: Duration,
}

/// Runs a load through the service, loses the standby's stream for a moment (a network blip, or
/// a standby behind) and then the primary, promotes the standby and goes on against it. The
/// worker, reconnecting through the service, finishes every run the new primary has, each node's
/// write once.
async fn fail_over(synchronous: bool) -> Outcome {
    let folder = Folder::new("failover");
    let (primary, standby, replication) = primary_and_standby(&folder.0, synchronous).await;
    let admin = connect(primary.options()).await;
    sqlx::query("create database mostrador")
        .execute(&admin)
        .await
        .expect("database");
    admin.close().await;

    // Every process reaches the primary through the proxy: the service of a managed Postgres.
    let service = Proxy::start(("127.0.0.1".into(), primary.port)).await;
    let url = format!("postgres://postgres@127.0.0.1:{}/mostrador", service.port);
    let pool = connect(
        PgConnectOptions::new()
            .host("127.0.0.1")
            .port(service.port)
            .username("postgres")
            .database("mostrador"),
    )
    .await;
    mostrador_tests::MIGRATOR
        .run(&pool)
        .await
        .expect("migrated");
    let worker = Worker::spawn_at(
        &url,
        if synchronous {
            "failover-sync"
        } else {
            "failover-async"
        },
        "worker",
        &[
            "--graphs",
            "bench_linear_6",
            "--lease",
            "2s",
            "--poll-interval",
            "200ms",
            "--sweep-interval",
            "300ms",
        ],
    );
    worker.until_ready_is(200).await;

    // Enqueuers, each a new thread and a run per call, recording what was acknowledged.
    let acknowledged: Arc<Mutex<BTreeSet<(uuid::Uuid, RunId)>>> = Arc::default();
    let (stop_sender, stop) = tokio::sync::watch::channel(false);
    let mut enqueuers = Vec::new();
    for _ in 0..4 {
        let (pool, acknowledged, stop) = (pool.clone(), acknowledged.clone(), stop.clone());
        enqueuers.push(tokio::spawn(async move {
            while !*stop.borrow() {
                let enqueued = async {
                    let thread =
                        thread::create(&pool, &NewThread::new("bench_linear_6", "ana")).await?;
                    let new = NewRun::new(thread.thread_id, "bench_linear_6");
                    run::enqueue(&pool, &new, None).await
                };
                match enqueued.await {
                    Ok(enqueued) => {
                        acknowledged
                            .lock()
                            .expect("never poisoned")
                            .insert((enqueued.run.thread_id.0, enqueued.run.run_id));
                    }
                    // Not acknowledged (the primary went away): the client would retry.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        }));
    }

    // Some runs finish on the primary; the standby's stream is lost for a moment, then the
    // primary.
    let finished_before = loop {
        let finished: Vec<uuid::Uuid> =
            sqlx::query_scalar("select run_id from mostrador.runs where status = 'success'")
                .fetch_all(&pool)
                .await
                .expect("runs");
        if finished.len() >= 50 {
            break finished.into_iter().collect::<BTreeSet<_>>();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    replication.cut();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let lost_at = Instant::now();
    service.cut();
    primary.crash();
    standby.promote();
    // Its configuration came from the primary: it would wait for a synchronous standby of its
    // own, which it does not have. What the manager does (Patroni's synchronous mode, without
    // `strict`): it commits alone until a new standby joins.
    let promoted_admin = connect(standby.options()).await;
    sqlx::query("alter system set synchronous_standby_names = ''")
        .execute(&promoted_admin)
        .await
        .expect("alone");
    sqlx::query("select pg_reload_conf()")
        .execute(&promoted_admin)
        .await
        .expect("reloaded");
    promoted_admin.close().await;
    service.turn_to(("127.0.0.1".into(), standby.port));
    let promoted = lost_at.elapsed();

    // The load goes on against the new primary for a while, then stops.
    let promoted_pool = connect(standby.options().database("mostrador")).await;
    loop {
        if enqueued_since(&promoted_pool, lost_at).await >= 50 {
            break;
        }
        assert!(
            lost_at.elapsed() < Duration::from_secs(60),
            "no enqueue acknowledged by the new primary"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop_sender.send(true);
    for enqueuer in enqueuers {
        enqueuer.await.expect("the enqueuer ends");
    }
    let acknowledged = acknowledged.lock().expect("never poisoned").clone();

    // On the new primary: the acknowledged runs it has, and the runs seen finished.
    let present: BTreeSet<uuid::Uuid> = sqlx::query_scalar("select run_id from mostrador.runs")
        .fetch_all(&promoted_pool)
        .await
        .expect("runs")
        .into_iter()
        .collect();
    let lost = acknowledged
        .iter()
        .filter(|(_, run_id)| !present.contains(&run_id.0))
        .count();
    // The worker finishes every run there, each node's write once.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let unfinished: i64 = sqlx::query_scalar(
            "select count(*) from mostrador.runs where status in ('pending', 'running')",
        )
        .fetch_one(&promoted_pool)
        .await
        .expect("runs");
        if unfinished == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{unfinished} runs never finished after the failover"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let checkpointer = mostrador_queue::PgCheckpointer::new(promoted_pool.clone());
    let every_node_once = serde_json::json!(["n1", "n2", "n3", "n4", "n5", "n6"]);
    for (thread_id, run_id) in acknowledged
        .iter()
        .filter(|(_, run_id)| present.contains(&run_id.0))
    {
        let ended = run::get(
            &promoted_pool,
            mostrador_queue::ThreadId(*thread_id),
            *run_id,
        )
        .await
        .expect("the run");
        assert_eq!(ended.status, RunStatus::Success, "{ended:?}");
        let saved = checkpointer
            .get(*thread_id, None)
            .await
            .expect("the checkpoint")
            .expect("a finished run has one");
        assert_eq!(
            saved.values["log"], every_node_once,
            "each node's write once: {thread_id}"
        );
    }
    let still_finished: i64 = sqlx::query_scalar(
        "select count(*) from mostrador.runs where status = 'success' and run_id = any($1)",
    )
    .bind(finished_before.iter().copied().collect::<Vec<_>>())
    .fetch_one(&promoted_pool)
    .await
    .expect("runs");
    drop(worker);
    Outcome {
        acknowledged: acknowledged.len(),
        lost,
        unfinished: finished_before.len() - usize::try_from(still_finished).unwrap_or(0),
        promoted,
    }
}

/// Runs enqueued on `pool`'s server since `since`.
async fn enqueued_since(pool: &PgPool, since: Instant) -> i64 {
    let seconds = since.elapsed().as_secs_f64();
    sqlx::query_scalar(
        "select count(*) from mostrador.runs where created_at > now() - make_interval(secs => $1)",
    )
    .bind(seconds)
    .fetch_one(pool)
    .await
    .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs clusters of its own; .ci/run runs it alone"]
async fn failover_to_a_synchronous_standby_loses_nothing_acknowledged() {
    let outcome = fail_over(true).await;
    println!(
        "synchronous standby: {} runs acknowledged, {} lost; the service turned to the promoted \
         standby {:?} after the primary was lost",
        outcome.acknowledged, outcome.lost, outcome.promoted
    );
    assert_eq!(outcome.lost, 0, "acknowledged and lost: {outcome:?}");
    assert_eq!(
        outcome.unfinished, 0,
        "seen finished, then not: {outcome:?}"
    );
    // The same failover with an asynchronous standby loses what the primary acknowledged while
    // the standby was behind: what makes the synchronous one necessary (and this test able to
    // fail).
    let outcome = fail_over(false).await;
    println!(
        "asynchronous standby: {} runs acknowledged, {} lost, {} seen finished no longer",
        outcome.acknowledged, outcome.lost, outcome.unfinished
    );
    assert!(outcome.lost > 0, "nothing lost: {outcome:?}");
}
