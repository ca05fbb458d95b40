//! A run carries the trace of the request that created it: the api's request span, the run row,
//! the stream's `metadata` event, the worker's run span (in JSON logs) and the tools'
//! configuration all name one trace id.

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::retail::token;
use crate::support::{Db, Worker, sse_events};

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn a_run_carries_the_trace_of_the_request_that_created_it(pool: PgPool) {
    let db = Db::new(pool).await;
    mostrador_retail::retail::load_demo_data(&db.pool)
        .await
        .expect("demo data");
    let secret = "e2e secret";
    let api = Worker::spawn(&db, "api", "api", &["--jwt-secret", secret]);
    let worker = Worker::start(
        &db,
        "worker",
        &["--graphs", "tienda", "--log-format", "json"],
    );
    api.until_ready_is(200).await;
    worker.until_ready_is(200).await;

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let clerk = token(secret, "pepe", "clerk", "madrid-centro");
    let bearer = format!("Bearer {clerk}");
    let body = json!({"assistant_id": "tienda", "input": {"messages": [
        {"role": "user", "content": "¿Quedan zapatillas de trail Cumbre 42?"}]},
        "stream_mode": ["values"]})
    .to_string();
    let (status, stream) = api
        .request(
            "POST",
            "/runs/stream",
            &[
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
                ("traceparent", &format!("00-{trace_id}-00f067aa0ba902b7-01")),
            ],
            &body,
        )
        .await
        .expect("stream");
    assert_eq!(status, 200, "{stream}");
    let events = sse_events(&stream);
    assert_eq!(events[0].0, "metadata");
    assert_eq!(events[0].2["trace_id"], trace_id, "{:?}", events[0]);
    let run_id = events[0].2["run_id"].as_str().expect("run id").to_owned();

    let stored: Option<String> =
        sqlx::query_scalar("select trace_id from mostrador.runs where run_id = $1::uuid")
            .bind(&run_id)
            .fetch_one(&db.pool)
            .await
            .expect("run");
    assert_eq!(stored.as_deref(), Some(trace_id));

    // The worker's log lines inside the run (the model's answers) carry the run's span.
    let in_run: Vec<Value> = worker
        .log()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["fields"]["message"] == "the model answered")
        .collect();
    assert!(!in_run.is_empty(), "{}", worker.log());
    for line in &in_run {
        assert_eq!(line["span"]["trace_id"], trace_id, "{line}");
        assert_eq!(line["span"]["run_id"], run_id.as_str(), "{line}");
    }

    // A request without a traceparent starts a trace of its own.
    let (status, run) = api
        .request(
            "POST",
            "/runs",
            &[
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
            ],
            &body,
        )
        .await
        .expect("create");
    assert_eq!(status, 200, "{run}");
    let run: Value = serde_json::from_str(&run).expect("json");
    let own: Option<String> =
        sqlx::query_scalar("select trace_id from mostrador.runs where run_id = $1::uuid")
            .bind(run["run_id"].as_str())
            .fetch_one(&db.pool)
            .await
            .expect("run");
    let own = own.expect("a trace id");
    assert!(
        own.len() == 32 && own.bytes().all(|b| b.is_ascii_hexdigit()) && own != trace_id,
        "{own}"
    );
}

#[test]
fn traceparent_headers_are_read_as_the_w3c_says() {
    use mostrador_api::trace::parse_traceparent;
    assert_eq!(
        parse_traceparent("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
        Some((
            "4bf92f3577b34da6a3ce929d0e0e4736".to_owned(),
            "00f067aa0ba902b7".to_owned()
        ))
    );
    for bad in [
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-zbf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ] {
        assert_eq!(parse_traceparent(bad), None, "{bad}");
    }
}

/// Spans an OTLP/HTTP collector received: `(service, span name, trace id)`.
type Received = std::sync::Arc<std::sync::Mutex<Vec<(String, String, String)>>>;

async fn collect(
    axum::extract::State((received, arrived)): axum::extract::State<(
        Received,
        std::sync::Arc<tokio::sync::Notify>,
    )>,
    body: axum::body::Bytes,
) -> axum::http::StatusCode {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message;
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return axum::http::StatusCode::BAD_REQUEST;
    };
    let mut spans = received.lock().expect("lock");
    for resource in request.resource_spans {
        let service = resource
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|a| a.key == "service.name")
            .and_then(|a| a.value.as_ref())
            .and_then(|v| match &v.value {
                Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s)) => {
                    Some(s.clone())
                }
                _ => None,
            })
            .unwrap_or_default();
        for span in resource.scope_spans.into_iter().flat_map(|s| s.spans) {
            let trace_id: String = span.trace_id.iter().map(|b| format!("{b:02x}")).collect();
            spans.push((service.clone(), span.name, trace_id));
        }
    }
    arrived.notify_waiters();
    axum::http::StatusCode::OK
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn the_api_request_and_the_worker_run_export_one_trace_over_otlp(pool: PgPool) {
    let db = Db::new(pool).await;
    let received = Received::default();
    let arrived = std::sync::Arc::new(tokio::sync::Notify::new());
    let app = axum::Router::new()
        .route("/v1/traces", axum::routing::post(collect))
        .with_state((received.clone(), arrived.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });

    // The processes export to it in batches every 50 ms.
    let api = Worker::spawn_with_env(
        &db,
        "api",
        "api",
        &["--jwt-secret", "e2e secret"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    );
    let worker = Worker::spawn_with_env(
        &db,
        "worker",
        "worker",
        &["--graphs", "e2e_linear_5", "--poll-interval", "200ms"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    );
    api.until_ready_is(200).await;
    worker.until_ready_is(200).await;

    let trace_id = "0af7651916cd43dd8448eb211c80319c";
    let ana = token("e2e secret", "ana", "customer", "madrid-centro");
    let bearer = format!("Bearer {ana}");
    let (status, body) = api
        .request(
            "POST",
            "/runs/wait",
            &[
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
                ("traceparent", &format!("00-{trace_id}-b7ad6b7169203331-01")),
            ],
            &json!({"assistant_id": "e2e_linear_5", "input": {}}).to_string(),
        )
        .await
        .expect("wait");
    assert_eq!(status, 200, "{body}");

    let both = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            let waiting = arrived.notified();
            {
                let spans = received.lock().expect("lock");
                let of_trace = |service: &str, name: &str| {
                    spans
                        .iter()
                        .any(|(s, n, t)| s == service && n == name && t == trace_id)
                };
                if of_trace("mostrador-api", "request") && of_trace("mostrador-worker", "run") {
                    return;
                }
            }
            waiting.await;
        }
    })
    .await;
    assert!(
        both.is_ok(),
        "spans received: {:?}\n{}\n{}",
        received.lock().expect("lock"),
        api.log(),
        worker.log()
    );
}
