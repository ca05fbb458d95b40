//! `mostrador api` as a process: probes, a token, an assistant per graph, SIGTERM.

use std::time::Duration;

use mostrador_api::Caller;
use mostrador_api::auth::mint;

use crate::retail::retail_auth;
use serde_json::Value;
use sqlx::PgPool;

use crate::support::{Db, Worker, sse_events};

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn api_process_serves_assistants_and_exits_on_sigterm(pool: PgPool) {
    let db = Db::new(pool).await;
    let mut api = Worker::spawn(&db, "api", "api", &["--jwt-secret", "e2e secret"]);
    api.until_ready_is(200).await;

    let config = retail_auth("e2e secret");
    let caller = Caller::new("ana").with_roles(["customer"]);
    let token = mint(&config, &caller, Duration::from_secs(60)).expect("token");
    let bearer = format!("Bearer {token}");
    let json = ("Content-Type", "application/json");
    let (status, body) = api
        .request(
            "POST",
            "/assistants/search",
            &[("Authorization", &bearer), json],
            "{\"limit\": 100}",
        )
        .await
        .expect("search");
    assert_eq!(status, 200, "{body}");
    let assistants: Value = serde_json::from_str(&body).expect("json");
    let mut graphs: Vec<&str> = assistants
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|assistant| assistant["graph_id"].as_str())
        .collect();
    graphs.sort_unstable();
    assert_eq!(
        graphs,
        [
            "bench_linear_1",
            "bench_linear_6",
            "cliente",
            "compras",
            "e2e_approval",
            "e2e_fanout",
            "e2e_flaky",
            "e2e_linear_5",
            "e2e_linear_6",
            "e2e_nested",
            "e2e_recall",
            "fichas",
            "tienda"
        ]
    );

    let (status, _) = api
        .request("POST", "/assistants/search", &[json], "{}")
        .await
        .expect("search");
    assert_eq!(status, 401);

    api.terminate();
    assert!(
        api.exit(Duration::from_secs(10)).await.success(),
        "{}",
        api.log()
    );
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn run_streams_through_api_and_worker_processes(pool: PgPool) {
    let db = Db::new(pool).await;
    let api = Worker::spawn(&db, "api", "api", &["--jwt-secret", "e2e secret"]);
    let _worker = Worker::start(&db, "w", &[]);
    api.until_ready_is(200).await;
    let config = retail_auth("e2e secret");
    let ana = Caller::new("ana")
        .with_roles(["customer"])
        .in_tenant(Some("madrid-1"));
    let bearer = format!(
        "Bearer {}",
        mint(&config, &ana, Duration::from_secs(60)).expect("token")
    );
    let json = ("Content-Type", "application/json");
    let auth = ("Authorization", bearer.as_str());

    let (status, body) = api
        .request("POST", "/threads", &[auth, json], "{}")
        .await
        .expect("create");
    assert_eq!(status, 200, "{body}");
    let thread: Value = serde_json::from_str(&body).expect("json");
    let thread_id = thread["thread_id"].as_str().expect("id");

    let run = r#"{"assistant_id": "e2e_linear_5", "input": {}, "stream_mode": ["values", "updates"],
                  "stream_subgraphs": false, "stream_resumable": false}"#;
    let (status, body) = api
        .request(
            "POST",
            &format!("/threads/{thread_id}/runs/stream"),
            &[auth, json],
            run,
        )
        .await
        .expect("stream");
    assert_eq!(status, 200, "{body}");
    let events = sse_events(&body);
    let names: Vec<&str> = events.iter().map(|(name, ..)| name.as_str()).collect();
    assert_eq!(names.first(), Some(&"metadata"), "{names:?}");
    // Closed after the run's last event, with no `end` of its own (as the official server).
    assert_eq!(names.last(), Some(&"values"), "{names:?}");
    assert_eq!(
        names.iter().filter(|name| **name == "updates").count(),
        5,
        "{names:?}"
    );
    let last_values = events
        .iter()
        .rev()
        .find(|(name, ..)| name == "values")
        .expect("values");
    assert_eq!(
        last_values.2["log"],
        serde_json::json!(["s1", "s2", "s3", "s4", "s5"])
    );
    let run_id = events[0].2["run_id"].as_str().expect("run id");

    // A reconnect after event 3 gets exactly the rest.
    let last_event_id = "3";
    let (_, rest) = api
        .request(
            "GET",
            &format!(
                "/threads/{thread_id}/runs/{run_id}/stream?stream_mode=&cancel_on_disconnect=false"
            ),
            &[auth, ("Last-Event-ID", last_event_id)],
            "",
        )
        .await
        .expect("join stream");
    let rest = sse_events(&rest);
    let expected: Vec<i64> = events
        .iter()
        .filter_map(|(_, id, _)| *id)
        .filter(|id| *id > 3)
        .collect();
    let got: Vec<i64> = rest.iter().filter_map(|(_, id, _)| *id).collect();
    assert_eq!(got, expected, "no event lost or repeated");

    let (_, body) = api
        .request("GET", &format!("/threads/{thread_id}"), &[auth], "")
        .await
        .expect("thread");
    let thread: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(thread["status"], "idle");
    assert_eq!(
        thread["values"]["log"],
        serde_json::json!(["s1", "s2", "s3", "s4", "s5"])
    );
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn dev_mode_runs_api_and_worker_in_one_process(pool: PgPool) {
    let db = Db::new(pool).await;
    let mut dev = Worker::spawn(&db, "dev", "dev", &[]);
    dev.until_ready_is(200).await;
    let config = retail_auth("mostrador-dev-secret");
    let caller = Caller::new("dev")
        .with_roles(["manager"])
        .in_tenant(Some("dev"));
    let bearer = format!(
        "Bearer {}",
        mint(&config, &caller, Duration::from_secs(60)).expect("token")
    );
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (_, body) = dev
        .request("POST", "/threads", &headers, "{}")
        .await
        .expect("thread");
    let thread: Value = serde_json::from_str(&body).expect("json");
    let thread_id = thread["thread_id"].as_str().expect("id");
    let (status, body) = dev
        .request(
            "POST",
            &format!("/threads/{thread_id}/runs/wait"),
            &headers,
            r#"{"assistant_id": "e2e_linear_5", "input": {}}"#,
        )
        .await
        .expect("wait");
    assert_eq!(status, 200, "{body}\n{}", dev.log());
    let values: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        values["log"],
        serde_json::json!(["s1", "s2", "s3", "s4", "s5"])
    );

    dev.terminate();
    assert!(
        dev.exit(Duration::from_secs(20)).await.success(),
        "{}",
        dev.log()
    );
}
