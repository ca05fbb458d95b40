//! A worker process calling a fake OpenAI-compatible server started by the test (a small axum
//! server that streams chunks with delays, tool-call deltas and usage): tokens reach SSE clients
//! as they arrive, a 503 before the first byte is retried, an answer cut mid-stream fails the run
//! without a storm of calls, and a base URL without a context window refuses to start.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::retail::{call, token};
use crate::support::{Db, Worker};

/// The words of the fake model's answer, one chunk each.
const WORDS: [&str; 6] = ["Quedan ", "siete ", "pares ", "en ", "Madrid ", "Norte."];

#[derive(Clone, Default)]
struct Fake {
    requests: Arc<AtomicUsize>,
    /// Requests answered 503 before anything else.
    failures: usize,
    /// End the answer's stream after two words, without `[DONE]`.
    cut: bool,
    /// Before each chunk of text.
    delay: Duration,
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({"id": "c1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {chunk}\n\n")
}

/// The `tienda` flow: without a tool result yet, search the catalogue (the call's arguments split
/// over two deltas); then answer, word by word.
async fn complete(State(fake): State<Fake>, body: String) -> Response {
    let n = fake.requests.fetch_add(1, Ordering::SeqCst);
    if n < fake.failures {
        return (StatusCode::SERVICE_UNAVAILABLE, "warming up").into_response();
    }
    let request: Value = serde_json::from_str(&body).unwrap_or_default();
    let answered_by_tool = request["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    let mut frames: Vec<(Duration, String)> = Vec::new();
    if answered_by_tool || fake.cut {
        frames.push((
            Duration::ZERO,
            chunk(json!({"role": "assistant", "reasoning_content": "…"}), None),
        ));
        for word in WORDS.iter().take(if fake.cut { 2 } else { WORDS.len() }) {
            frames.push((fake.delay, chunk(json!({"content": word}), None)));
        }
        if !fake.cut {
            frames.push((Duration::ZERO, chunk(json!({}), Some("stop"))));
        }
    } else {
        frames.push((
            Duration::ZERO,
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "search_products", "arguments": "{\"query\": "}}]}),
                None,
            ),
        ));
        frames.push((
            Duration::ZERO,
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"trail Cumbre 42\"}"}}]}),
                Some("tool_calls"),
            ),
        ));
    }
    if !fake.cut {
        let usage = json!({"id": "c1", "choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 6}});
        frames.push((Duration::ZERO, format!("data: {usage}\n\n")));
        frames.push((Duration::ZERO, "data: [DONE]\n\n".to_owned()));
    }
    let stream = futures_util::stream::unfold(frames.into_iter(), |mut frames| async move {
        let (delay, frame) = frames.next()?;
        tokio::time::sleep(delay).await;
        Some((Ok::<_, std::convert::Infallible>(frame), frames))
    });
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// Starts the fake server; returns its base URL.
async fn serve(fake: Fake) -> String {
    let app = Router::new()
        .route("/v1/chat/completions", post(complete))
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

const SECRET: &str = "e2e secret";

/// The demo data, an api, and a `tienda` worker that calls the fake model.
async fn start(db: &Db, base_url: &str) -> (Worker, Worker) {
    mostrador_retail::retail::load_demo_data(&db.pool)
        .await
        .expect("demo data");
    let api = Worker::spawn(db, "api", "api", &["--jwt-secret", SECRET]);
    let worker = Worker::start(
        db,
        "worker",
        &[
            "--graphs",
            "tienda",
            "--model-base-url",
            base_url,
            "--model-name",
            "fake",
            "--model-context-window",
            "8192",
        ],
    );
    api.until_ready_is(200).await;
    worker.until_ready_is(200).await;
    (api, worker)
}

fn question() -> Value {
    json!({"assistant_id": "tienda", "input": {"messages": [
        {"role": "user", "content": "¿Quedan zapatillas de trail Cumbre 42?"}
    ]}})
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn model_tokens_reach_sse_clients_as_they_arrive(pool: PgPool) {
    let db = Db::new(pool).await;
    let fake = Fake {
        delay: Duration::from_millis(150),
        ..Fake::default()
    };
    let base_url = serve(fake.clone()).await;
    let (api, _worker) = start(&db, &base_url).await;
    let clerk = token(SECRET, "pepe", "clerk", "madrid-centro");

    let mut body = question();
    body["stream_mode"] = json!(["messages-tuple", "values"]);
    let body = body.to_string();
    let mut stream = tokio::net::TcpStream::connect(api.addr())
        .await
        .expect("connect");
    let request = format!(
        "POST /runs/stream HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Authorization: Bearer {clerk}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    // Each `messages` event, with when it arrived.
    let mut arrivals: Vec<(Instant, String)> = Vec::new();
    let (mut received, mut buffer) = (String::new(), [0u8; 8192]);
    let reading = async {
        loop {
            let n = stream.read(&mut buffer).await.expect("read");
            if n == 0 {
                break;
            }
            received.push_str(&String::from_utf8_lossy(&buffer[..n]));
            while let Some(end) = received.find("\n\n") {
                let event: String = received.drain(..end + 2).collect();
                if let Some(data) = event
                    .lines()
                    .skip_while(|line| *line != "event: messages")
                    .find_map(|line| line.strip_prefix("data: "))
                {
                    let data: Value = serde_json::from_str(data).expect("json");
                    arrivals.push((
                        Instant::now(),
                        data[0]["content"].as_str().unwrap_or("").to_owned(),
                    ));
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), reading)
        .await
        .expect("the stream ended within 30 s");

    let tokens: Vec<&str> = arrivals.iter().map(|(_, token)| token.as_str()).collect();
    assert_eq!(tokens, WORDS, "one event per chunk, in order");
    let spread = arrivals[arrivals.len() - 1].0 - arrivals[0].0;
    assert!(
        spread >= Duration::from_millis(500),
        "the chunks reached the client as the model sent them (150 ms apart), not at the end: {spread:?}"
    );
    assert_eq!(
        fake.requests.load(Ordering::SeqCst),
        2,
        "a tool call, then the answer"
    );
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn model_503_before_the_first_byte_is_retried(pool: PgPool) {
    let db = Db::new(pool).await;
    let fake = Fake {
        failures: 1,
        ..Fake::default()
    };
    let base_url = serve(fake.clone()).await;
    let (api, _worker) = start(&db, &base_url).await;
    let clerk = token(SECRET, "pepe", "clerk", "madrid-centro");
    let (status, values) = call(&api, "POST", "/runs/wait", &clerk, Some(question())).await;
    assert_eq!(status, 200, "{values}");
    let answer = values["messages"]
        .as_array()
        .and_then(|m| m.last())
        .expect("answer");
    assert_eq!(answer["content"], WORDS.concat());
    assert_eq!(answer["response_metadata"]["model_name"], "fake");
    assert_eq!(answer["usage_metadata"]["output_tokens"], 6);
    assert_eq!(
        fake.requests.load(Ordering::SeqCst),
        3,
        "the 503, its retry, then the answer"
    );
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn model_answer_cut_mid_stream_fails_the_run_without_a_retry_storm(pool: PgPool) {
    let db = Db::new(pool).await;
    let fake = Fake {
        cut: true,
        ..Fake::default()
    };
    let base_url = serve(fake.clone()).await;
    let (api, _worker) = start(&db, &base_url).await;
    let clerk = token(SECRET, "pepe", "clerk", "madrid-centro");
    let mut kept = question();
    kept["on_completion"] = json!("keep");
    let (status, body) = call(&api, "POST", "/runs", &clerk, Some(kept)).await;
    assert_eq!(status, 200, "{body}");
    let join = format!(
        "/threads/{}/runs/{}/join",
        body["thread_id"].as_str().expect("thread"),
        body["run_id"].as_str().expect("run")
    );
    let (status, _) = call(&api, "GET", &join, &clerk, None).await;
    assert_eq!(status, 200);
    let (status, error): (String, String) = sqlx::query_as(
        "select status::text, error::text from mostrador.runs where run_id = $1::uuid",
    )
    .bind(body["run_id"].as_str())
    .fetch_one(&db.pool)
    .await
    .expect("run");
    assert_eq!(status, "error");
    assert!(error.contains("broke off"), "{error}");
    assert_eq!(
        fake.requests.load(Ordering::SeqCst),
        1,
        "a broken answer is not asked again"
    );
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn a_base_url_without_a_context_window_refuses_to_start(pool: PgPool) {
    let db = Db::new(pool).await;
    let mut worker = Worker::start(
        &db,
        "worker",
        &["--model-base-url", "http://127.0.0.1:9/v1"],
    );
    let status = worker.exit(Duration::from_secs(20)).await;
    assert!(!status.success());
    let log = worker.log();
    assert!(
        log.contains("MODEL_CONTEXT_WINDOW must be set when MODEL_BASE_URL is"),
        "{log}"
    );
}
