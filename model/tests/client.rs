//! The model client against a fake OpenAI-compatible server: streaming with tool-call deltas and
//! usage, retries only before the first byte, a cut mid-answer, an idle server, configuration.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use mostrador_model::{ModelClient, ModelConfig, ModelError, ToolCall};
use serde_json::{Value, json};

/// What the fake server answers.
#[derive(Clone)]
struct Script {
    /// Requests answered 503 before the stream is served.
    failures: usize,
    chunks: Vec<Value>,
    /// Close the connection after the chunks instead of sending `[DONE]`.
    cut: bool,
    /// Wait this long before each chunk.
    delay: Duration,
}

#[derive(Clone)]
struct Fake {
    script: Script,
    requests: Arc<AtomicUsize>,
    last_body: Arc<Mutex<Value>>,
}

async fn answer(State(fake): State<Fake>, body: String) -> Response {
    let n = fake.requests.fetch_add(1, Ordering::SeqCst);
    *fake.last_body.lock().expect("lock") = serde_json::from_str(&body).unwrap_or(Value::Null);
    if n < fake.script.failures {
        return (StatusCode::SERVICE_UNAVAILABLE, "warming up").into_response();
    }
    let script = fake.script.clone();
    let mut frames: Vec<String> = script
        .chunks
        .iter()
        .map(|chunk| format!("data: {chunk}\n\n"))
        .collect();
    if !script.cut {
        frames.push("data: [DONE]\n\n".into());
    }
    let stream = futures_util::stream::unfold(frames.into_iter(), move |mut frames| async move {
        let frame = frames.next()?;
        tokio::time::sleep(script.delay).await;
        Some((Ok::<_, std::convert::Infallible>(frame), frames))
    });
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// Starts the fake server; returns a client of it and the request counter.
async fn fake(script: Script, idle_timeout: Duration) -> (ModelClient, Fake) {
    let fake = Fake {
        script,
        requests: Arc::default(),
        last_body: Arc::new(Mutex::new(Value::Null)),
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(answer))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base_url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let config = ModelConfig {
        idle_timeout,
        ..ModelConfig::from_values(
            Some(base_url),
            Some("qwen".into()),
            Some("secret".into()),
            Some("32768".into()),
        )
        .expect("valid")
        .expect("configured")
    };
    (ModelClient::new(config).expect("client"), fake)
}

fn delta(delta: Value) -> Value {
    json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

fn answer_chunks() -> Vec<Value> {
    vec![
        delta(json!({"role": "assistant", "reasoning_content": "thinking about stock"})),
        delta(json!({"content": "Hay "})),
        delta(json!({"content": "3 unidades"})),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "stock", "arguments": "{\"sku\":"}}]}),
        ),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": " \"A-1\"}"}}]})),
        json!({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"id": "c1", "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}}),
    ]
}

#[tokio::test]
async fn streamed_answer_arrives_token_by_token_with_tool_calls_and_usage() {
    let script = Script {
        failures: 0,
        chunks: answer_chunks(),
        cut: false,
        delay: Duration::from_millis(5),
    };
    let (client, fake) = fake(script, Duration::from_secs(5)).await;
    let mut tokens = Vec::new();
    let completion = client
        .complete(
            &[json!({"role": "user", "content": "¿queda stock?"})],
            &[json!({"type": "function"})],
            |token| {
                tokens.push(token.to_owned());
            },
        )
        .await
        .expect("answer");
    assert_eq!(tokens, ["Hay ", "3 unidades"], "each piece as it came");
    assert_eq!(completion.content, "Hay 3 unidades");
    assert_eq!(
        completion.tool_calls,
        [ToolCall {
            id: "call_1".into(),
            name: "stock".into(),
            arguments: "{\"sku\": \"A-1\"}".into()
        }]
    );
    assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(
        (completion.prompt_tokens, completion.completion_tokens),
        (Some(12), Some(7))
    );
    let sent = fake.last_body.lock().expect("lock").clone();
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
    assert_eq!(sent["model"], "qwen");
}

#[tokio::test]
async fn failure_before_the_first_byte_is_retried() {
    let script = Script {
        failures: 2,
        chunks: answer_chunks(),
        cut: false,
        delay: Duration::ZERO,
    };
    let (client, fake) = fake(script, Duration::from_secs(5)).await;
    let completion = client
        .complete(&[], &[], |_| {})
        .await
        .expect("answer on the third try");
    assert_eq!(completion.content, "Hay 3 unidades");
    assert_eq!(fake.requests.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn answer_cut_mid_stream_fails_without_a_retry() {
    let script = Script {
        failures: 0,
        chunks: answer_chunks()[..3].to_vec(),
        cut: true,
        delay: Duration::ZERO,
    };
    let (client, fake) = fake(script, Duration::from_secs(5)).await;
    let mut tokens = 0;
    let err = client
        .complete(&[], &[], |_| tokens += 1)
        .await
        .expect_err("cut");
    assert!(matches!(err, ModelError::Stream(_)), "{err}");
    assert_eq!(tokens, 2, "what arrived was shown");
    assert_eq!(
        fake.requests.load(Ordering::SeqCst),
        1,
        "no retry once the answer began"
    );
}

#[tokio::test]
async fn silent_server_hits_the_idle_timeout() {
    let script = Script {
        failures: 0,
        chunks: answer_chunks(),
        cut: false,
        delay: Duration::from_millis(500),
    };
    let (client, _) = fake(script, Duration::from_millis(100)).await;
    let err = client
        .complete(&[], &[], |_| {})
        .await
        .expect_err("too slow");
    assert!(matches!(err, ModelError::IdleTimeout(_)), "{err}");
}

#[test]
fn a_base_url_without_a_context_window_refuses_to_start() {
    let refused = ModelConfig::from_values(Some("http://vllm:8000/v1".into()), None, None, None);
    assert!(refused.is_err_and(|message| message.contains("MODEL_CONTEXT_WINDOW")));
    assert!(
        ModelConfig::from_values(
            Some("http://vllm:8000/v1".into()),
            None,
            None,
            Some("lots".into())
        )
        .is_err()
    );
    assert!(
        matches!(ModelConfig::from_values(None, None, None, None), Ok(None)),
        "offline"
    );
    let config = ModelConfig::from_values(
        Some("http://vllm:8000/v1/".into()),
        Some("qwen".into()),
        Some("sk-secret".into()),
        Some("32768".into()),
    )
    .expect("valid")
    .expect("configured");
    assert_eq!(config.base_url, "http://vllm:8000/v1");
    assert!(
        !format!("{config:?}").contains("sk-secret"),
        "the key stays out of logs"
    );
}
