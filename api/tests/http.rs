//! The api's routes through its real router, in process, against a real Postgres.

use axum::body::Body as HttpBody;
use axum::http::{Request, StatusCode, header};
use serde_json::json;
use sqlx::PgPool;

use crate::support::Api;

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn probes_answer_without_a_token_and_ready_turns_503_when_draining(pool: PgPool) {
    let api = Api::new(pool).await;
    for path in ["/", "/ok", "/info", "/live", "/ready"] {
        let request = Request::get(path).body(HttpBody::empty()).expect("request");
        assert_eq!(api.send(request).await.0, StatusCode::OK, "{path}");
    }
    api.state.start_draining();
    let request = Request::get("/ready")
        .body(HttpBody::empty())
        .expect("request");
    assert_eq!(api.send(request).await.0, StatusCode::SERVICE_UNAVAILABLE);
    let (status, headers, _) = api.send(api.post("/assistants/search", "{}")).await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "new work goes to another pod"
    );
    assert!(headers.contains_key(header::RETRY_AFTER));
    let request = Request::get("/live")
        .body(HttpBody::empty())
        .expect("request");
    assert_eq!(api.send(request).await.0, StatusCode::OK, "still alive");
}

/// `/ok` (and `/`, the health check load balancers ask) answers as the official server's: the
/// database skipped, or asked with `check_db=1` (healthy; unhealthy is a 503 with `Retry-After`);
/// `/info` has the official fields.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn ok_and_info_answer_as_the_official_server_does(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let get = |path: &str| Request::get(path).body(HttpBody::empty()).expect("request");
    for path in ["/", "/ok"] {
        let (status, _, ok) = api.send(get(path)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            ok,
            serde_json::json!({"ok": true, "services": {"database": "skipped"}}),
            "{path}"
        );
    }
    let (status, _, ok) = api.send(get("/ok?check_db=1")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        ok,
        serde_json::json!({"ok": true, "services": {"database": "healthy"}})
    );
    let (status, _, _) = api.send(get("/ok?check_db=yes")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (_, _, info) = api.send(get("/info")).await;
    for flag in [
        "assistants",
        "crons",
        "langsmith",
        "langsmith_tracing_replicas",
    ] {
        assert!(info["flags"][flag].is_boolean(), "{flag}: {info}");
    }
    assert!(info["host"].get("project_id").is_some(), "{info}");

    // The database away (its pool closed), once the last check is past its second.
    pool.close().await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (status, headers, ok) = api.send(get("/ok?check_db=1")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{ok}");
    assert!(headers.contains_key(header::RETRY_AFTER));
    assert_eq!(ok["services"]["database"], "unhealthy");
    let (status, _, _) = api.send(get("/ok")).await;
    assert_eq!(status, StatusCode::OK, "not asked: the process answers");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn an_anonymous_readiness_probe_tells_no_database_error_and_asks_once_a_second(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ready = || {
        Request::get("/ready")
            .body(HttpBody::empty())
            .expect("request")
    };
    // The schema's record gone: the database does not serve this version.
    sqlx::query("alter table public._sqlx_migrations rename to _sqlx_migrations_away")
        .execute(&pool)
        .await
        .expect("rename");
    // The database is asked after this instant, so its answer stands until a second after it at
    // least.
    let asked = std::time::Instant::now();
    let (status, _, body) = api.send(ready()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        body,
        json!("database unavailable"),
        "no detail for whoever asks"
    );
    // Back as it was: the probes answered within that second take the answer already given
    // (however slowly a loaded machine sends them).
    sqlx::query("alter table public._sqlx_migrations_away rename to _sqlx_migrations")
        .execute(&pool)
        .await
        .expect("rename back");
    let mut within = 0;
    while within < 20 {
        let status = api.send(ready()).await.0;
        if asked.elapsed() >= std::time::Duration::from_secs(1) {
            break;
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        within += 1;
    }
    assert!(within > 0, "no probe was answered within the second");
    // The answer stands a second (the time is the point here, there is no signal to wait for).
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(api.send(ready()).await.0, StatusCode::OK);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn routes_need_a_valid_token(pool: PgPool) {
    let api = Api::new(pool).await;
    let anonymous = Request::post("/assistants/search")
        .header(header::CONTENT_TYPE, "application/json")
        .body(HttpBody::from("{}"))
        .expect("request");
    let (status, headers, body) = api.send(anonymous).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
    assert_eq!(
        body,
        json!({"detail": "missing bearer token or API key (x-api-key)"})
    );

    let forged = Request::get("/assistants/agent")
        .header(header::AUTHORIZATION, "Bearer not.a.token")
        .body(HttpBody::empty())
        .expect("request");
    assert_eq!(api.send(forged).await.0, StatusCode::UNAUTHORIZED);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn each_graph_is_one_assistant_with_the_official_servers_id(pool: PgPool) {
    let api = Api::new(pool).await;
    let (status, _, body) = api.send(api.post("/assistants/search", "{}")).await;
    assert_eq!(status, StatusCode::OK);
    // The id `langgraph dev` gives the graph `agent`.
    let id = "fe096781-5601-53d2-b2f6-0d3403f7e9ca";
    assert_eq!(body[0]["assistant_id"], id, "{body}");
    assert_eq!(body[0]["graph_id"], "agent");
    assert_eq!(body[0]["metadata"], json!({"created_by": "system"}));
    assert_eq!(body.as_array().map(Vec::len), Some(2), "one per graph");

    let filtered = api
        .send(api.post("/assistants/search", r#"{"graph_id": "other", "limit": 5}"#))
        .await;
    assert_eq!(filtered.2, json!([]));

    for path in [format!("/assistants/{id}"), "/assistants/agent".to_owned()] {
        let (status, _, body) = api.send(api.get(&path)).await;
        assert_eq!(
            (status, body["assistant_id"].clone()),
            (StatusCode::OK, json!(id)),
            "{path}"
        );
    }
    let (status, _, body) = api.send(api.get("/assistants/nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body["detail"].is_string());

    let (_, _, graph) = api.send(api.get("/assistants/agent/graph")).await;
    let nodes: Vec<&str> = graph["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|node| node["id"].as_str())
        .collect();
    assert_eq!(nodes, ["__start__", "model", "tools", "__end__"]);
    assert!(
        graph["edges"]
            .as_array()
            .expect("edges")
            .contains(&json!({"source": "__start__", "target": "model", "conditional": false}))
    );

    let (_, _, schemas) = api.send(api.get("/assistants/agent/schemas")).await;
    assert_eq!(schemas["graph_id"], "agent");
    assert!(
        schemas["state_schema"]["properties"]
            .get("messages")
            .is_some()
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn bad_bodies_get_clear_client_errors(pool: PgPool) {
    let api = Api::new(pool).await;
    let (status, _, body) = api.send(api.post("/assistants/search", "{not json")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body["detail"].is_string(), "{body}");

    let (status, _, _) = api
        .send(api.post("/assistants/search", r#"{"limit": "ten"}"#))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    let (status, _, _) = api
        .send(api.post("/assistants/search", r#"{"limit": 0}"#))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    let huge = format!(r#"{{"name": "{}"}}"#, "x".repeat(100 * 1024));
    let (status, _, _) = api.send(api.post("/assistants/search", huge)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    let (status, _, body) = api.send(api.get("/no/such/route")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body["detail"].is_string());
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_body_sent_slowly_is_cut_off_on_every_route(pool: PgPool) {
    use futures_util::StreamExt;
    let api = Api::with(
        pool,
        mostrador_api::ApiConfig {
            request_timeout: std::time::Duration::from_millis(300),
            ..crate::support::config()
        },
    )
    .await;
    let taking_a_body = mostrador_api::openapi::ROUTES
        .iter()
        .filter(|route| matches!(route.method, "post" | "put" | "patch"));
    let mut checked = 0;
    for route in taking_a_body {
        let path = route
            .path
            .replace("{assistant_id}", "agent")
            .replace("{thread_id}", "01a22000-0000-7000-8000-000000000000")
            .replace("{run_id}", "01a22000-0000-7000-8000-000000000001")
            .replace("{checkpoint_id}", "01a22000-0000-7000-8000-000000000002");
        // The body's first byte, and then nothing, for ever: a slow client.
        let slow = futures_util::stream::iter([Ok::<_, std::io::Error>(
            axum::body::Bytes::from_static(b"{"),
        )])
        .chain(futures_util::stream::pending());
        let request = Request::builder()
            .method(route.method.to_uppercase().as_str())
            .uri(&path)
            .header(header::AUTHORIZATION, format!("Bearer {}", api.token))
            .header(header::CONTENT_TYPE, "application/json")
            .body(HttpBody::from_stream(slow))
            .expect("request");
        let (status, _, body) =
            tokio::time::timeout(std::time::Duration::from_secs(5), api.send(request))
                .await
                .unwrap_or_else(|_| panic!("{} {path} waited for the body", route.method));
        assert_eq!(
            status,
            StatusCode::REQUEST_TIMEOUT,
            "{} {path}: {body}",
            route.method
        );
        checked += 1;
    }
    assert!(checked > 30, "every route that takes a body: {checked}");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn openapi_names_every_route_and_docs_are_served_offline(pool: PgPool) {
    let api = Api::new(pool).await;
    let (status, _, document) = api.send(api.request("GET", "/openapi.json", "", "")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(document["info"]["title"], "mostrador");
    for &mostrador_api::openapi::Route { method, path, .. } in mostrador_api::openapi::ROUTES {
        assert!(
            document["paths"][path][method].is_object(),
            "{method} {path} in the document"
        );
        let concrete = path
            .replace("{assistant_id}", "agent")
            .replace("{thread_id}", "01a22000-0000-7000-8000-000000000000")
            .replace("{run_id}", "01a22000-0000-7000-8000-000000000001")
            .replace("{checkpoint_id}", "01a22000-0000-7000-8000-000000000002");
        let (_, _, body) = api
            .send(api.request(&method.to_uppercase(), &concrete, "", ""))
            .await;
        assert_ne!(
            body,
            json!({"detail": "no such route"}),
            "{method} {path} is a route of the router"
        );
    }
    let (status, _, page) = api.send(api.request("GET", "/docs/", "", "")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.as_str().is_some_and(|html| html.contains("swagger")),
        "{page}"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn runner_graphs_are_described_by_what_a_worker_recorded(pool: PgPool) {
    let config = mostrador_api::app::ApiConfig {
        runner_graphs: vec!["py".into()],
        ..crate::support::config()
    };
    let api = Api::with(pool.clone(), config).await;
    let (status, headers, body) = api.send(api.get("/assistants/py/schemas")).await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "no worker has described it yet: {body}"
    );
    assert!(headers.contains_key(header::RETRY_AFTER));

    let schema = |title: &str| json!({"title": title, "type": "object"});
    // What the runner records of a graph (`describe.py`): its five schemas.
    let schemas_of = |title: &str| {
        json!({
            "input_schema": null, "output_schema": null, "state_schema": schema(title),
            "config_schema": {}, "context_schema": null,
        })
    };
    let drawing = |nodes: &[&str]| json!({"nodes": nodes.iter().map(|n| json!({"id": n})).collect::<Vec<_>>(), "edges": []});
    let description = json!({
        "schemas": schemas_of("py_state"),
        "graph": {
            "false": drawing(&["outer"]),
            "1": drawing(&["outer:inner"]),
            "true": drawing(&["outer:inner:leaf"]),
        },
        "subgraphs": {"outer": schemas_of("outer"), "outer|inner": schemas_of("inner")},
    });
    mostrador_queue::data::graphs::record(&pool, "py", &description)
        .await
        .expect("record");

    let (status, _, schemas) = api.send(api.get("/assistants/py/schemas")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(schemas["graph_id"], "py");
    assert_eq!(schemas["state_schema"], schema("py_state"));
    for (query, node) in [
        ("", "outer"),
        ("?xray=false", "outer"),
        ("?xray=1", "outer:inner"),
        ("?xray=2", "outer:inner:leaf"),
        ("?xray=true", "outer:inner:leaf"),
    ] {
        let (status, _, graph) = api
            .send(api.get(&format!("/assistants/py/graph{query}")))
            .await;
        assert_eq!(status, StatusCode::OK, "{query}");
        assert_eq!(graph["nodes"][0]["id"], node, "{query}");
    }
    for bad in ["0", "-1", "deep"] {
        let (status, _, _) = api
            .send(api.get(&format!("/assistants/py/graph?xray={bad}")))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "xray={bad}");
    }
    let (_, _, immediate) = api.send(api.get("/assistants/py/subgraphs")).await;
    assert_eq!(immediate, json!({"outer": schemas_of("outer")}));
    let (_, _, all) = api
        .send(api.get("/assistants/py/subgraphs?recurse=true"))
        .await;
    assert_eq!(all.as_object().map(|o| o.len()), Some(2));
    let (_, _, nested) = api
        .send(api.get("/assistants/py/subgraphs/outer%7Cinner?recurse=true"))
        .await;
    assert_eq!(nested, json!({"outer|inner": schemas_of("inner")}));
    let (_, _, rust) = api.send(api.get("/assistants/agent/subgraphs")).await;
    assert_eq!(rust, json!({}), "a Rust graph without subgraphs");

    let failed = json!({"error": "TypeError: the factory needs a config"});
    mostrador_queue::data::graphs::record(&pool, "py", &failed)
        .await
        .expect("record");
    let (status, _, body) = api.send(api.get("/assistants/py/graph")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("factory"))
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn browsers_on_allowed_origins_may_call_and_others_may_not(pool: PgPool) {
    use mostrador_api::cors::Cors;
    let preflight = |origin: &str| {
        Request::builder()
            .method("OPTIONS")
            .uri("/threads/search")
            .header(header::ORIGIN, origin)
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
            .header(
                header::ACCESS_CONTROL_REQUEST_HEADERS,
                "x-api-key,content-type",
            )
            .body(HttpBody::empty())
            .expect("request")
    };
    let allowed = |headers: &header::HeaderMap| {
        headers
            .get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
            .map(|value| value.to_str().expect("ascii").to_owned())
    };

    let closed = Api::new(pool.clone()).await;
    let (_, headers, _) = closed.send(preflight("http://localhost:3000")).await;
    assert_eq!(allowed(&headers), None, "no origin is allowed by default");

    let config = mostrador_api::app::ApiConfig {
        cors: Cors::parse("localhost, https://chat.example.com/"),
        ..crate::support::config()
    };
    let api = Api::with(pool, config).await;
    for origin in [
        "http://localhost:3000",
        "http://127.0.0.1:5173",
        "https://chat.example.com",
    ] {
        let (status, headers, _) = api.send(preflight(origin)).await;
        assert!(status.is_success(), "{origin}: {status}");
        assert_eq!(allowed(&headers).as_deref(), Some(origin));
        let asked = headers[header::ACCESS_CONTROL_ALLOW_HEADERS]
            .to_str()
            .expect("ascii");
        assert!(asked.contains("x-api-key"), "{asked}");
    }
    for origin in [
        "https://evil.example",
        "http://localhost.evil.example",
        "https://localhost:3000",
    ] {
        let (_, headers, _) = api.send(preflight(origin)).await;
        assert_eq!(allowed(&headers), None, "{origin}");
    }
    // The answer itself names the origin and lets the page read where to rejoin a stream.
    let mut request = api.post("/assistants/search", "{}");
    request.headers_mut().insert(
        header::ORIGIN,
        "http://localhost:3000".parse().expect("origin"),
    );
    let (status, headers, _) = api.send(request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(allowed(&headers).as_deref(), Some("http://localhost:3000"));
    let exposed = headers[header::ACCESS_CONTROL_EXPOSE_HEADERS]
        .to_str()
        .expect("ascii");
    assert!(exposed.contains("location"), "{exposed}");

    assert_eq!(Cors::parse(""), Cors::Off);
    assert_eq!(Cors::parse("*"), Cors::Any);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_bug_is_a_500_with_a_correlation_id_and_only_a_transient_failure_is_a_503(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let thread_id = crate::support::new_thread(&api, &api.token).await;
    let files = format!("/threads/{thread_id}/files");
    assert_eq!(api.send(api.get(&files)).await.0, StatusCode::OK);

    // A statement the schema does not answer (a table gone) is no reason to try again.
    sqlx::query("alter table mostrador.thread_files rename to thread_files_gone")
        .execute(&pool)
        .await
        .expect("rename");
    let (status, headers, body) = api.send(api.get(&files)).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert!(headers.get("retry-after").is_none());
    let id = body["correlation_id"].as_str().expect("a correlation id");
    assert!(
        body["detail"].as_str().is_some_and(|d| d.contains(id)),
        "{body}"
    );
    sqlx::query("alter table mostrador.thread_files_gone rename to thread_files")
        .execute(&pool)
        .await
        .expect("rename back");

    // The database gone is: a 503 with Retry-After, and no correlation id.
    api.state.pool().close().await;
    let (status, headers, body) = api.send(api.get(&files)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(headers.get("retry-after").is_some());
    assert!(body.get("correlation_id").is_none(), "{body}");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_made_up_method_does_not_become_a_metric_label_and_callers_do_not_read_metrics(
    pool: PgPool,
) {
    let api = Api::new(pool).await;
    for method in ["BREW", "PROPFIND", "GET"] {
        let request = Request::builder()
            .method(method)
            .uri("/ok")
            .body(HttpBody::empty())
            .expect("request");
        api.send(request).await;
    }
    let metrics = api.metrics().await;
    assert!(
        !metrics.contains("BREW") && !metrics.contains("PROPFIND"),
        "{metrics}"
    );
    assert!(metrics.contains(r#"method="other""#), "{metrics}");
    // Served apart, on the port Prometheus scrapes: not among the api's routes.
    let (status, _, _) = api.send(api.get("/metrics")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// `/metrics?format=json` is the official server's snapshot of the queue: pending (and how long
/// the due ones waited), running.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn metrics_as_json_show_the_queue_as_the_official_server_does(pool: PgPool) {
    use mostrador_queue::run::{self, NewRun};

    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&crate::support::caller("ana", "customer", None));
    for _ in 0..3 {
        let thread = crate::support::new_thread(&api, &ana).await;
        let thread_id = mostrador_queue::ThreadId(thread.parse().expect("uuid"));
        run::enqueue(&pool, &NewRun::new(thread_id, "agent"), None)
            .await
            .expect("enqueued");
    }
    let (status, body) = api.metrics_at("/metrics?format=json").await;
    assert_eq!(status, StatusCode::OK);
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let queue = &json["queue"];
    assert_eq!(queue["n_pending"], 3, "{json}");
    assert_eq!(queue["n_running"], 0, "{json}");
    assert!(
        queue["pending_runs_wait_time_max_secs"]
            .as_f64()
            .is_some_and(|s| s >= 0.0),
        "{json}"
    );
    assert!(
        queue["pending_runs_wait_time_med_secs"].is_number(),
        "{json}"
    );
    assert!(
        queue["pending_unblocked_runs_wait_time_max_secs"].is_number(),
        "{json}"
    );
    // Without it (or another format), Prometheus's text.
    assert!(api.metrics().await.contains("# EOF"));
}

/// The api served on a port of its own with `edge`'s limits; its address.
async fn served(pool: PgPool, edge: mostrador_api::serve::Edge) -> std::net::SocketAddr {
    let api = Api::new(pool).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let router = mostrador_api::router(api.state.clone(), &api.config);
    tokio::spawn(mostrador_api::serve(
        listener,
        router,
        edge,
        std::future::pending(),
    ));
    addr
}

/// What the server sends on `stream` within `wait` (empty: nothing, or closed).
async fn read_within(
    stream: &mut tokio::net::TcpStream,
    wait: std::time::Duration,
) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut buffer = vec![0; 4096];
    match tokio::time::timeout(wait, stream.read(&mut buffer)).await {
        Ok(Ok(n)) => Some(String::from_utf8_lossy(&buffer[..n]).into_owned()),
        Ok(Err(_)) => Some(String::new()),
        Err(_) => None,
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_client_slow_to_send_its_headers_is_let_go(pool: PgPool) {
    use tokio::io::AsyncWriteExt;
    let addr = served(
        pool,
        mostrador_api::serve::Edge {
            max_connections: 10,
            header_read_timeout: std::time::Duration::from_millis(300),
        },
    )
    .await;
    let mut slow = tokio::net::TcpStream::connect(addr).await.expect("connect");
    slow.write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    // Never finishes its headers: closed (an empty read, or a 408) well before 5 s.
    let answer = read_within(&mut slow, std::time::Duration::from_secs(5)).await;
    let answer = answer.expect("the server let the slow client go");
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn connections_past_the_cap_wait_until_one_closes(pool: PgPool) {
    use tokio::io::AsyncWriteExt;
    let addr = served(
        pool,
        mostrador_api::serve::Edge {
            max_connections: 2,
            header_read_timeout: std::time::Duration::from_secs(30),
        },
    )
    .await;
    let request = b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut first = tokio::net::TcpStream::connect(addr).await.expect("connect");
    first.write_all(request).await.expect("write");
    let answer = read_within(&mut first, std::time::Duration::from_secs(5)).await;
    assert!(answer.is_some_and(|a| a.starts_with("HTTP/1.1 200")));
    let _second = tokio::net::TcpStream::connect(addr).await.expect("connect");
    // Give the server the second connection: it holds the last slot, idle.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let mut third = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect (backlog)");
    third.write_all(request).await.expect("write");
    assert_eq!(
        read_within(&mut third, std::time::Duration::from_millis(500)).await,
        None,
        "past the cap, a connection is not served"
    );
    drop(first);
    let answer = read_within(&mut third, std::time::Duration::from_secs(5)).await;
    assert!(
        answer
            .as_deref()
            .is_some_and(|a| a.starts_with("HTTP/1.1 200")),
        "{answer:?}"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn route_groups_a_project_switches_off_answer_404_and_the_rest_serve(pool: PgPool) {
    use crate::support::{caller, config};
    use mostrador_api::ApiConfig;
    use mostrador_api::app::RouteGroups;

    let api = Api::with(
        pool,
        ApiConfig {
            disabled_routes: RouteGroups {
                runs: true,
                store: true,
                meta: true,
                ..RouteGroups::default()
            },
            ..config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let thread = crate::support::new_thread(&api, &ana).await;
    for (method, path, body, expected) in [
        (
            "POST",
            "/store/items/search".to_owned(),
            "{}",
            StatusCode::NOT_FOUND,
        ),
        (
            "POST",
            format!("/threads/{thread}/runs"),
            r#"{"assistant_id": "agent"}"#,
            StatusCode::NOT_FOUND,
        ),
        (
            "POST",
            "/runs/crons/search".to_owned(),
            "{}",
            StatusCode::NOT_FOUND,
        ),
        ("GET", "/openapi.json".to_owned(), "", StatusCode::NOT_FOUND),
        ("GET", "/info".to_owned(), "", StatusCode::NOT_FOUND),
        ("GET", format!("/threads/{thread}"), "", StatusCode::OK),
        (
            "POST",
            "/assistants/search".to_owned(),
            "{}",
            StatusCode::OK,
        ),
        ("GET", "/ok".to_owned(), "", StatusCode::OK),
    ] {
        let (status, _, answer) = api.send(api.request(method, &path, &ana, body)).await;
        assert_eq!(status, expected, "{method} {path}: {answer}");
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn under_a_mount_prefix_every_route_moves_and_the_health_checks_stay_at_the_root(
    pool: PgPool,
) {
    use crate::support::{caller, config};
    use mostrador_api::ApiConfig;

    let api = Api::with(
        pool,
        ApiConfig {
            mount_prefix: Some("/api/v1".into()),
            ..config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let (status, _, thread) = api
        .send(api.request("POST", "/api/v1/threads", &ana, "{}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{thread}");
    let id = thread["thread_id"].as_str().expect("id").to_owned();
    let (status, headers, run) = api
        .send(api.request(
            "POST",
            &format!("/api/v1/threads/{id}/runs"),
            &ana,
            r#"{"assistant_id": "agent"}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    // Below the prefix, as the client joins it to its base URL.
    assert!(
        headers[header::CONTENT_LOCATION]
            .to_str()
            .expect("ascii")
            .starts_with(&format!("/threads/{id}/runs/")),
        "{headers:?}"
    );
    for (path, expected) in [
        (format!("/threads/{id}"), StatusCode::NOT_FOUND),
        (format!("/api/v1/threads/{id}"), StatusCode::OK),
        ("/ok".to_owned(), StatusCode::OK),
        ("/ready".to_owned(), StatusCode::OK),
        ("/api/v1/ok".to_owned(), StatusCode::OK),
        ("/api/v1/openapi.json".to_owned(), StatusCode::OK),
        // The dashboard, which reads the api below the path it is served at.
        ("/api/v1".to_owned(), StatusCode::OK),
    ] {
        let (status, _, answer) = api.send(api.request("GET", &path, &ana, "")).await;
        assert_eq!(status, expected, "{path}: {answer}");
    }
}
