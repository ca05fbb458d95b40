//! Worker processes of the built binary under SIGTERM, SIGKILL, cancels, long nodes, timeouts
//! and failing nodes.

use std::time::{Duration, Instant};

use mostrador_queue::run::cancel::cancel;
use mostrador_queue::thread;
use mostrador_queue::{CancelAction, Error as QueueError, RunStatus, ThreadStatus};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::{Db, Executions, Worker, assert_status};

const MINUTE: Duration = Duration::from_secs(60);

/// Which process executed each node of the thread (the pids of its starts, in order).
async fn starters(db: &Db, thread_id: Uuid) -> Vec<(String, i32)> {
    sqlx::query_as(
        "select node, pid from e2e_executions where thread_id = $1 and phase = 'start' order by id",
    )
    .bind(thread_id)
    .fetch_all(&db.pool)
    .await
    .expect("starters")
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn drained_run_resumes_on_another_worker_without_repeating_supersteps(pool: PgPool) {
    let db = Db::new(pool).await;
    let mut executions = Executions::listen(&db).await;
    let drain_timeout = Duration::from_secs(10);
    let mut a = Worker::start(
        &db,
        "a",
        &["--drain-timeout", "10s", "--grace-period", "15s"],
    );
    let run = db
        .enqueue(
            "e2e_linear_6",
            json!({"delay_ms": 100, "slow": {"s3": 1500}}),
        )
        .await;
    let thread_id = run.thread_id.0;
    executions
        .until(|e| e.thread_id == thread_id && e.node == "s3" && e.phase == "start")
        .await;
    let b = Worker::start(&db, "b", &[]);
    b.until_ready_is(200).await;
    let (code, metrics) = a.get("/metrics").await.expect("metrics");
    assert_eq!(code, 200);
    for line in [
        "mostrador_worker_runs_in_flight 1",
        "mostrador_worker_runs_claimed_total 1",
        "mostrador_worker_superstep_seconds_count{graph=\"e2e_linear_6\"} 2",
        "mostrador_worker_checkpoint_write_seconds_count{kind=\"checkpoint\"} 3",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }

    let sigterm = Instant::now();
    a.terminate();
    a.until_ready_is(503).await;
    let exit = a.exit(drain_timeout).await;
    assert!(
        exit.success(),
        "A exits 0 after draining: {exit}\n{}",
        a.log()
    );
    assert!(sigterm.elapsed() < drain_timeout);
    assert_eq!(a.get("/live").await.ok(), None, "A is gone");

    let ended = db.until_end(&run, MINUTE).await;
    assert_status(&ended, RunStatus::Success);
    assert_eq!(
        (ended.drain_count, ended.attempt - ended.drain_count),
        (1, 1),
        "one drain, and it used no attempt"
    );
    let ran = starters(&db, thread_id).await;
    let a_pid = i32::try_from(a.pid).expect("pid");
    let expected: Vec<(String, bool)> = (1..=6)
        .map(|step| (format!("s{step}"), step <= 3))
        .collect();
    let actual: Vec<(String, bool)> = ran
        .iter()
        .map(|(node, pid)| (node.clone(), *pid == a_pid))
        .collect();
    assert_eq!(
        actual, expected,
        "every node ran exactly once: s1..s3 on A, s4..s6 on B"
    );
    assert_eq!(
        db.values(thread_id).await["log"],
        json!(["s1", "s2", "s3", "s4", "s5", "s6"])
    );
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn sigkill_mid_superstep_reruns_only_unfinished_tasks(pool: PgPool) {
    let db = Db::new(pool).await;
    let mut executions = Executions::listen(&db).await;
    let input = json!({"width": 6, "delay_ms": 300});
    let mut a = Worker::start(&db, "a", &["--lease", "2s"]);
    let run = db.enqueue("e2e_fanout", input.clone()).await;
    let thread_id = run.thread_id.0;
    // Tasks finish 300 ms apart: after the third, the first two are surely saved and the last
    // three still run.
    for _ in 0..3 {
        executions
            .until(|e| e.thread_id == thread_id && e.node == "work" && e.phase == "finish")
            .await;
    }
    a.kill().await;

    let saved: Vec<String> = sqlx::query_scalar(
        "select distinct task_id from mostrador.checkpoint_writes where thread_id = $1",
    )
    .bind(thread_id)
    .fetch_all(&db.pool)
    .await
    .expect("saved writes");
    assert!(
        (2..6).contains(&saved.len()),
        "the kill landed mid-superstep: {saved:?}"
    );

    let b = Worker::start(&db, "b", &["--lease", "2s"]);
    let ended = db.until_end(&run, MINUTE).await;
    assert_status(&ended, RunStatus::Success);

    let starts: Vec<(String, String, i64)> = sqlx::query_as(
        "select node, task, count(*) from e2e_executions
         where thread_id = $1 and phase = 'start' group by node, task",
    )
    .bind(thread_id)
    .fetch_all(&db.pool)
    .await
    .expect("starts");
    for (node, task, count) in &starts {
        let limit = if node == "work" && !saved.contains(task) {
            2
        } else {
            1
        };
        assert!(
            *count <= limit,
            "{node} task {task} started {count} times (limit {limit}); saved: {saved:?}"
        );
    }
    assert_eq!(starts.iter().filter(|(node, ..)| node == "work").count(), 6);

    let uninterrupted = db.enqueue("e2e_fanout", input).await;
    assert_status(
        &db.until_end(&uninterrupted, MINUTE).await,
        RunStatus::Success,
    );
    assert_eq!(
        db.values(thread_id).await,
        db.values(uninterrupted.thread_id.0).await,
        "the final state equals an uninterrupted run's"
    );
    drop(b);
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn cancel_running_run_interrupt_and_rollback(pool: PgPool) {
    let db = Db::new(pool).await;
    let mut executions = Executions::listen(&db).await;
    let mut a = Worker::start(&db, "a", &[]);
    let input = json!({"slow": {"s2": 60_000}});

    let run = db.enqueue("e2e_linear_5", input.clone()).await;
    executions
        .until(|e| e.thread_id == run.thread_id.0 && e.node == "s2" && e.phase == "start")
        .await;
    cancel(&db.pool, run.thread_id, run.run_id, CancelAction::Interrupt)
        .await
        .expect("cancel");
    let ended = db.until_end(&run, MINUTE).await;
    assert_status(&ended, RunStatus::Interrupted);
    assert_eq!(
        db.values(run.thread_id.0).await["log"],
        json!(["s1"]),
        "interrupt keeps the last checkpoint"
    );
    assert_eq!(
        thread::get(&db.pool, run.thread_id)
            .await
            .expect("thread")
            .status,
        ThreadStatus::Idle
    );

    let run = db.enqueue("e2e_linear_5", input).await;
    executions
        .until(|e| e.thread_id == run.thread_id.0 && e.node == "s2" && e.phase == "start")
        .await;
    cancel(&db.pool, run.thread_id, run.run_id, CancelAction::Rollback)
        .await
        .expect("cancel");
    // The run is deleted with its events: nothing is left to listen to, so poll for its absence.
    let deleted = tokio::time::timeout(MINUTE, async {
        loop {
            match mostrador_queue::run::get(&db.pool, run.thread_id, run.run_id).await {
                Err(QueueError::RunNotFound(_)) => return,
                Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                Err(err) => panic!("{err}"),
            }
        }
    })
    .await;
    assert!(deleted.is_ok(), "rollback deleted the run\n{}", a.log());
    let checkpoints: i64 =
        sqlx::query_scalar("select count(*) from mostrador.checkpoints where thread_id = $1")
            .bind(run.thread_id.0)
            .fetch_one(&db.pool)
            .await
            .expect("count");
    assert_eq!(checkpoints, 0, "rollback deletes the run's checkpoints");
    assert_eq!(
        db.counts(run.thread_id.0, "finish").await.get("s2"),
        None,
        "the cancelled node was aborted"
    );

    a.terminate();
    assert!(a.exit(MINUTE).await.success());
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn long_node_keeps_its_lease(pool: PgPool) {
    let db = Db::new(pool).await;
    let mut executions = Executions::listen(&db).await;
    let a = Worker::start(&db, "a", &["--lease", "1s"]);
    let run = db
        .enqueue("e2e_linear_5", json!({"slow": {"s2": 3500}}))
        .await;
    executions
        .until(|e| e.thread_id == run.thread_id.0 && e.node == "s2" && e.phase == "start")
        .await;
    // Another worker sweeps every 300 ms: it would take the run back the moment A's lease lapsed.
    let b = Worker::start(&db, "b", &["--lease", "1s"]);

    let ended = db.until_end(&run, MINUTE).await;
    assert_status(&ended, RunStatus::Success);
    assert_eq!(
        ended.attempt,
        1,
        "never re-dispatched\n{}\n{}",
        a.log(),
        b.log()
    );
    let starts = db.counts(run.thread_id.0, "start").await;
    assert!(starts.values().all(|count| *count == 1), "{starts:?}");
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn run_timeout_ends_run_as_timeout(pool: PgPool) {
    let db = Db::new(pool).await;
    let _a = Worker::start(&db, "a", &["--run-timeout", "1s"]);
    let run = db
        .enqueue("e2e_linear_5", json!({"slow": {"s2": 60_000}}))
        .await;
    let ended = db.until_end(&run, MINUTE).await;
    assert_status(&ended, RunStatus::Timeout);
    assert_eq!(
        thread::get(&db.pool, run.thread_id)
            .await
            .expect("thread")
            .status,
        ThreadStatus::Error
    );
    assert_eq!(db.counts(run.thread_id.0, "finish").await.get("s2"), None);
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn node_error_is_recorded_and_retried_by_policy(pool: PgPool) {
    let db = Db::new(pool).await;
    let _a = Worker::start(&db, "a", &[]);

    // Two failures: the node's retry policy (3 attempts) absorbs them within one run attempt.
    let run = db.enqueue("e2e_flaky", json!({"fail_times": 2})).await;
    let ended = db.until_end(&run, MINUTE).await;
    assert_status(&ended, RunStatus::Success);
    assert_eq!(ended.attempt, 1);
    assert_eq!(db.counts(run.thread_id.0, "start").await["flaky"], 3);

    // Always failing: each run attempt spends the node's 3 tries, then the run is retried until
    // its max_attempts, then it ends `error` with the error recorded.
    let run = db
        .enqueue_with("e2e_flaky", |new| mostrador_queue::run::NewRun {
            input: Some(json!({"fail_times": 1000})),
            max_attempts: 2,
            ..new
        })
        .await;
    let ended = db.until_end(&run, MINUTE).await;
    assert_status(&ended, RunStatus::Error);
    assert_eq!(ended.attempt, 2);
    let error = ended.error.expect("the error is recorded");
    assert_eq!(error["error"], "NodeError", "{error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|message| message.contains("flaky failure")),
        "{error}"
    );
    assert_eq!(db.counts(run.thread_id.0, "start").await["flaky"], 6);
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn worker_stays_ready_on_a_newer_schema_but_not_on_an_older_one(pool: PgPool) {
    let db = Db::new(pool).await;
    let a = Worker::start(&db, "a", &[]);
    a.until_ready_is(200).await;
    assert_eq!(a.get("/live").await.expect("live").0, 200);

    // A newer release migrated the database during its rollout: this one goes on serving
    // (migrations only add). Readiness checks the schema on every request.
    sqlx::query(
        "insert into _sqlx_migrations (version, description, success, checksum, execution_time)
         select 99999999999999, 'from the future', true, checksum, 0 from _sqlx_migrations limit 1",
    )
    .execute(&db.pool)
    .await
    .expect("future migration");
    assert_eq!(a.get("/ready").await.expect("ready").0, 200);

    // A migration this binary needs is missing: not ready, still alive.
    sqlx::query(
        "delete from _sqlx_migrations where version = (
             select max(version) from _sqlx_migrations where version < 99999999999999)",
    )
    .execute(&db.pool)
    .await
    .expect("remove a migration");
    a.until_ready_is(503).await;
    let (_, body) = a.get("/ready").await.expect("ready");
    assert!(body.contains("behind"), "{body}");
    assert_eq!(a.get("/live").await.expect("live").0, 200, "still alive");
}

/// A worker killed with its runs (SIGKILL, an OOM kill of its container) and started again under
/// its name takes them back at once, not after their lease (a minute here); a worker of the same
/// name that is alive (not a previous incarnation) keeps its runs.
#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn a_restarted_worker_takes_back_its_previous_incarnations_runs_at_once(pool: PgPool) {
    let db = Db::new(pool).await;
    let mut executions = Executions::listen(&db).await;
    let input = json!({"width": 2, "delay_ms": 1500});
    let mut first = Worker::start(&db, "pod-0", &["--lease", "60s"]);
    let run = db.enqueue("e2e_fanout", input.clone()).await;
    executions
        .until(|e| e.thread_id == run.thread_id.0 && e.node == "work" && e.phase == "start")
        .await;
    first.kill().await;
    let restarted = Instant::now();
    let again = Worker::start(&db, "pod-0", &["--lease", "60s"]);
    let ended = db.until_end(&run, MINUTE).await;
    assert_status(&ended, RunStatus::Success);
    assert!(
        restarted.elapsed() < Duration::from_secs(15),
        "taken back after {:?}, its work 1.5 s (the lease: 60 s)",
        restarted.elapsed()
    );
    assert_eq!(ended.attempt, 2, "retried once");

    // Another worker of that name while this one lives is no incarnation of it.
    let run = db.enqueue("e2e_fanout", input).await;
    executions
        .until(|e| e.thread_id == run.thread_id.0 && e.node == "work" && e.phase == "start")
        .await;
    let twin = Worker::start(
        &db,
        "pod-0",
        &["--lease", "60s", "--graphs", "e2e_linear_6"],
    );
    twin.until_ready_is(200).await;
    let ended = db.until_end(&run, MINUTE).await;
    assert_status(&ended, RunStatus::Success);
    assert_eq!(ended.attempt, 1, "not taken from a live worker");
    drop((again, twin));
}

/// An MCP tool call is a stateless run its call waits for: a worker's SIGTERM mid-run drains it,
/// another worker goes on from its last checkpoint, and the call answers once, with the whole
/// run's final state, every node having run once.
#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn an_mcp_tool_call_survives_a_workers_drain_and_answers_once(pool: PgPool) {
    let db = Db::new(pool).await;
    let mut executions = Executions::listen(&db).await;
    let api = Worker::spawn(&db, "api", "api", &["--jwt-secret", "e2e secret"]);
    let mut a = Worker::start(
        &db,
        "a",
        &["--drain-timeout", "10s", "--grace-period", "15s"],
    );
    api.until_ready_is(200).await;
    let ana = mostrador_api::Caller::new("ana")
        .with_roles(["customer"])
        .in_tenant(Some("madrid-1"));
    let token = mostrador_api::auth::mint(
        &crate::retail::retail_auth("e2e secret"),
        &ana,
        Duration::from_secs(300),
    )
    .expect("token");
    let bearer = format!("Bearer {token}");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let call = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "e2e_linear_6", "arguments": {"delay_ms": 100, "slow": {"s3": 1500}}},
    })
    .to_string();

    let drain = async {
        let s3 = executions
            .until(|e| e.node == "s3" && e.phase == "start")
            .await;
        let b = Worker::start(&db, "b", &[]);
        b.until_ready_is(200).await;
        a.terminate();
        let exit = a.exit(Duration::from_secs(10)).await;
        assert!(
            exit.success(),
            "A exits 0 after draining: {exit}\n{}",
            a.log()
        );
        (s3.thread_id, b)
    };
    let (answered, (thread_id, _b)) =
        tokio::join!(api.request("POST", "/mcp", &headers, &call), drain);
    let (status, body) = answered.expect("the call is answered");
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).expect("JSON-RPC");
    assert_eq!(answer["id"], 7);
    assert_eq!(
        answer["result"]["isError"],
        serde_json::Value::Null,
        "{answer}"
    );
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .expect("text");
    assert!(
        text.contains("'log': ['s1', 's2', 's3', 's4', 's5', 's6']"),
        "the whole run's final state, as Python writes it: {text}"
    );
    let a_pid = i32::try_from(a.pid).expect("pid");
    let ran: Vec<(String, bool)> = starters(&db, thread_id)
        .await
        .into_iter()
        .map(|(node, pid)| (node, pid == a_pid))
        .collect();
    let expected: Vec<(String, bool)> = (1..=6)
        .map(|step| (format!("s{step}"), step <= 3))
        .collect();
    assert_eq!(
        ran, expected,
        "every node ran once: s1..s3 on A, s4..s6 on B"
    );
}
