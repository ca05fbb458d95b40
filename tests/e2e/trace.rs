//! A run carries the trace of the request that created it: the api's request span, the run row,
//! the stream's `metadata` event, the worker's run span (in JSON logs) and the tools'
//! configuration all name one trace id.

use mostrador_api::Role;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::retail::token;
use crate::support::{Db, Worker, sse_events};

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_run_carries_the_trace_of_the_request_that_created_it(pool: PgPool) {
    let db = Db::new(pool).await;
    mostrador_agents::retail::load_demo_data(&db.pool)
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
    let clerk = token(secret, "pepe", Role::Clerk, "madrid-centro");
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
        parse_traceparent("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01").as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
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
