//! Postgres restarting under load. It restarts the machine's Postgres, so it is not part of the
//! parallel suite: `.ci/run` runs it on its own (`--run-ignored only`).

use std::collections::BTreeMap;
use std::time::Duration;

use mostrador_queue::run::NewRun;
use serde_json::json;
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::retail::token;
use crate::support::{Db, Worker};

/// Follows a run's stream through the api until the run has ended, reconnecting with
/// `Last-Event-ID` after every cut, as the SDKs do: a stream that closes is checked against the
/// run's status (it sends no `end` of its own); returns the ids received.
pub(crate) async fn watch(api_addr: (&'static str, u16), bearer: String, path: String) -> Vec<i64> {
    let mut ids: Vec<i64> = Vec::new();
    loop {
        let last = ids.last().copied().unwrap_or(0);
        let attempt = async {
            let mut socket = tokio::net::TcpStream::connect(api_addr).await.ok()?;
            let request = format!(
                "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
                 Authorization: {bearer}\r\nLast-Event-ID: {last}\r\n\r\n"
            );
            socket.write_all(request.as_bytes()).await.ok()?;
            let (mut received, mut buffer) = (String::new(), [0u8; 8192]);
            let mut got = Vec::new();
            while let Ok(n) = socket.read(&mut buffer).await {
                if n == 0 {
                    break;
                }
                received.push_str(&String::from_utf8_lossy(&buffer[..n]));
                while let Some(end) = received.find("\n\n") {
                    let block: String = received.drain(..end + 2).collect();
                    if let Some(id) = block
                        .lines()
                        .find_map(|l| l.strip_prefix("id: "))
                        .and_then(|id| id.trim().parse::<i64>().ok())
                    {
                        got.push(id);
                    }
                }
            }
            Some(got)
        };
        if let Some(got) = attempt.await {
            ids.extend(got);
            if ended(api_addr, &bearer, path.trim_end_matches("/stream")).await {
                return ids;
            }
        }
        // Cut (the database or the api's listener went away): reconnect after `last`.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether the run at `run_path` has ended, as the api says (`false` when it cannot say).
async fn ended(api_addr: (&'static str, u16), bearer: &str, run_path: &str) -> bool {
    let answer = async {
        let mut socket = tokio::net::TcpStream::connect(api_addr).await.ok()?;
        let request = format!(
            "GET {run_path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
             Authorization: {bearer}\r\n\r\n"
        );
        socket.write_all(request.as_bytes()).await.ok()?;
        let mut answer = String::new();
        socket.read_to_string(&mut answer).await.ok()?;
        Some(answer)
    };
    answer.await.is_some_and(|answer| {
        answer.starts_with("HTTP/1.1 200")
            && !answer.contains(r#""status":"pending""#)
            && !answer.contains(r#""status":"running""#)
    })
}

fn restart_postgres() {
    let version = std::fs::read_dir("/etc/postgresql")
        .expect("a Debian cluster")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .max_by_key(|v| v.parse::<u32>().unwrap_or(0))
        .expect("a version");
    let status = std::process::Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .status()
        .expect("pg_ctlcluster runs");
    assert!(status.success(), "Postgres restarted");
}

#[ignore = "restarts the machine's Postgres: run alone (.ci/run does)"]
#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn postgres_restart_under_load_loses_nothing(pool: PgPool) {
    let db = Db::new(pool).await;
    let secret = "e2e secret";
    let mut api = Worker::spawn(&db, "api", "api", &["--jwt-secret", secret]);
    let mut workers: Vec<Worker> = ["a", "b"]
        .iter()
        .map(|name| Worker::start(&db, name, &["--graphs", "e2e_linear_5", "--max-runs", "16"]))
        .collect();
    api.until_ready_is(200).await;
    for worker in &workers {
        worker.until_ready_is(200).await;
    }

    let mut runs = Vec::new();
    for _ in 0..300 {
        runs.push(
            db.enqueue_with("e2e_linear_5", |new| NewRun {
                input: Some(json!({"delay_ms": 40})),
                stream_mode: vec![
                    mostrador_graph::StreamMode::Values,
                    mostrador_graph::StreamMode::Updates,
                ],
                max_attempts: 10,
                ..new
            })
            .await,
        );
    }
    let bearer = format!(
        "Bearer {}",
        token(secret, "ana", "customer", "madrid-centro")
    );
    let watchers: Vec<_> = runs
        .iter()
        .step_by(30)
        .map(|run| {
            let path = format!("/threads/{}/runs/{}/stream", run.thread_id, run.run_id);
            (
                run.run_id,
                tokio::spawn(watch(api.addr(), bearer.clone(), path)),
            )
        })
        .collect();

    // Restart while runs are in flight: some done, most not.
    let done = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from mostrador.runs where status = 'success'")
            .fetch_one(&db.pool)
            .await
            .unwrap_or(0)
    };
    tokio::time::timeout(Duration::from_secs(60), async {
        // Other processes run the runs: their rows are the only signal.
        while done().await < 30 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("runs started");
    restart_postgres();

    let finished = tokio::time::timeout(Duration::from_secs(180), async {
        loop {
            let open: Result<i64, _> = sqlx::query_scalar(
                "select count(*) from mostrador.runs where status in ('pending', 'running')",
            )
            .fetch_one(&db.pool)
            .await;
            if matches!(open, Ok(0)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(
        finished.is_ok(),
        "every run ended\n{}\n{}",
        workers[0].log(),
        workers[1].log()
    );

    let statuses: BTreeMap<String, i64> = sqlx::query_as::<_, (String, i64)>(
        "select status::text, count(*) from mostrador.runs group by 1",
    )
    .fetch_all(&db.pool)
    .await
    .expect("statuses")
    .into_iter()
    .collect();
    assert_eq!(statuses, BTreeMap::from([("success".to_owned(), 300)]));
    for run in &runs {
        assert_eq!(
            db.values(run.thread_id.0).await["log"],
            json!(["s1", "s2", "s3", "s4", "s5"]),
            "{run:?}"
        );
    }
    // A superstep that was saved never ran again; only tasks in flight at the restart did.
    let starts: Vec<(i64,)> = sqlx::query_as(
        "select count(*) from e2e_executions where phase = 'start' group by thread_id, node",
    )
    .fetch_all(&db.pool)
    .await
    .expect("starts");
    let repeated = starts.iter().filter(|(n,)| *n > 1).count();
    assert!(starts.iter().all(|(n,)| *n <= 3), "{starts:?}");
    assert!(
        repeated <= 32,
        "{repeated} tasks repeated: more than were in flight"
    );

    for (run_id, watcher) in watchers {
        let ids = tokio::time::timeout(Duration::from_secs(60), watcher)
            .await
            .expect("the watcher saw the end")
            .expect("task");
        // Every event a client is sent: all of the run's but the queue's own bookkeeping (a
        // `drained` hand-back, when the restart made the run wait for the database, and `end`).
        let logged: Vec<i64> = sqlx::query_scalar(
            "select seq from mostrador.run_events
             where run_id = $1 and event not in ('drained', 'end') order by seq",
        )
        .bind(run_id.0)
        .fetch_all(&db.pool)
        .await
        .expect("the run's events");
        assert_eq!(ids, logged, "every event exactly once across reconnects");
    }
    assert!(
        api.is_running(),
        "the api recovered by itself\n{}",
        api.log()
    );
    for worker in &mut workers {
        assert!(worker.is_running(), "{}", worker.log());
        worker.until_ready_is(200).await;
    }
    api.until_ready_is(200).await;
}
