//! Runs over HTTP: background create with `Content-Location`, get, list; what is refused and that
//! a refusal writes nothing; backpressure; which requests stream the run they create; runs from a
//! past checkpoint. (Cancelling and deleting runs: `cancel.rs`.)

use axum::http::{StatusCode, header};
use mostrador_api::ApiConfig;
use mostrador_graph::stream::discard;
use mostrador_graph::{RunControl, RunInput, RunOptions};
use mostrador_queue::PgCheckpointer;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::{Api, caller, config, new_thread, runs};

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn background_run_is_enqueued_and_can_be_read_back(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let thread = new_thread(&api, &ana).await;
    let body = r#"{"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "hola"}]},
                   "stream_mode": ["values", "messages-tuple"], "stream_subgraphs": false,
                   "stream_resumable": false, "config": {"recursion_limit": 5}, "durability": "sync"}"#;
    let (status, headers, run) = api
        .send(api.request("POST", &format!("/threads/{thread}/runs"), &ana, body))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let run_id = run["run_id"].as_str().expect("run id");
    assert_eq!(
        headers[header::CONTENT_LOCATION],
        format!("/threads/{thread}/runs/{run_id}").as_str(),
        "the client reads the run id from the end of Content-Location"
    );
    assert_eq!(run["status"], "pending");
    assert_eq!(run["assistant_id"], "fe096781-5601-53d2-b2f6-0d3403f7e9ca");
    assert_eq!(run["multitask_strategy"], "enqueue");
    assert_eq!(run["kwargs"]["stream_mode"], json!(["values", "messages"]));
    assert_eq!(run["metadata"]["graph_id"], "agent");

    let (status, _, read) = api
        .send(api.request("GET", &format!("/threads/{thread}/runs/{run_id}"), &ana, ""))
        .await;
    assert_eq!((status, &read), (StatusCode::OK, &run));
    let (_, _, listed) = api
        .send(api.request(
            "GET",
            &format!("/threads/{thread}/runs?limit=10&offset=0"),
            &ana,
            "",
        ))
        .await;
    assert_eq!(listed, json!([run]));
    let (_, _, thread_now) = api
        .send(api.request("GET", &format!("/threads/{thread}"), &ana, ""))
        .await;
    assert_eq!(thread_now["status"], "busy");
    assert_eq!(
        thread_now["metadata"]["graph_id"], "agent",
        "the first run bound the thread"
    );

    // Someone else's thread: 404, and nothing enqueued.
    let luis = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let (status, _, _) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread}/runs"),
            &luis,
            r#"{"assistant_id": "agent"}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = api
        .send(api.request(
            "GET",
            &format!("/threads/{thread}/runs/{run_id}"),
            &luis,
            "",
        ))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(runs(&api).await, 1);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn bad_run_requests_are_client_errors_and_write_nothing(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let path = format!("/threads/{thread}/runs");
    for (body, expected) in [
        (r#"{}"#, StatusCode::UNPROCESSABLE_ENTITY),
        (
            r#"{"assistant_id": "nope"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "stream_mode": "events"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "stream_mode": 3}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "multitask_strategy": "bogus"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "checkpoint_id": "x"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "interrupt_before": ["nowhere"]}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "interrupt_after": "model"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "interrupt_before": 3}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "checkpoint": {"checkpoint_id": 7}}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "checkpoint": "latest"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "checkpoint": {"checkpoint_ns": "child:1"}}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "webhook": 42}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "after_seconds": -1}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "config": {"recursion_limit": 0}}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "config": {"recursion_limit": 10001}}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "config": []}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "config": {"configurable": {"a": 1}}, "context": {"b": 2}}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            r#"{"assistant_id": "agent", "durability": "eventually"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "if_not_exists": "sometimes"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "checkpoint_id": "0f9ad0c2-6f2f-4b1e-9d7e-5a4c2b1e0d3f"}"#,
            StatusCode::NOT_FOUND,
        ),
        (
            r#"{"assistant_id": "agent", "checkpoint": {"checkpoint_id": "not-an-id"}}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "command": {"goto": "nowhere"}}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "command": {"goto": {"input": {}}}}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "command": {"update": {"mood": "good"}}}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "command": {"update": [["messages"]]}}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "command": {"resume": 1, "goto": "model"}}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"assistant_id": "agent", "input": "#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let (status, _, answer) = api.send(api.request("POST", &path, &ana, body)).await;
        assert_eq!(status, expected, "{body}: {answer}");
        assert!(answer["detail"].is_string(), "{answer}");
    }
    let unknown = format!("/threads/{}/runs", Uuid::now_v7());
    let (status, _, _) = api
        .send(api.request("POST", &unknown, &ana, r#"{"assistant_id": "agent"}"#))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(runs(&api).await, 0, "nothing was enqueued");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn backpressure_returns_503_with_retry_after_and_inserts_nothing(pool: PgPool) {
    let api = Api::with(
        pool,
        ApiConfig {
            max_pending: 1,
            ..config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let first = new_thread(&api, &ana).await;
    let second = new_thread(&api, &ana).await;
    let body = r#"{"assistant_id": "agent"}"#;
    let (status, _, _) = api
        .send(api.request("POST", &format!("/threads/{first}/runs"), &ana, body))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, headers, answer) = api
        .send(api.request("POST", &format!("/threads/{second}/runs"), &ana, body))
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert!(
        headers[header::RETRY_AFTER]
            .to_str()
            .expect("ascii")
            .parse::<u64>()
            .is_ok()
    );
    assert_eq!(runs(&api).await, 1);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_caller_past_their_share_of_the_queue_gets_429_and_others_are_served(pool: PgPool) {
    let api = Api::with(
        pool,
        ApiConfig {
            max_pending_per_caller: 2,
            max_delay: std::time::Duration::from_secs(60),
            ..config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let luis = api.token_for(&caller("luis", "customer", None));
    let body = r#"{"assistant_id": "agent"}"#;
    let thread = new_thread(&api, &ana).await;
    let path = format!("/threads/{thread}/runs");
    let later = r#"{"assistant_id": "agent", "after_seconds": 61}"#;
    let (status, _, answer) = api.send(api.request("POST", &path, &ana, later)).await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "past the horizon: {answer}"
    );
    for _ in 0..2 {
        let (status, _, answer) = api.send(api.request("POST", &path, &ana, body)).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    for (method, path) in [
        ("POST", path.as_str()),
        ("POST", "/runs"),
        ("POST", "/runs/wait"),
    ] {
        let (status, headers, answer) = api.send(api.request(method, path, &ana, body)).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{path}: {answer}");
        assert!(headers.contains_key(header::RETRY_AFTER), "{path}");
    }
    assert_eq!(runs(&api).await, 2, "nothing more was queued");
    let (status, _, answer) = api.send(api.request("POST", "/runs", &luis, body)).await;
    assert_eq!(status, StatusCode::OK, "another caller is served: {answer}");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn reject_strategy_conflicts_with_a_run_in_flight(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let path = format!("/threads/{thread}/runs");
    let body = r#"{"assistant_id": "agent", "multitask_strategy": "reject"}"#;
    assert_eq!(
        api.send(api.request("POST", &path, &ana, body)).await.0,
        StatusCode::OK
    );
    assert_eq!(
        api.send(api.request("POST", &path, &ana, body)).await.0,
        StatusCode::CONFLICT
    );
    assert_eq!(runs(&api).await, 1);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn stateless_and_batch_runs_get_threads_of_their_own(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let (status, headers, run) = api
        .send(api.request(
            "POST",
            "/runs",
            &ana,
            r#"{"assistant_id": "agent", "input": {}}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert!(headers.contains_key(header::CONTENT_LOCATION));
    let thread = run["thread_id"].as_str().expect("thread id");
    let (status, _, owned) = api
        .send(api.request("GET", &format!("/threads/{thread}"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::OK, "the caller owns the new thread");
    assert_eq!(owned["metadata"]["graph_id"], "agent");

    let batch = r#"[{"assistant_id": "agent", "input": {"n": 1}}, {"assistant_id": "approval", "input": {}}]"#;
    let (status, _, runs_out) = api
        .send(api.request("POST", "/runs/batch", &ana, batch))
        .await;
    assert_eq!(status, StatusCode::OK, "{runs_out}");
    let threads: Vec<&str> = runs_out
        .as_array()
        .expect("list")
        .iter()
        .map(|run| run["thread_id"].as_str().expect("id"))
        .collect();
    assert_eq!(threads.len(), 2);
    assert_ne!(threads[0], threads[1]);
    assert_eq!(runs(&api).await, 3);

    // One bad run refuses the whole batch, and nothing is written.
    let bad = r#"[{"assistant_id": "agent"}, {"assistant_id": "nope"}]"#;
    let (status, _, _) = api
        .send(api.request("POST", "/runs/batch", &ana, bad))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    for body in ["[]", r#"{"assistant_id": "agent"}"#] {
        let (status, _, _) = api
            .send(api.request("POST", "/runs/batch", &ana, body))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    }
    let resume = r#"{"assistant_id": "approval", "command": {"resume": "yes"}}"#;
    let (status, _, _) = api.send(api.request("POST", "/runs", &ana, resume)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "resuming needs a thread");
    assert_eq!(runs(&api).await, 3);
    let threads_now: i64 = sqlx::query_scalar("select count(*) from mostrador.threads")
        .fetch_one(api.state.pool())
        .await
        .expect("count");
    assert_eq!(threads_now, 3, "refused runs left no thread behind");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn streams_and_waits_say_where_to_rejoin_them(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    for (path, answer) in [("/runs/stream", "stream"), ("/runs/wait", "join")] {
        let (status, headers) = api
            .head_of(api.request(
                "POST",
                path,
                &ana,
                r#"{"assistant_id": "agent", "input": {}, "on_completion": "keep"}"#,
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{path}");
        let run = headers[header::CONTENT_LOCATION].to_str().expect("ascii");
        assert_eq!(
            headers[header::LOCATION].to_str().expect("ascii"),
            format!("{run}/{answer}"),
            "{path}"
        );
        let (status, joined) = api
            .head_of(api.request("GET", &format!("{run}/stream"), &ana, ""))
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            joined[header::LOCATION].to_str().expect("ascii"),
            format!("{run}/stream"),
            "a joined stream says where to rejoin it too"
        );
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn only_a_run_its_request_streams_has_its_first_event_written_at_once(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    for (path, streamed) in [
        ("/threads/{t}/runs/stream", true),
        ("/runs/stream", true),
        ("/threads/{t}/runs/wait", false),
        ("/runs/wait", false),
        ("/threads/{t}/runs", false),
        ("/runs", false),
    ] {
        let path = path.replace("{t}", &new_thread(&api, &ana).await);
        let (status, headers) = api
            .head_of(api.request(
                "POST",
                &path,
                &ana,
                r#"{"assistant_id": "agent", "input": {}, "on_completion": "keep"}"#,
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{path}");
        let run = headers[header::CONTENT_LOCATION].to_str().expect("ascii");
        let run_id = Uuid::parse_str(run.rsplit('/').next().expect("an id")).expect("uuid");
        let marked: bool =
            sqlx::query_scalar("select streamed from mostrador.runs where run_id = $1")
                .bind(run_id)
                .fetch_one(api.state.pool())
                .await
                .expect("the run");
        assert_eq!(marked, streamed, "{path}");
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_checkpoint_that_names_none_is_the_latest(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    // What chat UIs send on a follow-up: the thread's config, or null.
    for body in [
        r#"{"assistant_id": "agent", "input": {}, "checkpoint": null, "checkpoint_id": null}"#,
        r#"{"assistant_id": "agent", "input": {}, "checkpoint": {"thread_id": "x", "checkpoint_ns": ""}}"#,
    ] {
        let (status, _, run) = api.send(api.request("POST", "/runs", &ana, body)).await;
        assert_eq!(status, StatusCode::OK, "{body}: {run}");
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_rust_graph_run_from_a_past_checkpoint_branches_and_from_the_latest_goes_on(
    pool: PgPool,
) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let (_, _, thread) = api
        .send(api.request(
            "POST",
            "/threads",
            &ana,
            r#"{"metadata": {"graph_id": "approval"}}"#,
        ))
        .await;
    let id = thread["thread_id"].as_str().expect("id").to_owned();
    api.state
        .graph("approval")
        .expect("graph")
        .run(
            &PgCheckpointer::new(pool),
            Uuid::parse_str(&id).expect("uuid"),
            RunInput::Values(json!({})),
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await
        .expect("run");
    // A manager's decision written as an update: a second checkpoint.
    let marta = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let update = r#"{"values": {"decision": "approved"}, "as_node": "ask"}"#;
    let (status, _, _) = api
        .send(api.request("POST", &format!("/threads/{id}/state"), &marta, update))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, _, history) = api
        .send(api.request("GET", &format!("/threads/{id}/history"), &ana, ""))
        .await;
    let (latest, earlier) = (&history[0]["checkpoint"], &history[1]["checkpoint"]);
    assert!(earlier["checkpoint_id"].is_string(), "{history}");

    let path = format!("/threads/{id}/runs");
    // A checkpoint the thread does not have, or a resume somewhere else than the latest: refused.
    let unknown = json!({"assistant_id": "approval", "checkpoint_id": Uuid::now_v7()});
    let (status, _, answer) = api
        .send(api.request("POST", &path, &ana, &unknown.to_string()))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    let resume =
        json!({"assistant_id": "approval", "checkpoint": earlier, "command": {"resume": "no"}});
    let (status, _, answer) = api
        .send(api.request("POST", &path, &marta, &resume.to_string()))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(runs(&api).await, 0);

    // From an earlier one (regenerate, time travel): the worker starts a branch there.
    let regenerate = json!({"assistant_id": "approval", "checkpoint": earlier});
    let (status, _, run) = api
        .send(api.request("POST", &path, &ana, &regenerate.to_string()))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(
        run["kwargs"]["config"]["checkpoint_id"], earlier["checkpoint_id"],
        "{run}"
    );
    api.send(api.request(
        "POST",
        &format!(
            "/threads/{id}/runs/{}/cancel",
            run["run_id"].as_str().expect("id")
        ),
        &ana,
        "{}",
    ))
    .await;

    // agent-chat-ui's follow-up message names the thread head's checkpoint: where the run starts.
    let follow_up = json!({"assistant_id": "approval", "input": {}, "checkpoint": latest});
    let (status, _, run) = api
        .send(api.request("POST", &path, &ana, &follow_up.to_string()))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["kwargs"]["config"].get("checkpoint_id"), None, "{run}");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_runner_graphs_thread_runs_another_python_graph_and_a_rust_graphs_does_not(pool: PgPool) {
    let api = Api::with(
        pool.clone(),
        ApiConfig {
            runner_graphs: vec!["py_a".into(), "py_b".into()],
            ..config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let run_on = |thread: String, graph: &'static str| {
        let body = json!({"assistant_id": graph, "multitask_strategy": "enqueue"}).to_string();
        let request = api.request("POST", &format!("/threads/{thread}/runs"), &ana, &body);
        async { api.send(request).await }
    };
    let python = new_thread(&api, &ana).await;
    for graph in ["py_a", "py_b"] {
        let (status, _, run) = run_on(python.clone(), graph).await;
        assert_eq!(status, StatusCode::OK, "{graph}: {run}");
    }
    let (graph_id, metadata): (String, serde_json::Value) = sqlx::query_as(
        "select graph_id, metadata from mostrador.threads where thread_id = $1::uuid",
    )
    .bind(&python)
    .fetch_one(&pool)
    .await
    .expect("thread");
    assert_eq!(graph_id, "py_b", "bound to the graph that ran last");
    assert_eq!(metadata["graph_id"], "py_b");

    // A Rust graph's checkpoints are its engine's: its thread runs that graph only.
    let rust = new_thread(&api, &ana).await;
    let (status, _, _) = run_on(rust.clone(), "agent").await;
    assert_eq!(status, StatusCode::OK);
    for graph in ["approval", "py_a"] {
        let (status, _, answer) = run_on(rust.clone(), graph).await;
        assert_eq!(status, StatusCode::CONFLICT, "{graph}: {answer}");
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_stateless_runs_thread_goes_when_the_run_ends_unless_kept(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    for (path, body, temporary) in [
        ("/runs", json!({"assistant_id": "agent"}), true),
        (
            "/runs",
            json!({"assistant_id": "agent", "on_completion": "delete"}),
            true,
        ),
        (
            "/runs",
            json!({"assistant_id": "agent", "on_completion": "keep"}),
            false,
        ),
        ("/runs/batch", json!([{"assistant_id": "agent"}]), true),
        (
            "/runs/batch",
            json!([{"assistant_id": "agent", "on_completion": "keep"}]),
            false,
        ),
    ] {
        let (status, _, answer) = api
            .send(api.request("POST", path, &ana, &body.to_string()))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let run = if answer.is_array() {
            &answer[0]
        } else {
            &answer
        };
        let marked: bool = sqlx::query_scalar(
            "select temporary from mostrador.threads where thread_id = $1::uuid",
        )
        .bind(run["thread_id"].as_str().expect("thread"))
        .fetch_one(&pool)
        .await
        .expect("thread");
        assert_eq!(marked, temporary, "{path} {body}");
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_projects_configurable_headers_reach_the_runs_configurable_and_credentials_never(
    pool: PgPool,
) {
    let api = Api::with(
        pool.clone(),
        ApiConfig {
            configurable_headers: Some(mostrador_api::app::HeaderFilter {
                includes: vec![
                    "x-user-*".into(),
                    "x-api-key".into(),
                    "authorization".into(),
                ],
                excludes: vec!["x-user-secret".into()],
            }),
            ..config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let mut request = api.request(
        "POST",
        "/runs",
        &ana,
        &json!({"assistant_id": "agent", "config": {"configurable": {"x-user-tier": "given"}}})
            .to_string(),
    );
    for (name, value) in [
        ("x-user-tier", "gold"),
        ("x-user-secret", "s3cret"),
        ("x-api-key", "mostrador_nope"),
        ("x-other", "no"),
    ] {
        request
            .headers_mut()
            .insert(name, value.parse().expect("a header value"));
    }
    let (status, _, run) = api.send(request).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let configurable = &run["kwargs"]["config"]["configurable"];
    assert_eq!(
        configurable["x-user-tier"], "gold",
        "the header over the body's"
    );
    for absent in ["x-user-secret", "x-api-key", "x-other", "authorization"] {
        assert!(
            configurable.get(absent).is_none(),
            "{absent}: {configurable}"
        );
    }
    assert_eq!(
        run["kwargs"]["context"]["x-user-tier"], "given",
        "the context is the request's own, as officially"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_run_list_answers_the_fields_select_names(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let thread = new_thread(&api, &ana).await;
    crate::support::new_run(&api, &ana, &thread).await;
    let list = |query: &str| {
        let request = api.request("GET", &format!("/threads/{thread}/runs{query}"), &ana, "");
        async { api.send(request).await }
    };
    let (status, _, runs) = list("?select=run_id&select=status&limit=5").await;
    assert_eq!(status, StatusCode::OK, "{runs}");
    let fields: Vec<&String> = runs[0].as_object().expect("a run").keys().collect();
    assert_eq!(fields, ["run_id", "status"]);
    let (_, _, runs) = list("").await;
    assert!(runs[0]["kwargs"].is_object(), "every field without select");
    let (status, _, _) = list("?select=secrets").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _, _) = list("?limit=many").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}
