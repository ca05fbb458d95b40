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

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn batch_waits_for_its_runs_and_fails_when_one_failed(pool: PgPool) {
    let db = Db::new(pool).await;
    mostrador_retail::retail::load_demo_data(&db.pool)
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

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn cron_enqueues_exactly_once_per_tick_with_three_workers(pool: PgPool) {
    use serde_json::json;

    use crate::retail::{call, token};

    let db = Db::new(pool).await;
    let api = Worker::spawn(&db, "api", "api", &["--jwt-secret", "e2e secret"]);
    let workers: Vec<Worker> = ["a", "b", "c"]
        .iter()
        .map(|name| {
            Worker::start(
                &db,
                name,
                &["--graphs", "e2e_linear_5", "--cron-interval", "20ms"],
            )
        })
        .collect();
    api.until_ready_is(200).await;
    for worker in &workers {
        worker.until_ready_is(200).await;
    }
    let ana = token("e2e secret", "ana", "customer", "madrid-centro");
    let (status, cron) = call(
        &api,
        "POST",
        "/runs/crons",
        &ana,
        Some(json!({"assistant_id": "e2e_linear_5", "schedule": "* * * * *", "input": {}})),
    )
    .await;
    assert_eq!(status, 200, "{cron}");
    let cron_id = cron["cron_id"].as_str().expect("id").to_owned();
    assert!(cron["next_run_date"].is_string(), "{cron}");

    let runs = |pool: PgPool, cron_id: String| async move {
        sqlx::query_scalar::<_, i64>(
            "select count(*) from mostrador.runs where metadata->>'cron_id' = $1",
        )
        .bind(cron_id)
        .fetch_one(&pool)
        .await
        .expect("count")
    };
    for tick in 1..=3 {
        // The minute came (time moved with SQL); then wait until a worker moved the cron on.
        sqlx::query(
            "update mostrador.crons set next_run_at = now() - interval '1 second' where cron_id = $1::uuid",
        )
        .bind(&cron_id)
        .execute(&db.pool)
        .await
        .expect("due");
        let moved = tokio::time::timeout(std::time::Duration::from_secs(20), async {
            // Other processes tick: the row is the only signal there is.
            loop {
                let next: bool = sqlx::query_scalar(
                    "select next_run_at > now() from mostrador.crons where cron_id = $1::uuid",
                )
                .bind(&cron_id)
                .fetch_one(&db.pool)
                .await
                .expect("cron");
                if next {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(moved.is_ok(), "no worker took the tick");
        assert_eq!(
            runs(db.pool.clone(), cron_id.clone()).await,
            tick,
            "tick {tick}"
        );
    }
    let logs: String = workers.iter().map(Worker::log).collect();
    assert!(logs.contains("enqueued the runs of due crons"), "{logs}");

    let (status, found) = call(&api, "POST", "/runs/crons/search", &ana, Some(json!({}))).await;
    assert_eq!(status, 200);
    assert_eq!(found.as_array().map(Vec::len), Some(1), "{found}");
    let luis = token("e2e secret", "luis", "customer", "madrid-centro");
    let (status, _) = call(
        &api,
        "DELETE",
        &format!("/runs/crons/{cron_id}"),
        &luis,
        None,
    )
    .await;
    assert_eq!(status, 404, "someone else's cron does not exist for luis");
    let (status, _) = call(
        &api,
        "DELETE",
        &format!("/runs/crons/{cron_id}"),
        &ana,
        None,
    )
    .await;
    assert_eq!(status, 204);
    let (status, body) = call(
        &api,
        "POST",
        "/runs/crons",
        &ana,
        Some(json!({"assistant_id": "e2e_linear_5", "schedule": "0 0 31 2 *"})),
    )
    .await;
    assert_eq!(status, 422, "{body}");
}
