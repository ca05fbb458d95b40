//! Streams over HTTP: a run's events as server-sent events, replayed after `Last-Event-ID`,
//! filtered by stream mode, ended by `end`; and `join` answering the final state. The events are
//! written with the queue's own functions, as a worker writes them.

use mostrador_queue::run::ending::{After, Ending};
use std::time::Duration;

use axum::http::{StatusCode, header};
use mostrador_queue::run::event::{self, NewEvent};
use mostrador_queue::{ClaimedRun, WorkerLease, claim};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{Api, caller, new_run, new_thread};

/// The SSE events of a body: `(event, id, data)`.
fn parse(body: &str) -> Vec<(String, Option<String>, Value)> {
    body.split("\n\n")
        .filter_map(|block| {
            let mut event = None;
            let mut id = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event: ") {
                    event = Some(value.to_owned());
                } else if let Some(value) = line.strip_prefix("id: ") {
                    id = Some(value.to_owned());
                } else if let Some(value) = line.strip_prefix("data: ") {
                    data = Some(serde_json::from_str(value).expect("JSON data"));
                }
            }
            Some((event?, id, data?))
        })
        .collect()
}

async fn claimed(api: &Api) -> ClaimedRun {
    let worker = WorkerLease::new("w", vec!["agent".into()], Duration::from_secs(60));
    worker.register(api.state.pool()).await.expect("register");
    claim(api.state.pool(), worker.worker_id, &worker.graphs, 1)
        .await
        .expect("claim")
        .pop()
        .expect("the run")
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn stream_replays_after_last_event_id_filters_by_mode_and_ends(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let (_, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread}/runs"),
            &ana,
            r#"{"assistant_id": "agent", "stream_mode": ["values", "updates"]}"#,
        ))
        .await;
    let run_path = format!(
        "/threads/{thread}/runs/{}",
        run["run_id"].as_str().expect("id")
    );

    let held = claimed(&api).await;
    event::append(
        api.state.pool(),
        held.lease(),
        &[
            NewEvent::new("values", json!({"messages": []})),
            NewEvent::new("updates", json!({"model": {"messages": ["hola"]}})),
            NewEvent::new("values", json!({"messages": ["hola"]})),
        ],
    )
    .await
    .expect("append");
    held.end(api.state.pool(), Ending::Success)
        .await
        .expect("complete");

    let stream = |last_event_id: Option<&str>, query: &str| {
        let mut request = api.request("GET", &format!("{run_path}/stream{query}"), &ana, "");
        if let Some(id) = last_event_id {
            request
                .headers_mut()
                .insert("last-event-id", id.parse().expect("header"));
        }
        async { api.send(request).await }
    };

    let (status, headers, body) = stream(None, "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers[header::CONTENT_TYPE]
            .to_str()
            .expect("ascii")
            .starts_with("text/event-stream")
    );
    let events = parse(body.as_str().expect("text"));
    let names: Vec<&str> = events.iter().map(|(name, ..)| name.as_str()).collect();
    assert_eq!(names, ["metadata", "values", "updates", "values"]);
    assert_eq!(events[0].2["run_id"], run["run_id"]);
    let ids: Vec<Option<&str>> = events.iter().map(|(_, id, _)| id.as_deref()).collect();
    // The run's `end` (seq 4) closes the stream without being sent.
    assert_eq!(ids, [None, Some("1"), Some("2"), Some("3")]);

    let (_, _, body) = stream(Some("2"), "").await;
    let names: Vec<String> = parse(body.as_str().expect("text"))
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(
        names,
        ["metadata", "values"],
        "only what came after event 2"
    );

    let (_, _, body) = stream(None, "?stream_mode=updates&cancel_on_disconnect=false").await;
    let names: Vec<String> = parse(body.as_str().expect("text"))
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(names, ["metadata", "updates"]);

    // An id that names no event of the run: on from its latest, as officially (here: nothing).
    let (status, _, body) = stream(Some("mock_event_20"), "").await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<String> = parse(body.as_str().expect("text"))
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(names, ["metadata"]);
    let (status, _, _) = stream(None, "?stream_mode=everything").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    let luis = api.token_for(&caller("luis", "customer", None));
    let request = api.request("GET", &format!("{run_path}/stream"), &luis, "");
    assert_eq!(api.send(request).await.0, StatusCode::NOT_FOUND);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn messages_mode_accumulates_chunks_even_after_last_event_id(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let (_, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread}/runs"),
            &ana,
            r#"{"assistant_id": "agent", "stream_mode": "messages"}"#,
        ))
        .await;
    let run_path = format!(
        "/threads/{thread}/runs/{}",
        run["run_id"].as_str().expect("id")
    );
    let held = claimed(&api).await;
    let chunk = |text: &str| {
        let chunk = json!({"type": "AIMessageChunk", "id": "m1", "content": text});
        NewEvent::new("messages", json!([chunk, {"langgraph_node": "model"}]))
    };
    event::append(
        api.state.pool(),
        held.lease(),
        &[chunk("Que"), chunk("dan "), chunk("siete.")],
    )
    .await
    .expect("append");
    held.end(api.state.pool(), Ending::Success)
        .await
        .expect("complete");

    let stream = |last_event_id: Option<&str>, query: &str| {
        let mut request = api.request("GET", &format!("{run_path}/stream{query}"), &ana, "");
        if let Some(id) = last_event_id {
            request
                .headers_mut()
                .insert("last-event-id", id.parse().expect("header"));
        }
        async { parse(api.send(request).await.2.as_str().expect("text")) }
    };
    let partial = stream(None, "?stream_mode=messages").await;
    assert_eq!(
        stream(Some("-1"), "?stream_mode=messages").await,
        partial,
        "Last-Event-ID -1 rejoins from the start"
    );
    let names: Vec<&str> = partial.iter().map(|(name, ..)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "metadata",
            "messages/metadata",
            "messages/partial",
            "messages/partial",
            "messages/partial",
        ]
    );
    assert_eq!(
        partial[1].2,
        json!({"m1": {"metadata": {"langgraph_node": "model"}}})
    );
    let contents: Vec<&Value> = partial[2..5].iter().map(|e| &e.2[0]["content"]).collect();
    assert_eq!(
        contents,
        [&json!("Que"), &json!("Quedan "), &json!("Quedan siete.")]
    );
    assert_eq!(partial[4].2[0]["type"], "ai");

    let resumed = stream(Some("2"), "?stream_mode=messages").await;
    let names: Vec<&str> = resumed.iter().map(|(name, ..)| name.as_str()).collect();
    assert_eq!(names, ["metadata", "messages/partial"]);
    assert_eq!(
        resumed[1].2[0]["content"], "Quedan siete.",
        "the message as accumulated from the first chunk, not from the resume"
    );

    let tuples = stream(None, "?stream_mode=messages-tuple").await;
    let names: Vec<&str> = tuples.iter().map(|(name, ..)| name.as_str()).collect();
    assert_eq!(names, ["metadata", "messages", "messages", "messages"]);
}

/// What `GET /threads/{thread}/runs/{run_id}/join` answers the caller of `token` once the run ended.
async fn join(api: &Api, token: &str, thread: &str, run: &Value) -> (StatusCode, Value) {
    let run_id = run["run_id"].as_str().expect("id");
    let join = format!("/threads/{thread}/runs/{run_id}/join");
    let (status, _, body) = api.send(api.request("GET", &join, token, "")).await;
    (status, body)
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn join_answers_the_error_of_a_failed_run(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let run = new_run(&api, &ana, &thread).await;
    let held = claimed(&api).await;
    held.end(
        api.state.pool(),
        Ending::Failed {
            error: json!({"error": "NodeError", "message": "kaboom"}),
            retryable: false,
        },
    )
    .await
    .expect("fail");
    let (status, body) = join(&api, &ana, &thread, &run).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a failed run is still a 200, as the client expects"
    );
    assert_eq!(
        body,
        json!({"__error__": {"error": "NodeError", "message": "kaboom"}})
    );
}

/// The answer says how the attempt that ended the run ended: an earlier attempt's retried
/// failure is not the error of a run that then timed out.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn join_answers_a_timeout_not_an_earlier_attempts_error(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let run = new_run(&api, &ana, &thread).await;
    let first = claimed(&api).await;
    assert!(first.max_attempts > 1, "the run may be tried again");
    let after = first
        .end(
            api.state.pool(),
            Ending::Failed {
                error: json!({"error": "Flaky", "message": "try again"}),
                retryable: true,
            },
        )
        .await
        .expect("fail");
    assert_eq!(after, After::Retrying);
    sqlx::query("update mostrador.runs set available_at = now()")
        .execute(api.state.pool())
        .await
        .expect("due now");
    claimed(&api)
        .await
        .end(api.state.pool(), Ending::TimedOut)
        .await
        .expect("time out");
    let (status, body) = join(&api, &ana, &thread, &run).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"__error__": {"error": "Timeout", "message": "the run timed out"}})
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn draining_api_reports_not_ready_and_ends_sse_streams(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let run = new_run(&api, &ana, &thread).await;
    // Nobody runs it: its stream would wait forever, until the pod drains.
    let request = api.request(
        "GET",
        &format!(
            "/threads/{thread}/runs/{}/stream",
            run["run_id"].as_str().expect("id")
        ),
        &ana,
        "",
    );
    // The stream is open (its response is out) before the drain begins.
    let router = mostrador_api::router(api.state.clone(), &api.config);
    let response = tower::ServiceExt::oneshot(router, request)
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    api.state.start_draining();
    let body = tokio::time::timeout(
        Duration::from_secs(10),
        axum::body::to_bytes(response.into_body(), usize::MAX),
    )
    .await
    .expect("the stream ended with the drain")
    .expect("body");
    let names: Vec<String> = parse(std::str::from_utf8(&body).expect("utf-8"))
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(names, ["metadata"]);
    let (status, _, _) = api.send(api.request("GET", "/ready", "", "")).await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "not ready while draining"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn streams_over_the_subscriber_limit_get_503_with_retry_after(pool: PgPool) {
    let api = Api::with(
        pool,
        mostrador_api::ApiConfig {
            max_subscribers: 1,
            ..crate::support::config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let run = new_run(&api, &ana, &thread).await;
    let path = format!(
        "/threads/{thread}/runs/{}/stream",
        run["run_id"].as_str().expect("id")
    );

    // The first stream stays open: nobody runs the run.
    let router = mostrador_api::router(api.state.clone(), &api.config);
    let first = tower::ServiceExt::oneshot(router, api.request("GET", &path, &ana, ""))
        .await
        .expect("infallible");
    assert_eq!(first.status(), StatusCode::OK);

    let (status, headers, body) = api.send(api.request("GET", &path, &ana, "")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(headers.contains_key(header::RETRY_AFTER));
    // A stream that would create its run is refused before creating it: a client that tries
    // again does not create it twice.
    let other = new_thread(&api, &ana).await;
    for (path, body) in [
        (
            format!("/threads/{other}/runs/stream"),
            r#"{"assistant_id": "agent"}"#,
        ),
        ("/runs/stream".to_owned(), r#"{"assistant_id": "agent"}"#),
    ] {
        let (status, headers, answer) = api.send(api.request("POST", &path, &ana, body)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}: {answer}");
        assert!(headers.contains_key(header::RETRY_AFTER));
    }

    let metrics = api.metrics().await;
    assert!(
        metrics.contains("mostrador_api_sse_subscribers 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("mostrador_api_runs_created_total 1"),
        "no run but the first: {metrics}"
    );
    assert!(
        metrics.contains(r#"mostrador_api_queue_depth{graph="agent",status="pending"} 1"#),
        "the queue's depth, read when scraped: {metrics}"
    );
    assert!(
        metrics.contains(r#"mostrador_api_queue_depth{graph="agent",status="running"} 0"#),
        "{metrics}"
    );

    drop(first);
    // The closed stream is counted out once its follower notices: a new one is served.
    let retried = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let router = mostrador_api::router(api.state.clone(), &api.config);
            let response = tower::ServiceExt::oneshot(router, api.request("GET", &path, &ana, ""))
                .await
                .expect("infallible");
            if response.status() == StatusCode::OK {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(retried.is_ok(), "a slot frees when a client goes away");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn join_keeps_the_client_waiting_with_blank_lines(pool: PgPool) {
    use futures_util::StreamExt;
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let run = new_run(&api, &ana, &thread).await;
    let join = format!(
        "/threads/{thread}/runs/{}/join",
        run["run_id"].as_str().expect("id")
    );
    let router = mostrador_api::router(api.state.clone(), &api.config);
    let response = tower::ServiceExt::oneshot(router, api.request("GET", &join, &ana, ""))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK, "answered at once");
    let mut body = response.into_body().into_data_stream();
    let first = tokio::time::timeout(Duration::from_secs(8), body.next())
        .await
        .expect("a keep-alive within the interval")
        .expect("a frame")
        .expect("bytes");
    assert_eq!(&first[..], b"\n");

    let held = claimed(&api).await;
    held.end(api.state.pool(), Ending::Success)
        .await
        .expect("complete");
    let mut rest = Vec::new();
    while let Some(frame) = body.next().await {
        rest.extend_from_slice(&frame.expect("bytes"));
    }
    let answer: Value = serde_json::from_slice(&rest).expect("JSON after the blank lines");
    assert_eq!(answer, json!({}), "the thread has no state");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn stream_loses_and_repeats_nothing_across_a_listener_reconnect(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let run = new_run(&api, &ana, &thread).await;
    let path = format!(
        "/threads/{thread}/runs/{}/stream",
        run["run_id"].as_str().expect("id")
    );
    let held = claimed(&api).await;

    let router = mostrador_api::router(api.state.clone(), &api.config);
    let response = tower::ServiceExt::oneshot(router, api.request("GET", &path, &ana, ""))
        .await
        .expect("infallible");
    let mut body = response.into_body().into_data_stream();
    let mut seen = String::new();
    let append = |i: i64| {
        let (pool, lease) = (api.state.pool().clone(), held.lease());
        async move {
            event::append(&pool, lease, &[NewEvent::new("values", json!({"i": i}))])
                .await
                .expect("append");
        }
    };
    for i in 1..=3 {
        append(i).await;
    }
    read_until(&mut body, &mut seen, "id: 3\n").await;

    // The api's one LISTEN connection dies; events keep coming while it reconnects.
    let pid = api.state.listener().backend_pid();
    sqlx::query("select pg_terminate_backend($1)")
        .bind(pid)
        .execute(api.state.pool())
        .await
        .expect("terminate");
    for i in 4..=6 {
        append(i).await;
    }
    held.end(api.state.pool(), Ending::Success)
        .await
        .expect("complete");
    read_to_close(&mut body, &mut seen).await;
    let ids: Vec<Option<String>> = parse(&seen).into_iter().map(|(_, id, _)| id).collect();
    let expected: Vec<Option<String>> = std::iter::once(None)
        .chain((1..=6).map(|seq: i64| Some(seq.to_string())))
        .collect();
    assert_eq!(ids, expected, "every event once, in order");
}

/// Reads frames of `body` into `seen` until it contains `needle`, within 10 s however many
/// keep-alive comments come before it.
async fn read_until(
    body: &mut (impl futures_util::Stream<Item = Result<axum::body::Bytes, axum::Error>> + Unpin),
    seen: &mut String,
    needle: &str,
) {
    use futures_util::StreamExt;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !seen.contains(needle) {
        let frame = tokio::time::timeout_at(deadline, body.next())
            .await
            .expect("in time")
            .expect("open")
            .expect("bytes");
        seen.push_str(std::str::from_utf8(&frame).expect("utf-8"));
    }
}

/// Reads frames of `body` into `seen` until the server closes it, within 10 s.
async fn read_to_close(
    body: &mut (impl futures_util::Stream<Item = Result<axum::body::Bytes, axum::Error>> + Unpin),
    seen: &mut String,
) {
    use futures_util::StreamExt;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while let Some(frame) = tokio::time::timeout_at(deadline, body.next())
        .await
        .expect("closed in time")
    {
        seen.push_str(std::str::from_utf8(&frame.expect("bytes")).expect("utf-8"));
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn slow_client_does_not_stall_others(pool: PgPool) {
    use mostrador_api::ApiConfig;
    use mostrador_api::stream::STREAM_BUFFER;

    let api = Api::with(
        pool,
        ApiConfig {
            slow_client_timeout: Duration::from_millis(300),
            ..crate::support::config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let run = new_run(&api, &ana, &thread).await;
    let path = format!(
        "/threads/{thread}/runs/{}/stream",
        run["run_id"].as_str().expect("id")
    );
    let open = || {
        let router = mostrador_api::router(api.state.clone(), &api.config);
        tower::ServiceExt::oneshot(router, api.request("GET", &path, &ana, ""))
    };
    // The slow client: its response is never read until the end of the test.
    let slow = open().await.expect("infallible");
    let reader = open().await.expect("infallible");
    let reading = tokio::spawn(async move {
        axum::body::to_bytes(reader.into_body(), usize::MAX)
            .await
            .expect("body")
    });

    let events = 4 * STREAM_BUFFER;
    let held = claimed(&api).await;
    let batch: Vec<NewEvent> = (0..events)
        .map(|i| NewEvent::new("values", json!({"i": i, "pad": "x".repeat(1000)})))
        .collect();
    event::append(api.state.pool(), held.lease(), &batch)
        .await
        .expect("append");
    held.end(api.state.pool(), Ending::Success)
        .await
        .expect("complete");

    let fast = tokio::time::timeout(Duration::from_secs(10), reading)
        .await
        .expect("the reading client got every event while the other read nothing")
        .expect("task");
    let fast = parse(std::str::from_utf8(&fast).expect("utf-8"));
    assert_eq!(fast.iter().filter(|e| e.0 == "values").count(), events);
    assert_eq!(fast.last().map(|e| e.0.as_str()), Some("values"));

    // The slow one is let go once its buffer stays full past the timeout: its stream leaves the
    // subscriber count (time is what it waits for: the count is the signal).
    tokio::time::timeout(Duration::from_secs(10), async {
        while api.state.metrics().sse_subscribers.get() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the slow client was disconnected");
    // What it can still read is bounded, and stops short of the run's last event.
    let slow = tokio::time::timeout(
        Duration::from_secs(10),
        axum::body::to_bytes(slow.into_body(), usize::MAX),
    )
    .await
    .expect("the slow stream was closed")
    .expect("body");
    let slow = parse(std::str::from_utf8(&slow).expect("utf-8"));
    assert!(
        slow.len() <= STREAM_BUFFER + 2,
        "a bounded buffer: {} events",
        slow.len()
    );
    assert!(
        slow.iter().filter(|e| e.0 == "values").count() < events,
        "disconnected before the end"
    );
    let metrics = api.metrics().await;
    assert!(
        metrics.contains("mostrador_api_sse_subscribers 0"),
        "{metrics}"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_stateless_wait_cut_by_a_drain_leaves_its_run_going(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    // Nobody runs it: the wait lasts until the pod drains.
    let router = mostrador_api::router(api.state.clone(), &api.config);
    let response = tower::ServiceExt::oneshot(
        router,
        api.request("POST", "/runs/wait", &ana, r#"{"assistant_id": "agent"}"#),
    )
    .await
    .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    api.state.start_draining();
    let body = tokio::time::timeout(
        Duration::from_secs(10),
        axum::body::to_bytes(response.into_body(), usize::MAX),
    )
    .await
    .expect("the wait ended with the drain")
    .expect("body");
    let answer: Value = serde_json::from_slice(body.trim_ascii()).expect("json");
    assert_eq!(answer["__error__"]["error"], "WaitFailed", "{answer}");
    // Its thread stays, and its run waits for a worker, neither rolled back nor cancelled.
    let (deleted, status): (Option<chrono::DateTime<chrono::Utc>>, String) = sqlx::query_as(
        "select t.deleted_at, r.status::text from mostrador.runs r \
         join mostrador.threads t using (thread_id)",
    )
    .fetch_one(&pool)
    .await
    .expect("the run and its thread");
    assert_eq!((deleted, status.as_str()), (None, "pending"));
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn one_caller_cannot_take_every_stream_and_wait_slot(pool: PgPool) {
    let api = Api::with(
        pool,
        mostrador_api::ApiConfig {
            max_subscribers_per_caller: 1,
            ..crate::support::config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let luis = api.token_for(&caller("luis", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let run = new_run(&api, &ana, &thread).await;
    let run_id = run["run_id"].as_str().expect("id");
    let stream = format!("/threads/{thread}/runs/{run_id}/stream");
    let join = format!("/threads/{thread}/runs/{run_id}/join");

    // Ana's one slot is taken by a stream nobody ends (no worker runs the run).
    let router = mostrador_api::router(api.state.clone(), &api.config);
    let held = tower::ServiceExt::oneshot(router, api.request("GET", &stream, &ana, ""))
        .await
        .expect("infallible");
    assert_eq!(held.status(), StatusCode::OK);
    let (_, _, threads_before) = api
        .send(api.request("POST", "/threads/count", &ana, "{}"))
        .await;
    for (method, path, body) in [
        ("GET", stream.as_str(), ""),
        ("GET", join.as_str(), ""),
        ("POST", "/runs/wait", r#"{"assistant_id": "agent"}"#),
        ("POST", "/runs/stream", r#"{"assistant_id": "agent"}"#),
    ] {
        let (status, headers, answer) = api.send(api.request(method, path, &ana, body)).await;
        assert_eq!(
            status,
            StatusCode::TOO_MANY_REQUESTS,
            "{method} {path}: {answer}"
        );
        assert!(headers.contains_key(header::RETRY_AFTER));
    }
    // Refused before anything was created.
    let (_, _, threads_after) = api
        .send(api.request("POST", "/threads/count", &ana, "{}"))
        .await;
    assert_eq!(threads_before, threads_after);

    // Another caller is not held back by Ana's streams.
    let other = new_thread(&api, &luis).await;
    let router = mostrador_api::router(api.state.clone(), &api.config);
    let (_, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{other}/runs"),
            &luis,
            r#"{"assistant_id": "agent"}"#,
        ))
        .await;
    let his = format!(
        "/threads/{other}/runs/{}/stream",
        run["run_id"].as_str().expect("id")
    );
    let response = tower::ServiceExt::oneshot(router, api.request("GET", &his, &luis, ""))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);

    // Ana's slot frees when her stream goes away.
    drop(held);
    let again = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let router = mostrador_api::router(api.state.clone(), &api.config);
            let response =
                tower::ServiceExt::oneshot(router, api.request("GET", &stream, &ana, ""))
                    .await
                    .expect("infallible");
            if response.status() == StatusCode::OK {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        again.is_ok(),
        "a caller's slot frees when its stream goes away"
    );
}
