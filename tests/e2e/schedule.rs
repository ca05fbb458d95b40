//! Runs submitted by an external scheduler: `mostrador enqueue` and `mostrador batch` wait for
//! their runs, summarise them, and exit non-zero when one failed.

use std::process::Stdio;

use sqlx::PgPool;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::support::{Db, Worker};

/// Runs a command of the binary to its end: exit success, stdout, stderr.
async fn command(db: &Db, args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mostrador-e2e"))
        .args(args)
        .args(["--database-url", &db.url])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the binary starts");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.as_bytes())
        .await
        .expect("write stdin");
    drop(input);
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the command ended within a minute")
        .expect("output");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn batch_waits_for_its_runs_and_fails_when_one_failed(pool: PgPool) {
    let db = Db::new(pool).await;
    mostrador_agents::retail::load_demo_data(&db.pool)
        .await
        .expect("demo data");
    let worker = Worker::start(&db, "worker", &["--graphs", "fichas,compras"]);
    worker.until_ready_is(200).await;

    let lines = "{\"product_id\": \"MOCH-25\"}\n\n{\"product_id\": \"SACO-5\"}\n{\"product_id\": \"NO-SUCH\"}\n";
    let (ok, stdout, stderr) =
        command(&db, &["batch", "--graph", "fichas", "--inputs", "-"], lines).await;
    assert!(!ok, "a failed run fails the command\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("3 runs: 2 success, 1 failed"),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("NO-SUCH"), "the failure is named: {stdout}");
    let sheets: i64 = sqlx::query_scalar("select count(*) from retail.product_sheets")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(sheets, 2);

    let (ok, stdout, stderr) = command(
        &db,
        &[
            "enqueue",
            "--graph",
            "compras",
            "--config",
            "{\"max_concurrency\": 4}",
        ],
        "",
    )
    .await;
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("1 runs: 1 success"), "{stdout}");
    let owners: Vec<String> =
        sqlx::query_scalar("select distinct owner from mostrador.threads order by 1")
            .fetch_all(&db.pool)
            .await
            .expect("owners");
    assert_eq!(owners, ["scheduler"]);

    let (ok, _, stderr) = command(&db, &["enqueue", "--graph", "nope"], "").await;
    assert!(!ok);
    assert!(stderr.contains("no graph \"nope\""), "{stderr}");
    let (ok, _, stderr) = command(
        &db,
        &["batch", "--graph", "fichas", "--inputs", "-"],
        "[1]\n",
    )
    .await;
    assert!(!ok);
    assert!(stderr.contains("line 1 is not a JSON object"), "{stderr}");
}
