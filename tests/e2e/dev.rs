//! `mostrador dev` where the Postgres at the default address refuses its user: it runs on a
//! private cluster of its own, as that user (not root), stops it when it exits, and finds its
//! data there the next time.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use uuid::Uuid;

use crate::support::http;

/// The unprivileged user the test runs `dev` as when it runs as root (PostgreSQL refuses root).
const NOBODY: u32 = 65534;

/// A `mostrador-e2e dev` process and what it printed.
struct Dev {
    child: Child,
    port: u16,
    database: String,
    api_key: String,
}

impl Dev {
    async fn start(home: &Path, data_dir: &Path, as_nobody: bool) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let log = std::fs::File::create(home.join(format!("dev-{port}.log"))).expect("log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_mostrador-e2e"));
        command
            .args(["dev", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--data-dir")
            .arg(data_dir)
            .env_remove("MOSTRADOR_DATABASE_URL")
            .env_remove("MOSTRADOR_JWT_SECRET")
            .env_remove("XDG_DATA_HOME")
            .env("HOME", home)
            // A role the server at 127.0.0.1:5432 does not have: it refuses this user.
            .env("PGUSER", "mostrador_dev_refused")
            .env("RUST_LOG", "info,sqlx=warn")
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true);
        if as_nobody {
            command.uid(NOBODY).gid(NOBODY);
        }
        let mut child = command.spawn().expect("mostrador-e2e dev starts");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let (mut database, mut api_key) = (None, None);
        let printed = tokio::time::timeout(Duration::from_secs(120), async {
            while let Some(line) = lines.next_line().await.expect("stdout") {
                if let Some(value) = line.trim().strip_prefix("database: ") {
                    database = Some(value.to_owned());
                }
                if let Some(value) = line.trim().strip_prefix("api key: ") {
                    api_key = Some(value.to_owned());
                }
                if line.trim().starts_with("e.g.:") {
                    return;
                }
            }
            panic!("dev exited before it was running");
        })
        .await;
        assert!(
            printed.is_ok(),
            "dev was not running within 120 s: {}",
            std::fs::read_to_string(home.join(format!("dev-{port}.log"))).unwrap_or_default()
        );
        Self {
            child,
            port,
            database: database.expect("dev prints its database"),
            api_key: api_key.expect("dev prints an API key"),
        }
    }

    async fn request(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        http(
            self.port,
            method,
            path,
            &[
                ("x-api-key", &self.api_key),
                ("content-type", "application/json"),
            ],
            body,
        )
        .await
        .expect("dev answers")
    }

    async fn with_bearer(&self, method: &str, path: &str, token: &str) -> (u16, String) {
        let bearer = format!("Bearer {token}");
        http(
            self.port,
            method,
            path,
            &[
                ("authorization", &bearer),
                ("content-type", "application/json"),
            ],
            "{}",
        )
        .await
        .expect("dev answers")
    }

    /// SIGTERM, as Ctrl-C would, and its exit.
    async fn stop(mut self) -> ExitStatus {
        let pid = self.child.id().expect("running");
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("dev exits within 60 s of SIGTERM")
            .expect("wait")
    }
}

/// `mostrador token --dev`, as the user whose home is `home`.
async fn mint_dev_token(home: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_mostrador-e2e"))
        .args([
            "token", "--dev", "--sub", "dev", "--role", "manager", "--store", "dev",
        ])
        .env("HOME", home)
        .env_remove("XDG_DATA_HOME")
        .env_remove("MOSTRADOR_JWT_SECRET")
        .output()
        .await
        .expect("token runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

#[tokio::test]
async fn dev_refused_by_the_default_server_runs_on_a_private_cluster_it_stops_and_reuses() {
    let home = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("dev-{}", Uuid::now_v7()));
    std::fs::create_dir_all(&home).expect("a home folder");
    // PostgreSQL runs as no root: as root, the test runs dev as nobody, as a user would.
    let as_nobody = std::fs::metadata("/proc/self").expect("procfs").uid() == 0;
    if as_nobody {
        std::os::unix::fs::chown(&home, Some(NOBODY), Some(NOBODY)).expect("chown");
    }
    let data_dir = home.join("pg");

    let first = Dev::start(&home, &data_dir, as_nobody).await;
    assert!(
        first.database.starts_with("a private cluster in"),
        "{}",
        first.database
    );
    let (status, thread) = first.request("POST", "/threads", "{}").await;
    assert_eq!(status, 200, "{thread}");
    let thread: serde_json::Value = serde_json::from_str(&thread).expect("JSON");
    let thread_id = thread["thread_id"].as_str().expect("an id").to_owned();
    let (status, values) = first
        .request(
            "POST",
            &format!("/threads/{thread_id}/runs/wait"),
            r#"{"assistant_id": "bench_linear_1", "input": {}}"#,
        )
        .await;
    assert_eq!(status, 200, "{values}");
    assert!(
        values.contains(r#""log":["n1"]"#),
        "the run completed: {values}"
    );
    // Tokens are signed with this user's own secret, kept for them alone: the public development
    // secret of earlier releases is worth nothing.
    let secret = home.join(".local/share/mostrador/dev-jwt-secret");
    let mode = std::fs::metadata(&secret)
        .expect("dev made its secret")
        .mode();
    assert_eq!(mode & 0o777, 0o600, "readable by its user alone");
    let minted = mint_dev_token(&home).await;
    assert_eq!(
        first
            .with_bearer("POST", "/threads/search", &minted)
            .await
            .0,
        200
    );
    let public = mostrador_api::auth::mint(
        &mostrador_api::AuthConfig {
            secret: "mostrador-dev-secret".into(),
            jwks_url: None,
            issuer: "mostrador".into(),
            audience: "mostrador".into(),
            claims: mostrador_api::ClaimPaths::default(),
        },
        &mostrador_api::Caller::new("dev"),
        Duration::from_secs(60),
    )
    .expect("token");
    assert_eq!(
        first
            .with_bearer("POST", "/threads/search", &public)
            .await
            .0,
        401
    );
    let api_key = first.api_key.clone();
    assert!(first.stop().await.success());
    assert!(
        !data_dir.join("postmaster.pid").exists(),
        "the cluster stopped with dev"
    );

    let second = Dev::start(&home, &data_dir, as_nobody).await;
    assert!(
        second.database.starts_with("a private cluster in"),
        "{}",
        second.database
    );
    assert_eq!(
        second
            .with_bearer("POST", "/threads/search", &minted)
            .await
            .0,
        200,
        "the secret outlives a restart"
    );
    let again = Dev { api_key, ..second };
    let (status, found) = again
        .request("GET", &format!("/threads/{thread_id}"), "")
        .await;
    assert_eq!(
        status, 200,
        "the thread of the first start is there: {found}"
    );
    assert!(again.stop().await.success());
    assert!(!data_dir.join("postmaster.pid").exists());
    let _ = std::fs::remove_dir_all(&home);
}

#[tokio::test]
async fn dev_refuses_to_listen_beyond_loopback_unless_told_to() {
    let output = Command::new(env!("CARGO_BIN_EXE_mostrador-e2e"))
        .args(["dev", "--listen", "0.0.0.0:0"])
        // Nothing may be reached before the refusal: not even a database.
        .args(["--database-url", "postgres://nobody@127.0.0.1:1/none"])
        .output()
        .await
        .expect("mostrador-e2e dev runs");
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("loopback only") && said.contains("--allow-remote"),
        "{said}"
    );
}
