//! A project's `langgraph.json` is read whole when a process starts: a key mostrador does not
//! honour stops `dev`, `api` and `worker` at once, naming the key and what to do, before any
//! graph or run is served.

use std::process::Stdio;

use sqlx::PgPool;
use tokio::process::Command;

use crate::support::Db;

/// `mostrador-e2e <command> --config <a langgraph.json of `text`>`, to its end: success, stderr.
async fn start(db: &Db, command: &str, text: &str) -> (bool, String) {
    let folder = std::env::temp_dir().join(format!("mostrador-project-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&folder).expect("a folder");
    let config = folder.join("langgraph.json");
    std::fs::write(&config, text).expect("langgraph.json");
    let mut args = vec![command, "--database-url", &db.url];
    if command == "dev" {
        args.extend(["--listen", "127.0.0.1:0"]);
    }
    let config = config.to_string_lossy().into_owned();
    let output = Command::new(env!("CARGO_BIN_EXE_mostrador-e2e"))
        .args(&args)
        .args(["--config", &config, "--python", "python3"])
        .env("RUST_LOG", "warn")
        .env("MOSTRADOR_JWT_SECRET", "project-test-secret")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), output)
        .await
        .expect("refused within a minute, not served")
        .expect("output");
    let _ = std::fs::remove_dir_all(&folder);
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn a_project_with_a_key_mostrador_does_not_honour_is_refused_at_start_up_by_name(
    pool: PgPool,
) {
    let db = Db::new(pool).await;
    for (text, named) in [
        (
            r#"{"graphs": {"agent": "./agent.py:graph"},
                "auth": {"path": "./auth.py:auth", "cache": {}}}"#,
            "auth.cache",
        ),
        (
            r#"{"graphs": {"agent": "./agent.py:graph"}, "http": {"app": "app"}}"#,
            "http.app",
        ),
        (
            r#"{"graphs": {"agent": "./agent.py:graph"}, "store": {"index": {"dims": 3}}}"#,
            "store.index",
        ),
    ] {
        for command in ["dev", "api", "worker"] {
            let (started, stderr) = start(&db, command, text).await;
            assert!(!started, "{command} served {text}");
            assert!(stderr.contains(named), "{command}, {named}: {stderr}");
        }
    }
    // The api answers a project's own code in one language.
    let mixed = r#"{"graphs": {"agent": "./src/agent.ts:graph"}, "auth": {"path": "./src/auth.ts:auth"},
                    "http": {"app": "./app.py:app"}}"#;
    for command in ["dev", "api"] {
        let (started, stderr) = start(&db, command, mixed).await;
        assert!(!started, "{command} served {mixed}");
        assert!(stderr.contains("one language"), "{command}: {stderr}");
    }
}
