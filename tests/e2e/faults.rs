//! Faults at the system level, with real processes.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::retail::token;
use crate::support::{Db, Proxy, Worker};

/// Streams `POST /runs/stream` with `body`, calling `on_event` with each event's name as it
/// arrives; returns every `(name, id)` in order.
async fn stream(
    api: &Worker,
    bearer: &str,
    body: &Value,
    mut on_event: impl AsyncFnMut(&str),
) -> Vec<(String, Option<i64>)> {
    let body = body.to_string();
    let mut socket = tokio::net::TcpStream::connect(api.addr())
        .await
        .expect("connect");
    let request = format!(
        "POST /runs/stream HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Authorization: {bearer}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await.expect("send");
    let (mut events, mut received, mut buffer) = (Vec::new(), String::new(), [0u8; 8192]);
    loop {
        let n = socket.read(&mut buffer).await.expect("read");
        if n == 0 {
            return events;
        }
        received.push_str(&String::from_utf8_lossy(&buffer[..n]));
        while let Some(end) = received.find("\n\n") {
            let block: String = received.drain(..end + 2).collect();
            let name = block.lines().find_map(|l| l.strip_prefix("event: "));
            let id = block
                .lines()
                .find_map(|l| l.strip_prefix("id: "))
                .and_then(|id| id.trim().parse().ok());
            if let Some(name) = name {
                on_event(name).await;
                events.push((name.to_owned(), id));
            }
        }
    }
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn listener_backend_killed_loses_no_event(pool: PgPool) {
    let db = Db::new(pool).await;
    let api = Worker::spawn(&db, "api", "api", &["--jwt-secret", "e2e secret"]);
    let worker = Worker::start(&db, "worker", &["--graphs", "e2e_linear_6"]);
    api.until_ready_is(200).await;
    worker.until_ready_is(200).await;
    let bearer = format!(
        "Bearer {}",
        token("e2e secret", "ana", "customer", "madrid-centro")
    );
    let run = json!({"assistant_id": "e2e_linear_6", "input": {"delay_ms": 150},
                     "stream_mode": ["values", "updates"]});

    let pool = db.pool.clone();
    let mut killed = 0;
    let events = tokio::time::timeout(
        Duration::from_secs(30),
        stream(&api, &bearer, &run, async |name| {
            if name == "updates" && killed == 0 {
                // The api's one LISTEN connection (its last statement asked its own pid),
                // mid-stream.
                killed = sqlx::query_scalar::<_, i64>(
                    "select count(*) from (
                         select pg_terminate_backend(pid) from pg_stat_activity
                         where application_name = 'mostrador-api'
                           and datname = current_database()
                           and query like '%pg_backend_pid()%'
                     ) terminated",
                )
                .fetch_one(&pool)
                .await
                .expect("terminate");
            }
        }),
    )
    .await
    .expect("the stream ended");
    assert_eq!(killed, 1, "the api's LISTEN backend was terminated");

    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.first(), Some(&"metadata"), "{names:?}");
    assert!(!names.contains(&"end"), "{names:?}");
    assert_eq!(
        names.iter().filter(|n| **n == "updates").count(),
        6,
        "{names:?}"
    );
    let ids: Vec<i64> = events.iter().filter_map(|(_, id)| *id).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as i64).collect::<Vec<_>>(),
        "every event once, in order"
    );

    // The api listens again by itself: a new stream gets its events live.
    let again = tokio::time::timeout(
        Duration::from_secs(30),
        stream(&api, &bearer, &run, async |_| {}),
    )
    .await
    .expect("a new stream after the reconnect ended");
    assert_eq!(
        again.iter().filter(|(name, _)| name == "updates").count(),
        6
    );
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn worker_loses_database_mid_run(pool: PgPool) {
    use crate::support::Executions;
    use mostrador_queue::RunStatus;

    let db = Db::new(pool).await;
    let options = db.pool.connect_options();
    let proxy = Proxy::start((options.get_host().to_owned(), options.get_port())).await;
    let via_proxy = db.url.replacen(
        &format!(":{}/", options.get_port()),
        &format!(":{}/", proxy.port),
        1,
    );
    assert_ne!(via_proxy, db.url);
    let mut executions = Executions::listen(&db).await;
    let a = Worker::spawn_at(
        &via_proxy,
        "a",
        "worker",
        &[
            "--lease",
            "2s",
            "--poll-interval",
            "200ms",
            "--graphs",
            "e2e_linear_6",
        ],
    );
    a.until_ready_is(200).await;
    let run = db
        .enqueue("e2e_linear_6", json!({"slow": {"s3": 4_000}}))
        .await;
    executions
        .until(|e| e.thread_id == run.thread_id.0 && e.node == "s3" && e.phase == "start")
        .await;
    // Cut once a's events up to s2 are published: during s3 a touches the database only to
    // heartbeat.
    let mut events = db.follow(&run).await;
    let mut values = 0;
    while values < 3 {
        let event = events
            .next()
            .await
            .expect("events")
            .expect("the run goes on");
        if event.event == "values" {
            values += 1;
        }
    }
    proxy.cut();

    // A cannot heartbeat: after a whole lease it stops the run, and its lease expires.
    let b = Worker::start(&db, "b", &["--graphs", "e2e_linear_6"]);
    b.until_ready_is(200).await;
    let ended = db.until_end(&run, Duration::from_secs(60)).await;
    assert_eq!(ended.status, RunStatus::Success, "{ended:?}");
    assert!(ended.attempt >= 2, "taken over by b: {ended:?}");
    let started = db.counts(run.thread_id.0, "start").await;
    let finished = db.counts(run.thread_id.0, "finish").await;
    for node in ["s1", "s2", "s4", "s5", "s6"] {
        assert_eq!(started[node], 1, "{node} ran once: {started:?}");
    }
    assert_eq!(started["s3"], 2, "s3 started on a, then again on b");
    assert_eq!(finished["s3"], 1, "a never finished it: {finished:?}");
    assert_eq!(
        db.values(run.thread_id.0).await["log"],
        json!(["s1", "s2", "s3", "s4", "s5", "s6"]),
        "no write of a's landed after b took over"
    );
    // A's own stop, unless the cut reached s3's record of its start before its answer did (the
    // test sees the row committed, a may not yet have read that it was): then the node failed
    // first, retryably, and a had no run left to stop.
    let log = a.log();
    assert!(
        log.contains("no heartbeat for a whole lease: stopping this worker's runs")
            || log.contains("node \"s3\" failed: recording the execution failed"),
        "{log}"
    );
}
