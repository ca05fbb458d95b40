//! A rolling upgrade with runs in flight, as `helm upgrade` makes it: the previous landing's binary
//! (built by `tests/upgrade/run` from the commit in `tests/upgrade/FROM`) migrated the database and
//! serves runs, a stream and a waiting interrupt; this binary's migrations apply under it; this
//! binary's api and worker start; the old ones are stopped as Kubernetes stops them (SIGTERM).

use std::path::PathBuf;
use std::time::Duration;

use mostrador_queue::run::{self, RunId};
use mostrador_queue::{RunStatus, ThreadId};
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::live::{Got, all, follow};
use crate::retail::{call, token};
use crate::support::{Db, Executions, Worker, assert_status, this_binary};

const SECRET: &str = "e2e secret";
const MINUTE: Duration = Duration::from_secs(60);

/// The previous release's `mostrador-e2e`, which `tests/upgrade/run` builds.
fn previous_binary() -> PathBuf {
    let path = std::env::var_os("MOSTRADOR_UPGRADE_FROM_BIN").map(PathBuf::from).expect(
        "MOSTRADOR_UPGRADE_FROM_BIN names the previous landing's mostrador-e2e: run tests/upgrade/run",
    );
    assert!(path.is_file(), "no binary at {}", path.display());
    path
}

async fn migrate(binary: &PathBuf, db: &Db) {
    let out = tokio::process::Command::new(binary)
        .args(["migrate", "--database-url", &db.url])
        .output()
        .await
        .expect("migrate runs");
    assert!(
        out.status.success(),
        "{} migrate: {}",
        binary.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn migrations(db: &Db) -> i64 {
    sqlx::query_scalar("select count(*) from _sqlx_migrations")
        .fetch_one(&db.pool)
        .await
        .expect("migrations")
}

/// The thread's one run, once it has ended.
async fn ended(db: &Db, thread_id: &str) -> mostrador_queue::Run {
    let thread_id: Uuid = thread_id.parse().expect("thread id");
    let run_id: Uuid = sqlx::query_scalar(
        "select run_id from mostrador.runs where thread_id = $1 order by seq desc limit 1",
    )
    .bind(thread_id)
    .fetch_one(&db.pool)
    .await
    .expect("the thread's run");
    let run = run::get(&db.pool, ThreadId(thread_id), RunId(run_id))
        .await
        .expect("run");
    db.until_end(&run, MINUTE).await
}

#[sqlx::test(migrations = false)]
#[ignore = "needs the previous landing's binary: tests/upgrade/run builds it and runs this"]
async fn an_upgrade_with_runs_in_flight_loses_nothing(pool: PgPool) {
    let previous = previous_binary();
    let db = Db::new(pool).await;
    migrate(&previous, &db).await;
    let before = migrations(&db).await;
    let mut executions = Executions::listen(&db).await;

    // The previous release serves.
    let mut old_api =
        Worker::spawn_from(&previous, &db, "old-api", "api", &["--jwt-secret", SECRET]);
    let drain = [
        "--drain-timeout",
        "15s",
        "--grace-period",
        "20s",
        "--max-runs",
        "3",
    ];
    let mut old_worker = Worker::start_from(&previous, &db, "old-worker", &drain);
    old_api.until_ready_is(200).await;
    old_worker.until_ready_is(200).await;
    let ana = token(SECRET, "ana", "customer", "madrid-1");
    let new_thread = async |api: &Worker| {
        let (status, thread) = call(api, "POST", "/threads", &ana, Some(json!({}))).await;
        assert_eq!(status, 200, "{thread}");
        thread["thread_id"].as_str().expect("thread id").to_owned()
    };

    // A run waiting on a human, under the previous release.
    let approval = new_thread(&old_api).await;
    let (status, waiting) = call(
        &old_api,
        "POST",
        &format!("/threads/{approval}/runs/wait"),
        &ana,
        Some(json!({"assistant_id": "e2e_approval", "input": {}})),
    )
    .await;
    assert_eq!(status, 200, "{waiting}");
    assert_eq!(waiting["__interrupt__"][0]["value"]["question"], "approve?");

    // A streamed run, its third node slow: it is mid-run when the upgrade comes.
    let streamed = new_thread(&old_api).await;
    let body = json!({"assistant_id": "e2e_linear_6",
        "input": {"delay_ms": 100, "slow": {"s3": 4000}},
        "stream_mode": ["values", "updates"]})
    .to_string();
    let request = format!(
        "POST /threads/{streamed}/runs/stream HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Authorization: Bearer {ana}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (sender, live) = mpsc::unbounded_channel();
    let live_client = tokio::spawn(follow(old_api.addr(), request, None, sender));
    let streamed_id: Uuid = streamed.parse().expect("thread id");
    executions
        .until(|e| e.thread_id == streamed_id && e.node == "s3" && e.phase == "start")
        .await;

    // Background runs: with the streamed one, more than the old worker takes at once, so some are
    // running and some queued when the upgrade comes.
    let mut background = Vec::new();
    for _ in 0..4 {
        let thread = new_thread(&old_api).await;
        let (status, body) = call(
            &old_api,
            "POST",
            &format!("/threads/{thread}/runs"),
            &ana,
            Some(json!({"assistant_id": "e2e_linear_6", "input": {"delay_ms": 400}})),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        background.push(thread);
    }

    // The upgrade's migration job, under the running release: it stays ready.
    migrate(&this_binary(), &db).await;
    let after = migrations(&db).await;
    assert!(
        after > before,
        "this release adds migrations ({before} → {after})"
    );
    for old in [&old_api, &old_worker] {
        let (status, body) = old.get("/ready").await.expect("ready");
        assert_eq!(
            status, 200,
            "{} stays ready on the newer schema: {body}",
            old.name
        );
    }

    // The new release starts, then the old one is stopped.
    let new_api = Worker::spawn(&db, "new-api", "api", &["--jwt-secret", SECRET]);
    let _new_worker = Worker::start(&db, "new-worker", &[]);
    new_api.until_ready_is(200).await;
    old_worker.terminate();
    old_api.terminate();
    for old in [&mut old_worker, &mut old_api] {
        let exit = old.exit(MINUTE).await;
        assert!(
            exit.success(),
            "{} exits 0: {exit}\n{}",
            old.name,
            old.log()
        );
    }
    live_client.await.expect("live client");
    let mut seen: Vec<Got> = all(live).await;

    // The streamed run's client reconnects to the new api where it stopped.
    let run_id: Uuid = sqlx::query_scalar("select run_id from mostrador.runs where thread_id = $1")
        .bind(streamed_id)
        .fetch_one(&db.pool)
        .await
        .expect("the streamed run");
    let last = seen.last().map_or(0, |(id, ..)| *id);
    let rejoin = format!(
        "GET /threads/{streamed}/runs/{run_id}/stream HTTP/1.1\r\nHost: localhost\r\n\
         Connection: close\r\nAuthorization: Bearer {ana}\r\nLast-Event-ID: {last}\r\n\r\n"
    );
    let (sender, rest) = mpsc::unbounded_channel();
    tokio::time::timeout(MINUTE, follow(new_api.addr(), rejoin, None, sender))
        .await
        .expect("the rejoined stream ends with the run");
    seen.extend(all(rest).await);

    // The store's manager answers through the new release.
    let marta = token(SECRET, "marta", "manager", "madrid-1");
    let (status, resumed) = call(
        &new_api,
        "POST",
        &format!("/threads/{approval}/runs/wait"),
        &marta,
        Some(json!({"assistant_id": "e2e_approval", "command": {"resume": "approved"}})),
    )
    .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(
        (&resumed["decision"], &resumed["refund"]),
        (&json!("approved"), &json!(40)),
        "{resumed}"
    );

    // Every run succeeded, and no node ran twice: no finished superstep was repeated.
    let streamed_run = ended(&db, &streamed).await;
    assert_status(&streamed_run, RunStatus::Success);
    assert_eq!(
        (
            streamed_run.drain_count,
            streamed_run.attempt - streamed_run.drain_count
        ),
        (1, 1),
        "the streamed run was handed over once by the old worker's drain, using no attempt"
    );
    assert_status(&ended(&db, &approval).await, RunStatus::Success);
    for thread in background.iter().chain([&streamed]) {
        assert_status(&ended(&db, thread).await, RunStatus::Success);
        let starts = db.counts(thread.parse().expect("id"), "start").await;
        assert_eq!(
            starts.values().copied().collect::<Vec<_>>(),
            [1; 6],
            "each of the six nodes started once on {thread}: {starts:?}"
        );
    }
    let values = db.values(streamed_id).await;
    assert_eq!(values["log"], json!(["s1", "s2", "s3", "s4", "s5", "s6"]));

    // The stream's client, across both apis, got the run's log: every event once, in order.
    let logged: Vec<(i64, String, Value)> = sqlx::query_as(
        "select seq, event, data from mostrador.run_events where run_id = $1 \
         and event in ('values', 'updates') order by seq",
    )
    .bind(run_id)
    .fetch_all(&db.pool)
    .await
    .expect("events");
    assert_eq!(
        seen, logged,
        "the client saw exactly the logged events, once each, in order"
    );
    assert!(
        seen.iter().any(|(id, ..)| *id > last),
        "the new api sent what the old one did not"
    );
}
