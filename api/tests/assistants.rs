//! Assistants callers create: versions, the latest, search and count beside the graphs' own, a
//! run on one with its config under the run's, and each its creator's own.

use axum::http::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{Api, caller, new_thread};

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn assistants_are_versioned_run_with_their_config_and_seen_by_their_creator_only(
    pool: PgPool,
) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let luis = api.token_for(&caller("luis", "customer", None));
    let send = |method: &'static str, path: String, token: &str, body: Value| {
        let request = api.request(method, &path, token, &body.to_string());
        async { api.send(request).await }
    };

    let (status, _, created) = send(
        "POST",
        "/assistants".into(),
        &ana,
        json!({"graph_id": "agent", "name": "terse", "config": {"configurable": {"tone": "terse", "lang": "es"}},
               "metadata": {"team": "a"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let id = created["assistant_id"].as_str().expect("an id").to_owned();
    assert_eq!(created["version"], 1);
    assert_eq!(
        created["context"],
        json!({"tone": "terse", "lang": "es"}),
        "context is configurable"
    );

    let (status, _, updated) = send(
        "PATCH",
        format!("/assistants/{id}"),
        &ana,
        json!({"metadata": {"stage": "beta"}, "name": "terser"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["version"], 2);
    assert_eq!(
        updated["metadata"],
        json!({"team": "a", "stage": "beta"}),
        "merged"
    );
    assert_eq!(updated["config"], created["config"], "kept");
    let (_, _, versions) = send(
        "POST",
        format!("/assistants/{id}/versions"),
        &ana,
        json!({}),
    )
    .await;
    let numbers: Vec<&Value> = versions
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| &v["version"])
        .collect();
    assert_eq!(numbers, [&json!(2), &json!(1)]);
    let (_, _, latest) = send(
        "POST",
        format!("/assistants/{id}/latest"),
        &ana,
        json!({"version": 1}),
    )
    .await;
    assert_eq!(
        (latest["version"].clone(), latest["name"].clone()),
        (json!(1), json!("terse"))
    );
    let (status, _, _) = send(
        "POST",
        format!("/assistants/{id}/latest"),
        &ana,
        json!({"version": 9}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Search and count: the graphs' own and the caller's.
    let (_, _, found) = send(
        "POST",
        "/assistants/search".into(),
        &ana,
        json!({"graph_id": "agent"}),
    )
    .await;
    let names: Vec<&str> = found
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert_eq!(names, ["terse", "agent"], "newest first");
    let (_, _, found) = send(
        "POST",
        "/assistants/search".into(),
        &ana,
        json!({"metadata": {"team": "a"}}),
    )
    .await;
    assert_eq!(found.as_array().map(Vec::len), Some(1));
    let (_, _, count) = send("POST", "/assistants/count".into(), &ana, json!({})).await;
    assert_eq!(count, json!(3));
    let (_, _, count) = send("POST", "/assistants/count".into(), &luis, json!({})).await;
    assert_eq!(count, json!(2), "luis sees the graphs' own only");

    // A run on it: its config under the run's.
    let thread = new_thread(&api, &ana).await;
    let (status, _, run) = send(
        "POST",
        format!("/threads/{thread}/runs"),
        &ana,
        json!({"assistant_id": id, "config": {"configurable": {"lang": "en"}, "recursion_limit": 7}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["assistant_id"], json!(id));
    let config: Value = sqlx::query_scalar("select config from mostrador.runs")
        .fetch_one(&pool)
        .await
        .expect("the run");
    assert_eq!(
        (
            &config["configurable"]["tone"],
            &config["configurable"]["lang"]
        ),
        (&json!("terse"), &json!("en"))
    );
    assert_eq!(config["recursion_limit"], 7);

    // Luis: none of it.
    for (method, path, body) in [
        ("GET", format!("/assistants/{id}"), json!(null)),
        (
            "PATCH",
            format!("/assistants/{id}"),
            json!({"name": "mine"}),
        ),
        ("DELETE", format!("/assistants/{id}"), json!(null)),
        ("POST", format!("/assistants/{id}/versions"), json!({})),
    ] {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let (status, _, _) = api.send(api.request(method, &path, &luis, &body)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}");
    }
    let luis_thread = new_thread(&api, &luis).await;
    let (status, _, _) = send(
        "POST",
        format!("/threads/{luis_thread}/runs"),
        &luis,
        json!({"assistant_id": id}),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "luis cannot run ana's assistant"
    );
    let (status, _, _) = send(
        "POST",
        "/assistants".into(),
        &luis,
        json!({"graph_id": "agent", "assistant_id": id, "if_exists": "do_nothing"}),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "taken, whoever's, and nothing revealed"
    );

    // The graphs' own are the graphs'; bad input changes nothing.
    let (status, _, _) = send(
        "PATCH",
        "/assistants/agent".into(),
        &ana,
        json!({"name": "x"}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _, _) = send(
        "POST",
        "/assistants".into(),
        &ana,
        json!({"graph_id": "nope"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = send(
        "POST",
        "/assistants".into(),
        &ana,
        json!({"graph_id": "agent", "config": {"configurable": {"a": 1}}, "context": {"b": 2}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, _) = send(
        "POST",
        "/assistants/search".into(),
        &ana,
        json!({"sort_by": "mood"}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _, _) = send(
        "POST",
        "/assistants/search".into(),
        &ana,
        json!({"select": ["assistant_id", "mood"]}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "an unknown field");
    let (status, _, selected) = send(
        "POST",
        "/assistants/search".into(),
        &ana,
        json!({"graph_id": "agent", "select": ["assistant_id", "version"]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let selected = selected.as_array().expect("a list").clone();
    assert!(!selected.is_empty());
    for assistant in &selected {
        let fields: Vec<&String> = assistant.as_object().expect("an object").keys().collect();
        assert_eq!(
            fields,
            ["assistant_id", "version"],
            "only what select names"
        );
    }
    let (status, _, far) = send(
        "POST",
        "/assistants/search".into(),
        &ana,
        json!({"offset": i64::MAX - 1, "limit": 10}),
    )
    .await;
    assert_eq!(
        (status, far),
        (StatusCode::OK, json!([])),
        "a page past the end is empty"
    );
    let (status, _, again) = send(
        "POST",
        "/assistants".into(),
        &ana,
        json!({"graph_id": "agent", "assistant_id": id, "if_exists": "do_nothing"}),
    )
    .await;
    assert_eq!(
        (status, again["assistant_id"].clone()),
        (StatusCode::OK, json!(id))
    );

    let (status, _, _) = send("DELETE", format!("/assistants/{id}"), &ana, json!({})).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = api
        .send(api.request("GET", &format!("/assistants/{id}"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn deleting_an_assistant_with_delete_threads_deletes_the_threads_it_ran_on(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let send = |method: &'static str, path: String, body: Value| {
        let request = api.request(method, &path, &ana, &body.to_string());
        async { api.send(request).await }
    };
    let mut threads = Vec::new();
    for _ in 0..2 {
        let (_, _, assistant) =
            send("POST", "/assistants".into(), json!({"graph_id": "agent"})).await;
        let id = assistant["assistant_id"]
            .as_str()
            .expect("an id")
            .to_owned();
        let thread = new_thread(&api, &ana).await;
        let (status, _, run) = send(
            "POST",
            format!("/threads/{thread}/runs"),
            json!({"assistant_id": id}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{run}");
        threads.push((id, thread));
    }
    let (status, _, _) = send(
        "DELETE",
        format!("/assistants/{}?delete_threads=true", threads[0].0),
        Value::Null,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = send(
        "DELETE",
        format!("/assistants/{}", threads[1].0),
        Value::Null,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (gone, _, _) = send("GET", format!("/threads/{}", threads[0].1), Value::Null).await;
    assert_eq!(gone, StatusCode::NOT_FOUND, "its thread went with it");
    let (kept, _, _) = send("GET", format!("/threads/{}", threads[1].1), Value::Null).await;
    assert_eq!(kept, StatusCode::OK, "without delete_threads, threads stay");
}

/// A caller's assistants and each assistant's versions are bounded: past the most assistants a
/// creation is a 422 that writes nothing, and an update keeps the newest versions only.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_callers_assistants_and_their_versions_are_bounded(pool: PgPool) {
    use mostrador_queue::data::assistants::{MAX_PER_OWNER, VERSIONS_KEPT};

    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let create = || {
        api.request(
            "POST",
            "/assistants",
            &ana,
            r#"{"graph_id": "agent", "config": {}}"#,
        )
    };
    let (status, _, created) = api.send(create()).await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let assistant = created["assistant_id"].as_str().expect("id").to_owned();
    // Her other assistants, as many as she may have.
    sqlx::query(
        "insert into mostrador.assistants (assistant_id, owner, graph_id, name) \
         select gen_random_uuid(), 'ana', 'agent', 'a' from generate_series(2, $1)",
    )
    .bind(MAX_PER_OWNER)
    .execute(&pool)
    .await
    .expect("assistants");
    let (status, _, answer) = api.send(create()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    let count: i64 = sqlx::query_scalar("select count(*) from mostrador.assistants")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(count, MAX_PER_OWNER, "nothing written");

    // Versions 2 to VERSIONS_KEPT, then one more update: the oldest goes.
    sqlx::query(
        "insert into mostrador.assistant_versions (assistant_id, version, graph_id, name) \
         select $1::uuid, v, 'agent', 'a' from generate_series(2, $2) v",
    )
    .bind(&assistant)
    .bind(VERSIONS_KEPT)
    .execute(&pool)
    .await
    .expect("versions");
    let (status, _, updated) = api
        .send(api.request(
            "PATCH",
            &format!("/assistants/{assistant}"),
            &ana,
            r#"{"metadata": {"v": "newest"}}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["version"], json!(VERSIONS_KEPT + 1));
    let (oldest, kept): (i32, i64) = sqlx::query_as(
        "select min(version), count(*) from mostrador.assistant_versions where assistant_id = $1::uuid",
    )
    .bind(&assistant)
    .fetch_one(&pool)
    .await
    .expect("versions");
    assert_eq!((oldest, kept), (2, i64::from(VERSIONS_KEPT)));
}
