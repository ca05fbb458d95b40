//! A streamed run's events reach its client as soon as they are written, and what the client
//! sees live is the log a resuming client reads: every event once, in order, across a worker's
//! SIGKILL (the run retried on another worker from its checkpoint).

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::retail::{call, token};
use crate::support::{Db, Worker};

const SECRET: &str = "e2e secret";

/// One event as a client got it: its id, name and data.
pub(crate) type Got = (i64, String, Value);

/// Reads an SSE response as it comes, sending each event with an id; stops after `limit` events
/// (then drops the connection, as a client that goes away) or when the stream closes.
pub(crate) async fn follow(
    addr: (&'static str, u16),
    request: String,
    limit: Option<usize>,
    got: mpsc::UnboundedSender<Got>,
) {
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    socket.write_all(request.as_bytes()).await.expect("request");
    let (mut received, mut buffer, mut sent) = (String::new(), [0u8; 8192], 0);
    while let Ok(n) = socket.read(&mut buffer).await {
        if n == 0 {
            return;
        }
        received.push_str(&String::from_utf8_lossy(&buffer[..n]));
        while let Some(end) = received.find("\n\n") {
            let block: String = received.drain(..end + 2).collect();
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|line| line.strip_prefix(name))
                    .map(str::trim)
            };
            let Some(id) = field("id:").and_then(|id| id.parse::<i64>().ok()) else {
                continue;
            };
            let event = field("event:").unwrap_or_default().to_owned();
            let data = field("data:")
                .and_then(|data| serde_json::from_str(data).ok())
                .unwrap_or(Value::Null);
            let _ = got.send((id, event, data));
            sent += 1;
            if limit.is_some_and(|limit| sent >= limit) {
                return;
            }
        }
    }
}

/// Everything sent on `events` until its senders are gone.
pub(crate) async fn all(mut events: mpsc::UnboundedReceiver<Got>) -> Vec<Got> {
    let mut all = Vec::new();
    while let Some(event) = events.recv().await {
        all.push(event);
    }
    all
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn a_live_and_a_resumed_client_see_every_event_once_in_order_across_a_worker_sigkill(
    pool: PgPool,
) {
    let db = Db::new(pool).await;
    mostrador_retail::retail::load_demo_data(&db.pool)
        .await
        .expect("demo data");
    let api = Worker::spawn(&db, "api", "api", &["--jwt-secret", SECRET]);
    // The offline model answers a token every 40 ms: the answer is still streaming when the
    // worker is killed.
    let worker_args = [
        "--graphs",
        "tienda",
        "--lease",
        "2s",
        "--offline-token-interval",
        "40ms",
    ];
    let mut first = Worker::start(&db, "first", &worker_args);
    api.until_ready_is(200).await;
    first.until_ready_is(200).await;
    let clerk = token(SECRET, "pepe", "clerk", "madrid-centro");
    let (status, thread) = call(&api, "POST", "/threads", &clerk, Some(json!({}))).await;
    assert_eq!(status, 200, "{thread}");
    let thread_id = thread["thread_id"].as_str().expect("thread id").to_owned();

    // The live client: it creates the run and streams it from its start.
    let body = json!({"assistant_id": "tienda", "input": {"messages": [
        {"role": "user", "content": "¿Quedan zapatillas de trail Cumbre 42?"}
    ]}, "stream_mode": ["messages-tuple", "values"]})
    .to_string();
    let request = format!(
        "POST /threads/{thread_id}/runs/stream HTTP/1.1\r\nHost: localhost\r\n\
         Connection: close\r\nAuthorization: Bearer {clerk}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (live_sender, mut live) = mpsc::unbounded_channel();
    let live_task = tokio::spawn(follow(api.addr(), request, None, live_sender));
    let mut seen: Vec<Got> = Vec::new();
    let within = Duration::from_secs(30);
    let mut next = async || {
        tokio::time::timeout(within, live.recv())
            .await
            .expect("the live client gets the run's events")
            .expect("the live stream is open")
    };
    while seen
        .iter()
        .filter(|(_, event, _)| event == "messages")
        .count()
        < 3
    {
        seen.push(next().await);
    }
    let run_id: String =
        sqlx::query_scalar("select run_id::text from mostrador.runs where thread_id = $1::uuid")
            .bind(&thread_id)
            .fetch_one(&db.pool)
            .await
            .expect("the run");

    // The resuming client joins after the live client's second event, reads three events, goes
    // away, and comes back with the last id it got.
    let join = |last: i64| {
        format!(
            "GET /threads/{thread_id}/runs/{run_id}/stream?cancel_on_disconnect=false HTTP/1.1\r\n\
             Host: localhost\r\nConnection: close\r\nAuthorization: Bearer {clerk}\r\n\
             Last-Event-ID: {last}\r\n\r\n"
        )
    };
    let resumed_from = seen[1].0;
    let (sender, received) = mpsc::unbounded_channel();
    follow(api.addr(), join(resumed_from), Some(3), sender).await;
    let mut resumed = all(received).await;
    assert_eq!(resumed.len(), 3, "the resuming client's first three events");

    // Mid-answer, the worker dies; another takes the run back once its lease has expired.
    while seen
        .iter()
        .filter(|(_, event, _)| event == "messages")
        .count()
        < 8
    {
        seen.push(next().await);
    }
    let killed_at = seen.len();
    first.kill().await;
    let second = Worker::start(&db, "second", &worker_args);
    let (sender, received) = mpsc::unbounded_channel();
    let rejoin = tokio::spawn(follow(
        api.addr(),
        join(resumed.last().expect("three events").0),
        None,
        sender,
    ));
    while let Some(event) = tokio::time::timeout(Duration::from_secs(60), live.recv())
        .await
        .expect("the live stream goes on after the kill, and ends")
    {
        seen.push(event);
    }
    live_task.await.expect("live client");
    rejoin.await.expect("resuming client");
    resumed.extend(all(received).await);
    drop(second);

    let attempt: i32 =
        sqlx::query_scalar("select attempt from mostrador.runs where run_id = $1::uuid")
            .bind(&run_id)
            .fetch_one(&db.pool)
            .await
            .expect("run");
    assert_eq!(attempt, 2, "the run was retried after the kill");
    let ids: Vec<i64> = seen.iter().map(|(id, ..)| *id).collect();
    assert!(
        ids.windows(2).all(|pair| pair[0] < pair[1]),
        "the live client got every event once, in order: {ids:?}"
    );
    // The log the live client saw is the log: the stored events of its modes, all of them.
    let logged: Vec<(i64, String, Value)> = sqlx::query_as(
        "select seq, event, data from mostrador.run_events where run_id = $1::uuid \
         and event in ('messages', 'values') order by seq",
    )
    .bind(&run_id)
    .fetch_all(&db.pool)
    .await
    .expect("events");
    assert_eq!(
        ids,
        logged.iter().map(|(seq, ..)| *seq).collect::<Vec<_>>(),
        "the live client saw exactly the logged events"
    );
    // The resuming client, across its reconnect and the kill, saw the same sequence after the
    // id it resumed from.
    let after: Vec<&Got> = seen.iter().filter(|(id, ..)| *id > resumed_from).collect();
    assert_eq!(
        resumed.iter().collect::<Vec<_>>(),
        after,
        "a resumed client sees what the live client saw"
    );
    assert!(
        seen[killed_at..]
            .iter()
            .any(|(_, event, _)| event == "messages"),
        "the answer went on streaming after the kill"
    );
}
