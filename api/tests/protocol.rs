//! The thread-centric stream protocol (`POST /threads/{thread_id}/commands` and
//! `…/stream/events`): every event of a thread numbered once across its runs, the same on every
//! connection, resumed after `since`; a stranger's command or stream on another's thread refused
//! as the thread's own routes refuse it. (Python graphs' events, shaped by their runner, are
//! compared with the official server's in `tests/python`.)

use std::time::Duration;

use axum::http::StatusCode;
use mostrador_queue::run::ending::Ending;
use mostrador_queue::run::event::NewEvent;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{Api, caller, new_thread, runs};
use crate::thread_stream::{Events, run_ending, run_with};

async fn command(api: &Api, token: &str, thread: &str, method: &str, params: Value) -> Value {
    let body = json!({"id": 7, "method": method, "params": params}).to_string();
    let (status, _, answer) = api
        .send(api.request("POST", &format!("/threads/{thread}/commands"), token, &body))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

async fn stream(api: &Api, token: &str, thread: &str, filter: Value) -> Events {
    let router = mostrador_api::router(api.state.clone(), &api.config);
    let request = api.request(
        "POST",
        &format!("/threads/{thread}/stream/events"),
        token,
        &filter.to_string(),
    );
    Events::of(
        tower::ServiceExt::oneshot(router, request)
            .await
            .expect("infallible"),
    )
}

/// A protocol event as a runner stores it.
fn stored(data: Value) -> NewEvent {
    NewEvent::new(
        "values",
        json!({"namespace": [], "timestamp": 1, "data": data}),
    )
}

/// `(seq, method, what)`: the lifecycle's event or the values' data.
fn seen(events: &[(String, String, Value)]) -> Vec<(i64, String, Value)> {
    events
        .iter()
        .map(|(method, id, envelope)| {
            assert_eq!(envelope["seq"].to_string(), *id, "the SSE id is the seq");
            assert_eq!(envelope["method"], method.as_str());
            let data = &envelope["params"]["data"];
            let what = if method == "lifecycle" {
                data["event"].clone()
            } else {
                data.clone()
            };
            (envelope["seq"].as_i64().expect("seq"), method.clone(), what)
        })
        .collect()
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_threads_events_are_numbered_once_across_its_runs_and_resumed_after_since(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    // A thread the client names before any run made it: the stream waits for it.
    let thread = uuid::Uuid::new_v4().to_string();
    let mut all = stream(
        &api,
        &ana,
        &thread,
        json!({"channels": ["lifecycle", "values"]}),
    )
    .await;
    let started = command(
        &api,
        &ana,
        &thread,
        "run.start",
        json!({"assistant_id": "agent"}),
    )
    .await;
    assert_eq!(started["type"], "success", "{started}");
    assert!(started["result"]["run_id"].is_string(), "{started}");
    assert_eq!(started["meta"]["applied_through_seq"], 0);
    run_with(&api, &[stored(json!({"n": 1}))]).await;
    command(
        &api,
        &ana,
        &thread,
        "run.start",
        json!({"assistant_id": "agent"}),
    )
    .await;
    run_with(&api, &[stored(json!({"n": 2}))]).await;
    let first = all.names(6).await;
    let expected = |seq: i64, method: &str, what: Value| (seq, method.to_owned(), what);
    assert_eq!(
        seen(&first),
        [
            expected(1, "lifecycle", json!("running")),
            expected(2, "values", json!({"n": 1})),
            expected(3, "lifecycle", json!("completed")),
            expected(4, "lifecycle", json!("running")),
            expected(5, "values", json!({"n": 2})),
            expected(6, "lifecycle", json!("completed")),
        ]
    );
    // Another connection, another filter, resumed: the same events, the same seqs and ids.
    let mut values = stream(
        &api,
        &ana,
        &thread,
        json!({"channels": ["values"], "since": 2}),
    )
    .await;
    let resumed = values.names(1).await;
    assert_eq!(resumed[0], first[4]);
    let mut lifecycle = stream(
        &api,
        &ana,
        &thread,
        json!({"channels": ["lifecycle"], "since": 3}),
    )
    .await;
    assert_eq!(
        lifecycle.names(2).await,
        [first[3].clone(), first[5].clone()]
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_strangers_commands_and_streams_reach_no_thread_of_anothers(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let luis = api.token_for(&caller("luis", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let before = runs(&api).await;

    let started = command(
        &api,
        &luis,
        &thread,
        "run.start",
        json!({"assistant_id": "agent"}),
    )
    .await;
    assert_eq!(started["type"], "error", "{started}");
    assert_eq!(started["error"], "unknown_error");
    // As his run on her thread is (`if_not_exists: create`, as `run.start` asks): the id is
    // taken.
    assert_eq!(
        started["message"], "409: Thread already exists",
        "{started}"
    );
    let answered = command(
        &api,
        &luis,
        &thread,
        "input.respond",
        json!({"interrupt_id": "x", "namespace": [], "response": 1}),
    )
    .await;
    assert_eq!(answered["error"], "no_such_run", "{answered}");
    assert_eq!(runs(&api).await, before, "nothing queued");

    // His stream on her thread is as one on a thread not made yet: open, and nothing comes,
    // while hers carries the run she starts.
    let all = json!({"channels": ["lifecycle", "values"]});
    let mut his = stream(&api, &luis, &thread, all.clone()).await;
    let future = uuid::Uuid::new_v4().to_string();
    let mut his_future = stream(&api, &luis, &future, all.clone()).await;
    let mut hers = stream(&api, &ana, &thread, all).await;
    command(
        &api,
        &ana,
        &thread,
        "run.start",
        json!({"assistant_id": "agent"}),
    )
    .await;
    command(
        &api,
        &ana,
        &future,
        "run.start",
        json!({"assistant_id": "agent"}),
    )
    .await;
    run_with(&api, &[stored(json!({"n": 1}))]).await;
    assert_eq!(hers.names(3).await.len(), 3);
    assert!(
        his.quiet_for(Duration::from_secs(3)).await,
        "nothing of hers"
    );
    assert!(
        his_future.quiet_for(Duration::from_secs(1)).await,
        "nothing of hers"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_runs_root_lifecycle_ends_as_the_run_did(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let mut stream = stream(&api, &ana, &thread, json!({"channels": ["lifecycle"]})).await;
    for ending in [
        Ending::Failed {
            error: json!({"error": "KeyError", "message": "'request'"}),
            retryable: false,
        },
        Ending::Cancelled,
    ] {
        let started = command(
            &api,
            &ana,
            &thread,
            "run.start",
            json!({"assistant_id": "agent"}),
        )
        .await;
        assert_eq!(started["type"], "success", "{started}");
        run_ending(&api, &[stored(json!({"n": 1}))], ending).await;
    }
    let ends: Vec<Value> = stream
        .names(4)
        .await
        .into_iter()
        .map(|(_, _, envelope)| envelope["params"]["data"].clone())
        .collect();
    assert_eq!(
        ends,
        [
            json!({"event": "running", "graph_name": "agent"}),
            json!({"event": "failed", "graph_name": "agent", "error": "'request'"}),
            json!({"event": "running", "graph_name": "agent"}),
            json!({"event": "interrupted", "graph_name": "agent"}),
        ]
    );
}

/// A socket on a thread, as `token`'s, to a server on `address`.
async fn socket(
    address: std::net::SocketAddr,
    token: &str,
    thread: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let mut request = format!("ws://{address}/threads/{thread}/stream/events")
        .into_client_request()
        .expect("a request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("a header"),
    );
    tokio_tungstenite::connect_async(request)
        .await
        .expect("the socket opens")
        .0
}

/// The socket's next frame, as JSON, within 10 s; `None` when it stays quiet for `quiet`.
async fn frame(
    socket: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    quiet: Duration,
) -> Option<Value> {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;

    loop {
        match tokio::time::timeout(quiet, socket.next()).await {
            Err(_) => return None,
            Ok(Some(Ok(Message::Text(text)))) => {
                return Some(serde_json::from_str(text.as_str()).expect("JSON"));
            }
            Ok(Some(Ok(_))) => {}
            Ok(other) => panic!("the socket ended: {other:?}"),
        }
    }
}

async fn ask(
    socket: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    command: Value,
) -> Value {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;

    socket
        .send(Message::Text(command.to_string().into()))
        .await
        .expect("sent");
    frame(socket, Duration::from_secs(10))
        .await
        .expect("an answer")
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_socket_answers_its_commands_and_sends_each_event_once_to_its_owner_alone(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let luis = api.token_for(&caller("luis", "customer", None));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let address = listener.local_addr().expect("an address");
    let router = mostrador_api::router(api.state.clone(), &api.config);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(mostrador_api::serve(
        listener,
        router,
        mostrador_api::serve::Edge::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    let thread = uuid::Uuid::new_v4().to_string();

    let mut hers = socket(address, &ana, &thread).await;
    // Two subscriptions that both admit the lifecycle: each event comes once.
    for channels in [json!(["lifecycle"]), json!(["lifecycle", "values"])] {
        let answer = ask(
            &mut hers,
            json!({"id": 1, "method": "subscription.subscribe", "params": {"channels": channels}}),
        )
        .await;
        assert_eq!(answer["type"], "success", "{answer}");
    }
    let mut his = socket(address, &luis, &thread).await;
    let answer = ask(
        &mut his,
        json!({"id": 1, "method": "subscription.subscribe", "params": {"channels": ["lifecycle", "values"]}}),
    )
    .await;
    assert_eq!(answer["type"], "success", "{answer}");

    let started = ask(
        &mut hers,
        json!({"id": 2, "method": "run.start", "params": {"assistant_id": "agent"}}),
    )
    .await;
    assert_eq!(started["type"], "success", "{started}");
    run_with(&api, &[stored(json!({"n": 1}))]).await;
    let mut seqs = Vec::new();
    while let Some(event) = frame(&mut hers, Duration::from_secs(2)).await {
        seqs.push(event["seq"].as_i64().expect("an event"));
    }
    // Each subscription sends in order; two of them may interleave (docs/wire-protocol.md).
    seqs.sort_unstable();
    assert_eq!(seqs, [1, 2, 3], "running, values, completed: each once");

    let refused = ask(
        &mut his,
        json!({"id": 2, "method": "run.start", "params": {"assistant_id": "agent"}}),
    )
    .await;
    assert_eq!(refused["error"], "unknown_error", "{refused}");
    assert_eq!(
        frame(&mut his, Duration::from_secs(3)).await,
        None,
        "nothing of hers reaches his socket"
    );
    let _ = stop.send(());
    drop((hers, his));
    server.await.expect("served").expect("stopped");
}
