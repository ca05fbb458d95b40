//! mostrador behind PgBouncer in session mode, as a managed database's pooler stands in front of
//! it: an api and a worker that reach PostgreSQL only through Debian's PgBouncer (1.18, which
//! refuses a connection whose startup packet sets a parameter it does not track). `.ci/run`
//! installs PgBouncer and runs it alone.

use std::path::PathBuf;
use std::time::Duration;

use mostrador_queue::db::DbConfig;
use serde_json::json;
use sqlx::PgPool;

use crate::retail::{call, token};
use crate::support::{Db, Worker};

const SECRET: &str = "e2e secret";

/// A PgBouncer in session mode in front of the test's PostgreSQL, run as `postgres` (it refuses
/// root); stopped when dropped.
struct Bouncer {
    dir: PathBuf,
    port: u16,
}

impl Bouncer {
    fn start(db: &Db) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let options = db.pool.connect_options();
        let dir = std::env::temp_dir().join(format!("mostrador-pgbouncer-{port}"));
        std::fs::create_dir_all(&dir).expect("pgbouncer's folder");
        let ini = format!(
            "[databases]\n* = host={host} port={server}\n\
             [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
             auth_type = trust\nauth_file = {dir}/users.txt\npool_mode = session\n\
             ignore_startup_parameters = extra_float_digits\nmax_client_conn = 200\n\
             default_pool_size = 100\nlogfile = {dir}/pgbouncer.log\npidfile = {dir}/pgbouncer.pid\n",
            host = options.get_host(),
            server = options.get_port(),
            dir = dir.display(),
        );
        std::fs::write(dir.join("pgbouncer.ini"), ini).expect("ini");
        std::fs::write(
            dir.join("users.txt"),
            format!("\"{}\" \"\"\n", options.get_username()),
        )
        .expect("users");
        let owned = std::process::Command::new("chown")
            .args(["-R", "postgres"])
            .arg(&dir)
            .status()
            .expect("chown");
        assert!(owned.success());
        let started = std::process::Command::new("runuser")
            .args(["-u", "postgres", "--", "pgbouncer", "-d"])
            .arg(dir.join("pgbouncer.ini"))
            .status()
            .expect("pgbouncer (Debian's package) is installed");
        assert!(started.success(), "pgbouncer starts");
        Self { dir, port }
    }

    fn url(&self, db: &Db) -> String {
        let options = db.pool.connect_options();
        format!(
            "postgres://{}@127.0.0.1:{}/{}",
            options.get_username(),
            self.port,
            options.get_database().expect("a database")
        )
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("pgbouncer.pid")) {
            let _ = std::process::Command::new("kill").arg(pid.trim()).status();
        }
    }
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
#[ignore = "needs Debian's pgbouncer: .ci/run installs it and runs this alone"]
async fn runs_flow_through_pgbouncer_in_session_mode(pool: PgPool) {
    let db = Db::new(pool).await;
    let bouncer = Bouncer::start(&db);
    let url = bouncer.url(&db);

    // Its settings reach every connection through the pooler.
    let mut config = DbConfig::new(url.clone(), "mostrador-test");
    config.statement_timeout = Duration::from_secs(12);
    let through = config.connect_lazy().expect("pool");
    let timeout: String = sqlx::query_scalar("select current_setting('statement_timeout')")
        .fetch_one(&through)
        .await
        .unwrap_or_else(|err| panic!("a connection through PgBouncer: {err}\n{}", bouncer.log()));
    assert_eq!(timeout, "12s");

    let api = Worker::spawn_at(&url, "api", "api", &["--jwt-secret", SECRET]);
    let worker = Worker::spawn_at(
        &url,
        "worker",
        "worker",
        &["--name", "worker", "--poll-interval", "200ms"],
    );
    api.until_ready_is(200).await;
    worker.until_ready_is(200).await;
    let ana = token(SECRET, "ana", "customer", "madrid-1");

    // A run waited for: claimed, checkpointed, its events written and read, through the pooler.
    let (status, thread) = call(&api, "POST", "/threads", &ana, Some(json!({}))).await;
    assert_eq!(status, 200, "{thread}\n{}", api.log());
    let thread_id = thread["thread_id"].as_str().expect("id").to_owned();
    let (status, values) = call(
        &api,
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        &ana,
        Some(json!({"assistant_id": "e2e_linear_5", "input": {"delay_ms": 10}})),
    )
    .await;
    assert_eq!(status, 200, "{values}");
    assert_eq!(values["log"], json!(["s1", "s2", "s3", "s4", "s5"]));

    // A cancel reaches the worker (NOTIFY and LISTEN through the pooler's sessions).
    let (status, run) = call(
        &api,
        "POST",
        &format!("/threads/{thread_id}/runs"),
        &ana,
        Some(json!({"assistant_id": "e2e_linear_5", "input": {"delay_ms": 10, "slow": {"s2": 60_000}}})),
    )
    .await;
    assert_eq!(status, 200, "{run}");
    let run_id = run["run_id"].as_str().expect("run id").to_owned();
    let mut executions = crate::support::Executions::listen(&db).await;
    let thread_uuid: uuid::Uuid = thread_id.parse().expect("uuid");
    executions
        .until(|e| e.thread_id == thread_uuid && e.node == "s2" && e.phase == "start")
        .await;
    let (status, body) = call(
        &api,
        "POST",
        &format!("/threads/{thread_id}/runs/{run_id}/cancel?wait=true"),
        &ana,
        None,
    )
    .await;
    assert!(status == 200 || status == 204, "{status} {body}");
    let (status, run) = call(
        &api,
        "GET",
        &format!("/threads/{thread_id}/runs/{run_id}"),
        &ana,
        None,
    )
    .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "interrupted", "{run}");
    drop((api, worker));
}
