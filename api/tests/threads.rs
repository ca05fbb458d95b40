//! Threads over HTTP: server-chosen ids, one visibility rule on every route, search that shows
//! only visible threads, delete.

use axum::http::StatusCode;
use mostrador_queue::run::{self, NewRun};
use mostrador_queue::{RunStatus, ThreadId};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::{Api, caller, new_thread};

async fn create(api: &Api, token: &str, body: &str) -> Value {
    let (status, _, thread) = api.send(api.request("POST", "/threads", token, body)).await;
    assert_eq!(status, StatusCode::OK, "{thread}");
    thread
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn threads_are_created_with_their_owner_and_bad_bodies_change_nothing(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let thread = create(&api, &ana, "{}").await;
    assert!(Uuid::parse_str(thread["thread_id"].as_str().expect("id")).is_ok());
    assert_eq!(thread["status"], "idle");
    assert_eq!(thread["values"], Value::Null);
    assert_eq!(thread["metadata"], json!({}));

    let bound = create(
        &api,
        &ana,
        r#"{"metadata": {"graph_id": "agent", "topic": "refund"}}"#,
    )
    .await;
    assert_eq!(
        bound["metadata"],
        json!({"graph_id": "agent", "topic": "refund"})
    );

    for (body, expected) in [
        (
            r#"{"thread_id": "not-a-uuid"}"#.to_owned(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"ttl": {"ttl": -5}}"#.to_owned(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"metadata": {"graph_id": 7}}"#.to_owned(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"metadata": {"graph_id": "nope"}}"#.to_owned(),
            StatusCode::NOT_FOUND,
        ),
        (
            r#"{"metadata": []}"#.to_owned(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        ("[".to_owned(), StatusCode::UNPROCESSABLE_ENTITY),
        (
            r#"{"metadata": {}, "colour": "red"}"#.to_owned(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let (status, _, body_out) = api.send(api.request("POST", "/threads", &ana, &body)).await;
        assert_eq!(status, expected, "{body} -> {body_out}");
        assert!(body_out["detail"].is_string());
    }
    let count: i64 = sqlx::query_scalar("select count(*) from mostrador.threads")
        .fetch_one(api.state.pool())
        .await
        .expect("count");
    assert_eq!(count, 2, "refused creates wrote nothing");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn foreign_thread_is_404_on_every_route(pool: PgPool) {
    let api = Api::new(pool).await;
    let owner = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let thread = create(&api, &owner, "{}").await;
    let id = thread["thread_id"].as_str().expect("id").to_owned();

    let neighbour = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let clerk = api.token_for(&caller("pepe", "clerk", Some("madrid-1")));
    let manager = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let other_manager = api.token_for(&caller("eva", "manager", Some("sevilla-2")));
    let nonexistent = Uuid::now_v7().to_string();

    let not_found = api
        .send(api.request("GET", &format!("/threads/{nonexistent}"), &owner, ""))
        .await
        .2;
    for (token, path, expected) in [
        (&owner, id.clone(), StatusCode::OK),
        (&manager, id.clone(), StatusCode::OK),
        (&neighbour, id.clone(), StatusCode::NOT_FOUND),
        (&clerk, id.clone(), StatusCode::NOT_FOUND),
        (&other_manager, id.clone(), StatusCode::NOT_FOUND),
        (&owner, "not-a-uuid".to_owned(), StatusCode::NOT_FOUND),
        (&owner, nonexistent.clone(), StatusCode::NOT_FOUND),
    ] {
        let (status, _, body) = api
            .send(api.request("GET", &format!("/threads/{path}"), token, ""))
            .await;
        assert_eq!(status, expected, "{path}: {body}");
        if expected == StatusCode::NOT_FOUND {
            assert_eq!(
                body, not_found,
                "no body tells a foreign thread from a missing one"
            );
        }
    }
    for (token, expected) in [
        (&neighbour, StatusCode::NOT_FOUND),
        (&other_manager, StatusCode::NOT_FOUND),
        (&String::new(), StatusCode::UNAUTHORIZED),
    ] {
        let (status, _, _) = api
            .send(api.request("DELETE", &format!("/threads/{id}"), token, ""))
            .await;
        assert_eq!(status, expected);
    }
    let (status, _, _) = api
        .send(api.request("GET", &format!("/threads/{id}"), &owner, ""))
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the refused deletes changed nothing"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn search_shows_only_visible_threads(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let luis = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let marta = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let eva = api.token_for(&caller("eva", "manager", Some("sevilla-2")));
    let first = create(&api, &ana, r#"{"metadata": {"topic": "refund"}}"#).await;
    create(&api, &ana, r#"{"metadata": {"graph_id": "agent"}}"#).await;
    create(&api, &luis, "{}").await;

    let ids = |body: &Value| -> Vec<String> {
        body.as_array()
            .expect("a list")
            .iter()
            .map(|t| t["thread_id"].as_str().expect("id").to_owned())
            .collect()
    };
    let search = |token: &str, body: &str| {
        let request = api.request("POST", "/threads/search", token, body);
        async { api.send(request).await }
    };
    assert_eq!(ids(&search(&ana, "{}").await.2).len(), 2);
    assert_eq!(ids(&search(&luis, "{}").await.2).len(), 1);
    assert_eq!(
        ids(&search(&marta, "{}").await.2).len(),
        3,
        "the store's manager sees all"
    );
    assert_eq!(ids(&search(&eva, "{}").await.2).len(), 0);

    let refunds = search(&ana, r#"{"metadata": {"topic": "refund"}}"#).await.2;
    assert_eq!(ids(&refunds), [first["thread_id"].as_str().expect("id")]);
    let one = search(&ana, r#"{"limit": 1}"#).await.2;
    assert_eq!(ids(&one).len(), 1);

    // Busy is derived from the thread's runs.
    let thread_id =
        ThreadId(Uuid::parse_str(first["thread_id"].as_str().expect("id")).expect("uuid"));
    run::enqueue(api.state.pool(), &NewRun::new(thread_id, "agent"), None)
        .await
        .expect("enqueue");
    let busy = search(&ana, r#"{"status": "busy"}"#).await.2;
    assert_eq!(ids(&busy), [first["thread_id"].as_str().expect("id")]);

    for bad in [
        r#"{"status": "sleeping"}"#,
        r#"{"limit": 0}"#,
        r#"{"ids": ["nope"]}"#,
        r#"{"values": ["a"]}"#,
        r#"{"sort_by": "colour"}"#,
        r#"{"sort_order": "sideways"}"#,
        r#"{"select": ["thread_id", "secrets"]}"#,
    ] {
        let (status, _, body) = search(&ana, bad).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn searches_sort_select_and_count_as_the_official_server_does(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let luis = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let mut created = Vec::new();
    for _ in 0..3 {
        created.push(create(&api, &ana, "{}").await["thread_id"].clone());
    }
    create(&api, &luis, "{}").await;
    let search = |body: &str| {
        let request = api.request("POST", "/threads/search", &ana, body);
        async { api.send(request).await.2 }
    };
    let ids = |body: Value| -> Vec<Value> {
        body.as_array()
            .expect("a list")
            .iter()
            .map(|t| t["thread_id"].clone())
            .collect()
    };
    let newest_first: Vec<Value> = created.iter().rev().cloned().collect();
    assert_eq!(ids(search("{}").await), newest_first);
    assert_eq!(
        ids(search(r#"{"sort_by": "created_at", "sort_order": "asc"}"#).await),
        created
    );
    let mut by_id = created.clone();
    by_id.sort_by_key(|id| id.as_str().expect("id").to_owned());
    assert_eq!(
        ids(search(r#"{"sort_by": "thread_id", "sort_order": "asc"}"#).await),
        by_id
    );

    let selected = search(r#"{"select": ["thread_id", "status"], "limit": 1}"#).await;
    assert_eq!(
        selected[0]
            .as_object()
            .map(|fields| fields.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["status".to_owned(), "thread_id".to_owned()])
    );

    let count = |body: &'static str| {
        let request = api.request("POST", "/threads/count", &ana, body);
        async { api.send(request).await }
    };
    assert_eq!(count("{}").await.2, json!(3), "only the caller's threads");
    assert_eq!(count(r#"{"status": "busy"}"#).await.2, json!(0));

    // A run binds the thread, and its metadata then names the graph and the assistant, so a
    // sidebar that lists a graph's threads finds it.
    let thread = created[0].as_str().expect("id");
    let (status, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread}/runs"),
            &ana,
            r#"{"assistant_id": "agent", "input": {}}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let by_graph = search(&format!(
        r#"{{"metadata": {{"graph_id": "agent", "assistant_id": "{}"}}}}"#,
        run["assistant_id"].as_str().expect("assistant id")
    ))
    .await;
    assert_eq!(ids(by_graph), [created[0].clone()]);
    assert_eq!(
        count(r#"{"metadata": {"graph_id": "agent"}}"#).await.2,
        json!(1)
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn deleted_thread_is_gone_with_its_pending_runs(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = create(&api, &ana, r#"{"metadata": {"graph_id": "agent"}}"#).await;
    let id = thread["thread_id"].as_str().expect("id").to_owned();
    let thread_id = ThreadId(Uuid::parse_str(&id).expect("uuid"));
    let run = run::enqueue(api.state.pool(), &NewRun::new(thread_id, "agent"), None)
        .await
        .expect("enqueue")
        .run;
    assert_eq!(run.status, RunStatus::Pending);

    let (status, _, _) = api
        .send(api.request("DELETE", &format!("/threads/{id}"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = api
        .send(api.request("GET", &format!("/threads/{id}"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = api
        .send(api.request("DELETE", &format!("/threads/{id}"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "deleting twice");
    let runs: i64 = sqlx::query_scalar("select count(*) from mostrador.runs")
        .fetch_one(api.state.pool())
        .await
        .expect("count");
    assert_eq!(runs, 0, "its pending run went with it");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn thread_metadata_is_merged_by_patch(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = create(
        &api,
        &ana,
        r#"{"metadata": {"topic": "refund", "order": 7}}"#,
    )
    .await;
    let path = format!("/threads/{}", thread["thread_id"].as_str().expect("id"));
    let (status, _, patched) = api
        .send(api.request(
            "PATCH",
            &path,
            &ana,
            r#"{"metadata": {"order": 8, "urgent": true}}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(
        patched["metadata"],
        json!({"topic": "refund", "order": 8, "urgent": true})
    );

    let mut minimal = api.request("PATCH", &path, &ana, r#"{"metadata": {"seen": 1}}"#);
    minimal
        .headers_mut()
        .insert("prefer", "return=minimal".parse().expect("header"));
    assert_eq!(api.send(minimal).await.0, StatusCode::NO_CONTENT);

    for body in [
        r#"{}"#,
        r#"{"metadata": {"graph_id": "agent"}}"#,
        r#"{"metadata": {}, "ttl": "soon"}"#,
    ] {
        let (status, _, _) = api.send(api.request("PATCH", &path, &ana, body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    }
    let luis = api.token_for(&caller("luis", "customer", None));
    let (status, _, _) = api
        .send(api.request("PATCH", &path, &luis, r#"{"metadata": {"mine": true}}"#))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, _, now) = api.send(api.request("GET", &path, &ana, "")).await;
    assert_eq!(
        now["metadata"],
        json!({"topic": "refund", "order": 8, "urgent": true, "seen": 1})
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_client_chosen_thread_id_belongs_to_its_creator_and_is_never_taken_over(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let bea = api.token_for(&caller("bea", "customer", Some("madrid-1")));
    let id = Uuid::new_v4();
    let body = |if_exists: &str| format!(r#"{{"thread_id": "{id}", "if_exists": "{if_exists}"}}"#);

    let (status, _, thread) = api
        .send(api.request("POST", "/threads", &ana, &body("raise")))
        .await;
    assert_eq!(status, StatusCode::OK, "{thread}");
    assert_eq!(thread["thread_id"], id.to_string());
    let (status, _, _) = api
        .send(api.request("GET", &format!("/threads/{id}"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::OK, "the creator owns it");

    let (status, _, again) = api
        .send(api.request("POST", "/threads", &ana, &body("raise")))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    let (status, _, same) = api
        .send(api.request("POST", "/threads", &ana, &body("do_nothing")))
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "do_nothing answers the caller's own thread"
    );
    assert_eq!(same["thread_id"], id.to_string());

    // Someone else's id: the same conflict whichever way it is asked, and no way in.
    for if_exists in ["raise", "do_nothing"] {
        let (status, _, taken) = api
            .send(api.request("POST", "/threads", &bea, &body(if_exists)))
            .await;
        assert_eq!(
            (status, &taken),
            (StatusCode::CONFLICT, &again),
            "{if_exists}"
        );
    }
    let run = r#"{"assistant_id": "agent", "input": {}, "if_not_exists": "create"}"#;
    let (status, _, _) = api
        .send(api.request("POST", &format!("/threads/{id}/runs"), &bea, run))
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a run cannot take it over either"
    );
    let (status, _, _) = api
        .send(api.request("GET", &format!("/threads/{id}"), &bea, ""))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_run_with_if_not_exists_create_makes_the_callers_thread_or_nothing(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let id = Uuid::new_v4();
    let path = format!("/threads/{id}/runs");

    let (status, _, _) = api
        .send(api.request(
            "POST",
            &path,
            &ana,
            r#"{"assistant_id": "agent", "input": {}}"#,
        ))
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "without if_not_exists a missing thread stays missing"
    );
    let bad = r#"{"assistant_id": "agent", "input": {}, "if_not_exists": "create", "multitask_strategy": "sometimes"}"#;
    let (status, _, _) = api.send(api.request("POST", &path, &ana, bad)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _, _) = api
        .send(api.request("GET", &format!("/threads/{id}"), &ana, ""))
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a refused run leaves no thread"
    );

    let good = r#"{"assistant_id": "agent", "input": {}, "if_not_exists": "create"}"#;
    let (status, _, run) = api.send(api.request("POST", &path, &ana, good)).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["thread_id"], id.to_string());
    let (status, _, thread) = api
        .send(api.request("GET", &format!("/threads/{id}"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(thread["metadata"]["graph_id"], "agent");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn metadata_is_bounded_when_created_and_when_merged(pool: PgPool) {
    // A body limit above the metadata's, so that the bound answering is the metadata's.
    let api = Api::with(
        pool,
        mostrador_api::ApiConfig {
            body_limit: 1024 * 1024,
            ..crate::support::config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let big =
        |key: &str, kib: usize| json!({"metadata": {key: "x".repeat(kib * 1024)}}).to_string();
    let (status, _, _) = api
        .send(api.request("POST", "/threads", &ana, &big("a", 70)))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "over 64 KiB");
    let (status, _, thread) = api
        .send(api.request("POST", "/threads", &ana, &big("a", 40)))
        .await;
    assert_eq!(status, StatusCode::OK);
    let path = format!("/threads/{}", thread["thread_id"].as_str().expect("an id"));
    let (status, _, _) = api
        .send(api.request("PATCH", &path, &ana, &big("b", 40)))
        .await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "two small updates do not make a big one"
    );
    let (_, _, kept) = api.send(api.request("GET", &path, &ana, "")).await;
    assert!(
        kept["metadata"].get("b").is_none(),
        "the refused update changed nothing"
    );
    let run = json!({"assistant_id": "agent", "metadata": {"a": "x".repeat(70 * 1024)}});
    let (status, _, _) = api
        .send(api.request("POST", "/runs", &ana, &run.to_string()))
        .await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a run's metadata too"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_threads_files_are_its_owners_alone(pool: PgPool) {
    let api = Api::new(pool).await;
    let thread_id = new_thread(&api, &api.token).await;
    let list = format!("/threads/{thread_id}/files");
    let read = format!("/threads/{thread_id}/files/content?path=/a.txt");
    let (status, _, body) = api.send(api.get(&list)).await;
    assert_eq!((status, body), (StatusCode::OK, json!([])));
    let (status, _, _) = api.send(api.get(&read)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = api
        .send(api.get(&format!("/threads/{thread_id}/files?path=a")))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    // A manager of the thread's store reads the thread, not its files; another customer neither.
    let manager = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let (status, _, _) = api
        .send(api.request("GET", &format!("/threads/{thread_id}"), &manager, ""))
        .await;
    assert_eq!(status, StatusCode::OK);
    let luis = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    for token in [&manager, &luis] {
        for path in [&list, &read] {
            let (status, _, body) = api.send(api.request("GET", path, token, "")).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
            assert_eq!(body["detail"], "Thread not found", "{path}");
        }
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_page_of_threads_past_its_byte_cap_is_a_413_never_a_short_page(pool: PgPool) {
    let api = Api::with(
        pool,
        mostrador_api::ApiConfig {
            max_page_bytes: 4096,
            ..crate::support::config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let big = json!({"metadata": {"notes": "x".repeat(1500)}}).to_string();
    for _ in 0..3 {
        create(&api, &ana, &big).await;
    }
    let search = |body: &'static str| {
        let request = api.request("POST", "/threads/search", &ana, body);
        async { api.send(request).await }
    };
    let (status, _, answer) = search("{}").await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
    assert!(
        answer["detail"]
            .as_str()
            .is_some_and(|d| d.contains("4096")),
        "{answer}"
    );
    let (status, _, page) = search(r#"{"limit": 2}"#).await;
    assert_eq!(status, StatusCode::OK, "a smaller page fits");
    assert_eq!(page.as_array().map(Vec::len), Some(2));
    let (status, _, page) = search(r#"{"select": ["thread_id", "status"]}"#).await;
    assert_eq!(status, StatusCode::OK, "so do fewer fields");
    assert_eq!(page.as_array().map(Vec::len), Some(3));
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_search_extracts_paths_and_pages_with_the_official_headers(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    for title in ["first", "second", "third"] {
        create(
            &api,
            &ana,
            &json!({"metadata": {"title": title, "tags": ["a", title]}}).to_string(),
        )
        .await;
    }
    let search = |body: Value| {
        let request = api.request("POST", "/threads/search", &ana, &body.to_string());
        async { api.send(request).await }
    };
    let (status, headers, page) = search(json!({
        "limit": 2, "sort_order": "asc", "select": ["thread_id"],
        "extract": {"title": "metadata.title", "last_tag": "metadata.tags[-1]", "none": "values.x[3]"}
    }))
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(
        page.as_array().expect("a page")[0]["extracted"],
        json!({"title": "first", "last_tag": "first", "none": null})
    );
    assert!(page[0].get("metadata").is_none(), "selected away");
    assert_eq!(headers["x-pagination-total"], "3");
    assert_eq!(headers["x-pagination-next"], "2");
    let (_, headers, page) = search(json!({"limit": 2, "offset": 2})).await;
    assert_eq!(page.as_array().map(Vec::len), Some(1));
    assert_eq!(headers["x-pagination-total"], "3");
    assert!(headers.get("x-pagination-next").is_none());
    for extract in [
        json!({"thread_id": "metadata.title"}),
        json!({"bad-alias": "metadata.title"}),
        json!({"x": "owner"}),
        json!({"x": ""}),
    ] {
        let (status, _, _) = search(json!({"extract": extract})).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{extract}");
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_thread_takes_a_time_to_live_as_the_sdks_send_it_or_the_projects_default(pool: PgPool) {
    use mostrador_api::ApiConfig;
    use mostrador_queue::thread::Ttl;

    let api = Api::with(
        pool.clone(),
        ApiConfig {
            default_thread_ttl: Some(Ttl {
                minutes: 43_200.0,
                keep_latest: true,
            }),
            ..crate::support::config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let ttl_of = |id: String| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, (Option<f64>, String)>(
                "select ttl_minutes, ttl_strategy from mostrador.threads where thread_id = $1::uuid",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("thread")
        }
    };
    for (body, expected) in [
        (
            json!({"ttl": {"ttl": 30, "strategy": "delete"}}),
            (Some(30.0), "delete"),
        ),
        (json!({"ttl": {"ttl": 0.5}}), (Some(0.5), "delete")),
        (json!({"ttl": 90}), (Some(90.0), "delete")),
        (json!({}), (Some(43_200.0), "keep_latest")),
        (json!({"ttl": null}), (Some(43_200.0), "keep_latest")),
    ] {
        let thread = create(&api, &ana, &body.to_string()).await;
        let id = thread["thread_id"].as_str().expect("id").to_owned();
        let (minutes, strategy) = ttl_of(id).await;
        assert_eq!((minutes, strategy.as_str()), expected, "{body}");
    }
    for ttl in [
        json!(0),
        json!(-5),
        json!("soon"),
        json!({"ttl": 5, "strategy": "forget"}),
    ] {
        let (status, _, _) = api
            .send(api.request("POST", "/threads", &ana, &json!({"ttl": ttl}).to_string()))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{ttl}");
    }
    // Changed by an update.
    let thread = new_thread(&api, &ana).await;
    let patch = |body: Value| {
        let request = api.request(
            "PATCH",
            &format!("/threads/{thread}"),
            &ana,
            &body.to_string(),
        );
        async { api.send(request).await.0 }
    };
    assert_eq!(
        patch(json!({"ttl": {"ttl": 5, "strategy": "keep_latest"}})).await,
        StatusCode::OK
    );
    assert_eq!(
        ttl_of(thread.clone()).await,
        (Some(5.0), "keep_latest".to_owned())
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_copy_of_a_thread_takes_its_files_only_for_its_writer(pool: PgPool) {
    let api = Api::new(pool).await;
    let thread_id = new_thread(&api, &api.token).await;
    sqlx::query(
        "insert into mostrador.thread_files (thread_id, path, content, is_binary) \
         values ($1::uuid, '/memories/iban.txt', 'ES91 2100', false)",
    )
    .bind(&thread_id)
    .execute(api.state.pool())
    .await
    .expect("a file of ana's");
    let files_of = |token: &str, thread: &str| {
        let request = api.request("GET", &format!("/threads/{thread}/files"), token, "");
        async { api.send(request).await.2 }
    };
    let copy_as = |token: &str| {
        let request = api.request("POST", &format!("/threads/{thread_id}/copy"), token, "");
        async {
            let (status, _, copy) = api.send(request).await;
            assert_eq!(status, StatusCode::OK, "{copy}");
            copy["thread_id"].as_str().expect("id").to_owned()
        }
    };
    // A manager of the thread's store reads it and may copy it: the copy is hers, without files.
    let manager = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let copied = copy_as(&manager).await;
    assert_eq!(
        files_of(&manager, &copied).await,
        json!([]),
        "a reader's copy takes no file"
    );
    // The owner's copy takes them.
    let copied = copy_as(&api.token).await;
    let files = files_of(&api.token, &copied).await;
    assert_eq!(
        files.as_array().map(|files| files.len()),
        Some(1),
        "the writer's copy keeps the thread's files: {files}"
    );
}

/// A copy is whole or is not: one that fails part-way (here its files cannot be written) leaves
/// no thread behind.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_copy_that_fails_part_way_leaves_nothing(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let thread_id = new_thread(&api, &api.token).await;
    sqlx::query(
        "insert into mostrador.thread_files (thread_id, path, content, is_binary) \
         values ($1::uuid, '/notes.txt', 'x', false)",
    )
    .bind(&thread_id)
    .execute(&pool)
    .await
    .expect("a file");
    for statement in [
        "create function mostrador.refuse_files() returns trigger language plpgsql as \
         $$ begin raise exception 'no more files'; end $$",
        "create trigger refuse_files before insert on mostrador.thread_files \
         for each row execute function mostrador.refuse_files()",
    ] {
        sqlx::query(statement)
            .execute(&pool)
            .await
            .expect("trigger");
    }
    let threads = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from mostrador.threads")
            .fetch_one(&pool)
            .await
            .expect("count")
    };
    let before = threads().await;
    let (status, _, answer) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread_id}/copy"),
            &api.token,
            "",
        ))
        .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{answer}");
    assert_eq!(threads().await, before, "no half copy");
}

/// Every page the api answers is bounded in bytes as a thread search's is: a thread's runs and a
/// Store search too (history likewise), a 413 past the bound, never a page cut short.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn pages_of_runs_and_store_items_past_the_byte_cap_are_a_413(pool: PgPool) {
    let api = Api::with(
        pool,
        mostrador_api::ApiConfig {
            max_page_bytes: 4096,
            ..crate::support::config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let text = "x".repeat(2000);
    for _ in 0..3 {
        let body = json!({"assistant_id": "agent", "input": {"note": text}, "multitask_strategy": "enqueue"});
        let (status, _, run) = api
            .send(api.request(
                "POST",
                &format!("/threads/{thread}/runs"),
                &ana,
                &body.to_string(),
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{run}");
        let item = json!({"namespace": ["notes"], "key": Uuid::now_v7().to_string(), "value": {"note": text}});
        let (status, _, answer) = api
            .send(api.request("PUT", "/store/items", &ana, &item.to_string()))
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{answer}");
    }
    for (method, path, body) in [
        ("GET", format!("/threads/{thread}/runs"), String::new()),
        (
            "POST",
            "/store/items/search".to_owned(),
            r#"{"namespace_prefix": ["notes"]}"#.to_owned(),
        ),
    ] {
        let (status, _, answer) = api.send(api.request(method, &path, &ana, &body)).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{path}: {answer}");
        assert!(
            answer["detail"]
                .as_str()
                .is_some_and(|d| d.contains("4096")),
            "{answer}"
        );
    }
    let (status, _, runs) = api
        .send(api.request("GET", &format!("/threads/{thread}/runs?limit=1"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::OK, "one fits: {runs}");
    assert_eq!(runs.as_array().map(Vec::len), Some(1));
    let (status, _, found) = api
        .send(api.request(
            "POST",
            "/store/items/search",
            &ana,
            r#"{"namespace_prefix": ["notes"], "limit": 1}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert_eq!(found["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(found["items"][0]["score"], json!(null));
}

/// A caller has at most so many threads (`--threads-per-caller`), however they are made: past it
/// a thread's creation, a client-chosen one, a copy, a run that creates its thread and a
/// stateless run are 422s that write nothing; others create as before, and deleting a thread
/// gives its place back.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_callers_threads_are_bounded(pool: PgPool) {
    let api = Api::with(
        pool.clone(),
        mostrador_api::ApiConfig {
            threads_per_caller: 3,
            ..crate::support::config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let luis = api.token_for(&caller("luis", "customer", None));
    let threads = |owner: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "select count(*) from mostrador.threads where owner = $1 and deleted_at is null",
            )
            .bind(owner)
            .fetch_one(&pool)
            .await
            .expect("count")
        }
    };
    let first = create(&api, &ana, "{}").await;
    create(
        &api,
        &ana,
        &json!({"thread_id": Uuid::new_v4()}).to_string(),
    )
    .await;
    let id = Uuid::new_v4();
    let run_creating = json!({"assistant_id": "agent", "input": {}, "if_not_exists": "create"});
    let (status, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{id}/runs"),
            &ana,
            &run_creating.to_string(),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "her third: {run}");
    assert_eq!(threads("ana").await, 3);

    let first_id = first["thread_id"].as_str().expect("id");
    let over = [
        ("POST", "/threads".to_owned(), "{}".to_owned()),
        (
            "POST",
            "/threads".to_owned(),
            json!({"thread_id": Uuid::new_v4()}).to_string(),
        ),
        ("POST", format!("/threads/{first_id}/copy"), String::new()),
        (
            "POST",
            format!("/threads/{}/runs", Uuid::new_v4()),
            run_creating.to_string(),
        ),
        (
            "POST",
            "/runs".to_owned(),
            json!({"assistant_id": "agent", "input": {}}).to_string(),
        ),
    ];
    for (method, path, body) in &over {
        let (status, _, answer) = api.send(api.request(method, path, &ana, body)).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{method} {path}: {answer}"
        );
        assert!(
            answer.to_string().contains("at most 3 threads"),
            "says why: {answer}"
        );
    }
    assert_eq!(threads("ana").await, 3, "nothing written");
    let runs: i64 = sqlx::query_scalar("select count(*) from mostrador.runs")
        .fetch_one(&pool)
        .await
        .expect("runs");
    assert_eq!(runs, 1, "no run either");

    create(&api, &luis, "{}").await;
    let (status, _, _) = api
        .send(api.request("DELETE", &format!("/threads/{first_id}"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    create(&api, &ana, "{}").await;
    assert_eq!(
        threads("ana").await,
        3,
        "a deleted thread's place is hers again"
    );
}
