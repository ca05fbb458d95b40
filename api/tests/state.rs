//! Thread state over HTTP: latest, at a checkpoint, history, update; an empty thread's shape.

use axum::http::StatusCode;
use mostrador_graph::stream::discard;
use mostrador_graph::{RunControl, RunInput, RunOptions};
use mostrador_queue::PgCheckpointer;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::{Api, caller};

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn state_history_and_update_of_a_waiting_thread(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let marta = api.token_for(&caller("marta", "manager", Some("madrid-1")));

    let (_, _, empty) = api.send(api.request("POST", "/threads", &ana, "{}")).await;
    let empty_id = empty["thread_id"].as_str().expect("id");
    let (status, _, state) = api
        .send(api.request("GET", &format!("/threads/{empty_id}/state"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        state,
        json!({"values": {}, "next": [], "tasks": [], "metadata": null, "created_at": null,
               "checkpoint": null, "parent_checkpoint": null, "interrupts": [],
               "checkpoint_id": null, "parent_checkpoint_id": null})
    );

    let (_, _, thread) = api
        .send(api.request(
            "POST",
            "/threads",
            &ana,
            r#"{"metadata": {"graph_id": "approval"}}"#,
        ))
        .await;
    let id = thread["thread_id"].as_str().expect("id").to_owned();
    let graph = api.state.graph("approval").expect("graph").clone();
    graph
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

    let (_, _, state) = api
        .send(api.request("GET", &format!("/threads/{id}/state"), &ana, ""))
        .await;
    assert_eq!(state["next"], json!(["ask"]));
    assert_eq!(
        state["tasks"][0]["interrupts"][0]["value"],
        json!({"refund": 40})
    );
    assert_eq!(state["interrupts"][0]["value"], json!({"refund": 40}));
    assert_eq!(state["checkpoint"]["thread_id"], json!(id));

    let update = r#"{"values": {"decision": "approved"}, "as_node": "ask"}"#;
    let (status, _, _) = api
        .send(api.request("POST", &format!("/threads/{id}/state"), &ana, update))
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "changing a waiting thread is deciding"
    );
    let (status, _, updated) = api
        .send(api.request("POST", &format!("/threads/{id}/state"), &marta, update))
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    let (_, _, state) = api
        .send(api.request("GET", &format!("/threads/{id}/state"), &ana, ""))
        .await;
    assert_eq!(state["values"], json!({"decision": "approved"}));
    assert_eq!(
        state["checkpoint_id"],
        updated["checkpoint"]["checkpoint_id"]
    );
    assert_eq!(state["next"], json!([]));
    let (status, _, history) = api
        .send(api.request(
            "POST",
            &format!("/threads/{id}/history"),
            &ana,
            r#"{"limit": 10}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    let history = history.as_array().expect("list").clone();
    assert!(history.len() >= 2, "{history:?}");
    assert_eq!(
        history[0]["checkpoint_id"], updated["checkpoint_id"],
        "newest first"
    );
    let older = history[1]["checkpoint_id"].as_str().expect("id");
    let (status, _, at) = api
        .send(api.request("GET", &format!("/threads/{id}/state/{older}"), &ana, ""))
        .await;
    assert_eq!(
        (status, &at["checkpoint_id"]),
        (StatusCode::OK, &json!(older))
    );
    let before = format!(
        r#"{{"limit": 10, "before": {{"checkpoint_id": "{}"}}}}"#,
        state["checkpoint_id"].as_str().expect("id")
    );
    let (_, _, earlier) = api
        .send(api.request("POST", &format!("/threads/{id}/history"), &ana, &before))
        .await;
    assert_eq!(earlier.as_array().map(Vec::len), Some(history.len() - 1));

    // As the JS SDK and RemoteGraph read the same things.
    let (status, _, fetched) = api
        .send(api.request("GET", &format!("/threads/{id}/history?limit=10"), &ana, ""))
        .await;
    assert_eq!((status, &fetched), (StatusCode::OK, &json!(history)));
    let (_, _, fetched_earlier) = api
        .send(api.request(
            "GET",
            &format!(
                "/threads/{id}/history?limit=10&before={}",
                state["checkpoint_id"].as_str().expect("id")
            ),
            &ana,
            "",
        ))
        .await;
    assert_eq!(fetched_earlier, earlier);
    let at_checkpoint = |body: String| {
        api.send(api.request(
            "POST",
            &format!("/threads/{id}/state/checkpoint"),
            &ana,
            &body,
        ))
    };
    let (status, _, latest) = at_checkpoint(r#"{"checkpoint": {}}"#.into()).await;
    assert_eq!((status, &latest), (StatusCode::OK, &state));
    let (_, _, at_older) = at_checkpoint(format!(
        r#"{{"checkpoint": {{"checkpoint_id": "{older}", "checkpoint_ns": ""}}, "subgraphs": false}}"#
    ))
    .await;
    assert_eq!(at_older, at);

    for (method, path, body, expected) in [
        (
            "GET",
            format!("/threads/{id}/state/not-a-checkpoint"),
            "",
            StatusCode::NOT_FOUND,
        ),
        (
            "GET",
            format!("/threads/{id}/state/{}", Uuid::now_v7()),
            "",
            StatusCode::NOT_FOUND,
        ),
        (
            "POST",
            format!("/threads/{id}/history"),
            r#"{"before": "nope"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "POST",
            format!("/threads/{id}/state"),
            r#"{"values": {"nope": 1}}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "POST",
            format!("/threads/{id}/state"),
            r#"{"values": {}, "as_node": "nope"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "POST",
            format!("/threads/{empty_id}/state"),
            r#"{"values": {}}"#,
            // As officially: a thread that never ran has no graph whose reducers apply.
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (status, _, answer) = api.send(api.request(method, &path, &ana, body)).await;
        assert_eq!(status, expected, "{method} {path} {body}: {answer}");
        assert!(answer["detail"].is_string());
    }
    // Once the thread no longer waits, a manager who reads it does not change it.
    let (status, _, answer) = api
        .send(api.request(
            "POST",
            &format!("/threads/{id}/state"),
            &marta,
            r#"{"values": {}}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    let luis = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let (status, _, _) = api
        .send(api.request("GET", &format!("/threads/{id}/state"), &luis, ""))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let _: Value = state;
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn copy_is_the_callers_and_prune_touches_only_visible_threads(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let marta = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let luis = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let (_, _, thread) = api
        .send(api.request(
            "POST",
            "/threads",
            &ana,
            r#"{"metadata": {"graph_id": "approval"}}"#,
        ))
        .await;
    let id = thread["thread_id"].as_str().expect("id").to_owned();
    let graph = api.state.graph("approval").expect("graph").clone();
    graph
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

    // The manager copies ana's thread: the copy is the manager's, with the same state.
    let (status, _, copy) = api
        .send(api.request("POST", &format!("/threads/{id}/copy"), &marta, ""))
        .await;
    assert_eq!(status, StatusCode::OK, "{copy}");
    let copy_id = copy["thread_id"].as_str().expect("id").to_owned();
    assert_ne!(copy_id, id);
    let (_, _, copied) = api
        .send(api.request("GET", &format!("/threads/{copy_id}/state"), &marta, ""))
        .await;
    let (_, _, original) = api
        .send(api.request("GET", &format!("/threads/{id}/state"), &ana, ""))
        .await;
    assert_eq!(copied["values"], original["values"]);
    assert_eq!(copied["next"], json!(["ask"]));
    let (status, _, _) = api
        .send(api.request("GET", &format!("/threads/{copy_id}"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the copy is not ana's");
    let (status, _, _) = api
        .send(api.request("POST", &format!("/threads/{id}/copy"), &luis, ""))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Luis cannot prune ana's thread: it is passed over, as if unknown.
    let body = format!(r#"{{"thread_ids": ["{id}", "nope"]}}"#);
    let (status, _, pruned) = api
        .send(api.request("POST", "/threads/prune", &luis, &body))
        .await;
    assert_eq!(
        (status, pruned),
        (StatusCode::OK, json!({"pruned_count": 0}))
    );
    let keep = format!(r#"{{"thread_ids": ["{id}"], "strategy": "keep_latest"}}"#);
    let (_, _, pruned) = api
        .send(api.request("POST", "/threads/prune", &ana, &keep))
        .await;
    assert_eq!(pruned, json!({"pruned_count": 1}));
    let (_, _, history) = api
        .send(api.request("POST", &format!("/threads/{id}/history"), &ana, "{}"))
        .await;
    assert_eq!(
        history.as_array().map(Vec::len),
        Some(1),
        "only the latest checkpoint stays"
    );
    let (_, _, pruned) = api
        .send(api.request("POST", "/threads/prune", &ana, &body))
        .await;
    assert_eq!(pruned, json!({"pruned_count": 1}));
    let (status, _, _) = api
        .send(api.request("GET", &format!("/threads/{id}"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "deleted");
    let (status, _, _) = api
        .send(api.request(
            "POST",
            "/threads/prune",
            &ana,
            r#"{"thread_ids": [], "strategy": "shred"}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn history_filters_by_metadata_and_by_checkpoint_as_langgraph_lists(pool: PgPool) {
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
    let graph = api.state.graph("approval").expect("graph").clone();
    graph
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
    let history = |body: Value| {
        let request = api.request(
            "POST",
            &format!("/threads/{id}/history"),
            &ana,
            &body.to_string(),
        );
        async { api.send(request).await }
    };
    let (status, _, all) = history(json!({"limit": 100})).await;
    assert_eq!(status, StatusCode::OK, "{all}");
    let all = all.as_array().expect("a history").clone();
    let older = &all[0];
    let (_, _, found) = history(json!({"metadata": {"source": older["metadata"]["source"]}})).await;
    assert_eq!(found.as_array().map(Vec::len), Some(1), "{found}");
    assert_eq!(found[0]["checkpoint_id"], older["checkpoint_id"]);
    let (_, _, found) =
        history(json!({"checkpoint": {"checkpoint_id": older["checkpoint_id"], "thread_id": id}}))
            .await;
    assert_eq!(found.as_array().map(Vec::len), Some(1), "{found}");
    assert_eq!(found[0]["checkpoint_id"], older["checkpoint_id"]);
    for filter in [
        json!({"metadata": {"no such key": 1}}),
        json!({"metadata": {"source": "elsewhere"}}),
        json!({"checkpoint": {"checkpoint_id": Uuid::now_v7()}}),
    ] {
        let (_, _, none) = history(filter.clone()).await;
        assert_eq!(none, json!([]), "{filter}");
    }
    // The thread's config, as RemoteGraph sends it, is the whole history.
    let (_, _, whole) =
        history(json!({"limit": 100, "checkpoint": {"thread_id": id, "checkpoint_ns": ""}})).await;
    assert_eq!(whole.as_array().map(Vec::len), Some(all.len()));
    let (status, _, _) = history(json!({"checkpoint": {"checkpoint_ns": "child:1"}})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

/// An update of a Python graph's thread is queued as a run for a worker to apply: as any run of
/// its caller's, within their share of the queue and placed after the runs they already have
/// waiting (not ahead of everyone's), and withdrawn when its request ends without an answer.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn python_state_updates_take_the_callers_share_and_place(pool: PgPool) {
    let api = Api::with(
        pool.clone(),
        mostrador_api::ApiConfig {
            runner_graphs: vec!["py".into()],
            max_pending_per_caller: 3,
            request_timeout: std::time::Duration::from_millis(500),
            ..crate::support::config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let new_py_thread = || async {
        let thread = crate::support::new_thread(&api, &ana).await;
        sqlx::query("update mostrador.threads set graph_id = 'py' where thread_id = $1::uuid")
            .bind(&thread)
            .execute(&pool)
            .await
            .expect("bound");
        thread
    };
    let pending = || async {
        sqlx::query_as::<_, (i32, Value)>(
            "select priority, coalesce(command, 'null') from mostrador.runs \
             where status = 'pending' order by created_at",
        )
        .fetch_all(&pool)
        .await
        .expect("runs")
    };
    let update = |thread: &str| {
        api.request(
            "POST",
            &format!("/threads/{thread}/state"),
            &ana,
            r#"{"values": {"note": "x"}}"#,
        )
    };
    // Two runs of Ana's wait.
    for _ in 0..2 {
        let thread = new_py_thread().await;
        let (status, _, run) = api
            .send(api.request(
                "POST",
                &format!("/threads/{thread}/runs"),
                &ana,
                r#"{"assistant_id": "py"}"#,
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{run}");
    }
    let queued = pending().await;
    // Her update waits behind them, as her third run: no worker applies it here, and her request
    // ends at its timeout.
    let thread = new_py_thread().await;
    let (status, _, answer) = api.send(update(&thread)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    // Withdrawn once its request ended (a task of the api's does it).
    let withdrawn = || async {
        let mut left = pending().await;
        for _ in 0..100 {
            if left.len() == queued.len() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            left = pending().await;
        }
        assert_eq!(
            left, queued,
            "the update its caller stopped waiting for is withdrawn"
        );
    };
    withdrawn().await;

    // Queued, it had the priority of her third run, after her two waiting ones.
    let spy = tokio::spawn({
        let pool = pool.clone();
        async move {
            loop {
                let found: Option<i32> = sqlx::query_scalar(
                    "select priority from mostrador.runs where command ? 'update_state'",
                )
                .fetch_optional(&pool)
                .await
                .expect("runs");
                if let Some(priority) = found {
                    return priority;
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
    });
    api.send(update(&thread)).await;
    let priority = spy.await.expect("spy");
    withdrawn().await;
    assert!(
        queued.iter().all(|(waiting, _)| priority > *waiting),
        "placed after her waiting runs: {priority} after {queued:?}"
    );

    // Past her share, an update is refused like a run, and nothing is queued.
    let thread = new_py_thread().await;
    let (status, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread}/runs"),
            &ana,
            r#"{"assistant_id": "py"}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let full = pending().await;
    let thread = new_py_thread().await;
    let (status, _, answer) = api.send(update(&thread)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{answer}");
    assert_eq!(pending().await, full, "nothing more was queued");
}
