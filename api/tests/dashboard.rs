//! The dashboard's routes: the page (and its development token), the queue for managers, and
//! recent runs under the one visibility rule.

use std::time::Duration;

use axum::http::{StatusCode, header};
use mostrador_api::ApiConfig;
use mostrador_queue::{WorkerLease, claim};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{Api, caller, config};

async fn run_on_new_thread(api: &Api, token: &str, graph: &str) -> (String, String) {
    let (status, _, thread) = api.send(api.request("POST", "/threads", token, "{}")).await;
    assert_eq!(status, StatusCode::OK, "{thread}");
    let thread_id = thread["thread_id"].as_str().expect("id").to_owned();
    let body = json!({"assistant_id": graph, "input": {}}).to_string();
    let (status, _, run) = api
        .send(api.request("POST", &format!("/threads/{thread_id}/runs"), token, &body))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    (
        thread_id,
        run["run_id"].as_str().expect("run id").to_owned(),
    )
}

fn run_ids(runs: &Value) -> Vec<&str> {
    runs.as_array()
        .expect("a list")
        .iter()
        .map(|run| run["run_id"].as_str().expect("run id"))
        .collect()
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn dashboard_page_is_served_and_fills_in_only_a_configured_token(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let (status, headers, page) = api.send(api.request("GET", "/dashboard", "", "")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    let page = page.as_str().expect("html");
    assert!(page.contains(r#"<meta name="mostrador-dev-token" content="">"#));

    let dev = Api::with(
        pool,
        ApiConfig {
            dashboard_token: Some("eyJh.eyJz.c2ln".into()),
            ..config()
        },
    )
    .await;
    let to = |host: &str| {
        let mut request = dev.request("GET", "/dashboard", "", "");
        request
            .headers_mut()
            .insert(header::HOST, host.parse().expect("host"));
        let answered = dev.send(request);
        async { answered.await.2.as_str().expect("html").to_owned() }
    };
    let filled = r#"<meta name="mostrador-dev-token" content="eyJh.eyJz.c2ln">"#;
    for host in ["localhost:8123", "127.0.0.1:8123", "[::1]:8123"] {
        assert!(to(host).await.contains(filled), "{host}");
    }
    // A page of another site that its DNS points here (DNS rebinding) never reads the token.
    for host in [
        "evil.example",
        "evil.example:8123",
        "localhost.evil.example",
    ] {
        let page = to(host).await;
        assert!(!page.contains("eyJh.eyJz.c2ln"), "{host}");
        assert!(page.contains(r#"<meta name="mostrador-dev-token" content="">"#));
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn queue_shows_depth_and_runs_in_flight_per_worker_to_managers_only(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    for _ in 0..3 {
        run_on_new_thread(&api, &ana, "agent").await;
    }
    run_on_new_thread(&api, &ana, "approval").await;
    let worker = WorkerLease::new("pod-a", vec!["agent".into()], Duration::from_secs(60));
    worker.register(&pool).await.expect("register");
    let held = claim(&pool, worker.worker_id, &worker.graphs, 2)
        .await
        .expect("claim");
    assert_eq!(held.len(), 2);
    let idle = WorkerLease::new("pod-b", vec!["approval".into()], Duration::from_secs(60));
    idle.register(&pool).await.expect("register");
    let gone = WorkerLease::new("pod-gone", vec!["agent".into()], Duration::from_secs(60));
    gone.register(&pool).await.expect("register");
    sqlx::query("update mostrador.workers set expires_at = now() - interval '1 second' where worker_id = $1")
        .bind(gone.worker_id.0)
        .execute(&pool)
        .await
        .expect("expire");

    let (status, _, body) = api.send(api.request("GET", "/queue", &ana, "")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    let marta = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let (status, _, queue) = api.send(api.request("GET", "/queue", &marta, "")).await;
    assert_eq!(status, StatusCode::OK, "{queue}");
    let mut depth: Vec<(String, String, i64)> = queue["depth"]
        .as_array()
        .expect("depth")
        .iter()
        .map(|row| {
            (
                row["graph_id"].as_str().expect("graph").to_owned(),
                row["status"].as_str().expect("status").to_owned(),
                row["runs"].as_i64().expect("runs"),
            )
        })
        .collect();
    depth.sort();
    assert_eq!(
        depth,
        [
            ("agent".into(), "pending".into(), 1),
            ("agent".into(), "running".into(), 2),
            ("approval".into(), "pending".into(), 1),
        ]
    );
    let workers: Vec<(&str, i64)> = queue["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .map(|w| {
            (
                w["name"].as_str().expect("name"),
                w["running"].as_i64().expect("n"),
            )
        })
        .collect();
    assert_eq!(
        workers,
        [("pod-a", 2), ("pod-b", 0)],
        "an expired worker is not live"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn recent_runs_are_those_of_visible_threads_newest_first(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let luis = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let jordi = api.token_for(&caller("jordi", "manager", Some("barcelona-1")));
    let marta = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let (_, first) = run_on_new_thread(&api, &ana, "agent").await;
    let (_, second) = run_on_new_thread(&api, &ana, "approval").await;
    let (_, theirs) = run_on_new_thread(&api, &luis, "agent").await;

    let (status, _, runs) = api.send(api.request("GET", "/runs/recent", &ana, "")).await;
    assert_eq!(status, StatusCode::OK, "{runs}");
    assert_eq!(run_ids(&runs), [second.as_str(), first.as_str()]);
    assert_eq!(runs[0]["graph_id"], "approval");
    assert_eq!(runs[0]["attempt"], 0);

    let (_, _, runs) = api
        .send(api.request("GET", "/runs/recent?limit=1", &ana, ""))
        .await;
    assert_eq!(run_ids(&runs), [second.as_str()]);
    let (_, _, runs) = api
        .send(api.request("GET", "/runs/recent?status=success", &ana, ""))
        .await;
    assert_eq!(runs, json!([]));

    // A manager sees the store's threads; another store's manager sees none of them.
    let (_, _, runs) = api
        .send(api.request("GET", "/runs/recent", &marta, ""))
        .await;
    assert_eq!(
        run_ids(&runs),
        [theirs.as_str(), second.as_str(), first.as_str()]
    );
    let (_, _, runs) = api
        .send(api.request("GET", "/runs/recent", &jordi, ""))
        .await;
    assert_eq!(runs, json!([]));

    for bad in [
        "limit=0",
        "limit=1001",
        "limit=x",
        "status=done",
        "colour=red",
    ] {
        let (status, _, body) = api
            .send(api.request("GET", &format!("/runs/recent?{bad}"), &ana, ""))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
    }
    let (status, _, _) = api.send(api.request("GET", "/runs/recent", "", "")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
