//! Faults at the system level, with real processes.

use std::time::Duration;

use mostrador_api::Role;
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::retail::token;
use crate::support::{Db, Worker};

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

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn listener_backend_killed_loses_no_event(pool: PgPool) {
    let db = Db::new(pool).await;
    let api = Worker::spawn(&db, "api", "api", &["--jwt-secret", "e2e secret"]);
    let worker = Worker::start(&db, "worker", &["--graphs", "e2e_linear_6"]);
    api.until_ready_is(200).await;
    worker.until_ready_is(200).await;
    let bearer = format!(
        "Bearer {}",
        token("e2e secret", "ana", Role::Customer, "madrid-centro")
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
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
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
    assert_eq!(again.last().map(|(name, _)| name.as_str()), Some("end"));
}
