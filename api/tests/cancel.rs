//! Cancelling runs over HTTP: a pending run cancelled by interrupt or rollback, a caller's own
//! runs cancelled many at once, and a run deleted only once it finished.

use axum::http::StatusCode;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::{Api, caller, new_thread, runs};

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn pending_run_is_cancelled_by_interrupt_or_rollback(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let path = format!("/threads/{thread}/runs");
    let body = r#"{"assistant_id": "agent", "after_seconds": 3600}"#;
    let (_, _, run) = api.send(api.request("POST", &path, &ana, body)).await;
    let run_path = format!("{path}/{}", run["run_id"].as_str().expect("id"));

    let (status, _, _) = api
        .send(api.request(
            "POST",
            &format!("{run_path}/cancel?wait=0&action=interrupt"),
            &ana,
            "",
        ))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, _, cancelled) = api.send(api.request("GET", &run_path, &ana, "")).await;
    assert_eq!(cancelled["status"], "interrupted");

    let (_, _, run) = api.send(api.request("POST", &path, &ana, body)).await;
    let run_path = format!("{path}/{}", run["run_id"].as_str().expect("id"));
    let (status, _, _) = api
        .send(api.request(
            "POST",
            &format!("{run_path}/cancel?wait=0&action=rollback"),
            &ana,
            "",
        ))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, _, _) = api.send(api.request("GET", &run_path, &ana, "")).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "rolled back: as if never created"
    );

    let (status, _, _) = api
        .send(api.request(
            "POST",
            &format!("{run_path}/cancel?action=explode"),
            &ana,
            "",
        ))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    // wait=1: the answer comes once the run has ended.
    let (_, _, run) = api.send(api.request("POST", &path, &ana, body)).await;
    let run_path = format!("{path}/{}", run["run_id"].as_str().expect("id"));
    let cancel = format!("{run_path}/cancel?wait=1&action=interrupt");
    let (status, _, answer) = api.send(api.request("POST", &cancel, &ana, "")).await;
    assert_eq!(
        (status, answer),
        (StatusCode::OK, json!({})),
        "the thread has no state yet"
    );
    let (_, _, run) = api.send(api.request("POST", &path, &ana, body)).await;
    let run_path = format!("{path}/{}", run["run_id"].as_str().expect("id"));
    let cancel = format!("{run_path}/cancel?wait=1&action=rollback");
    let (status, _, _) = api.send(api.request("POST", &cancel, &ana, "")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn only_a_finished_run_is_deleted(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let path = format!("/threads/{thread}/runs");
    let (_, _, run) = api
        .send(api.request(
            "POST",
            &path,
            &ana,
            r#"{"assistant_id": "agent", "after_seconds": 3600}"#,
        ))
        .await;
    let run_path = format!("{path}/{}", run["run_id"].as_str().expect("id"));
    let (status, _, _) = api.send(api.request("DELETE", &run_path, &ana, "")).await;
    assert_eq!(status, StatusCode::CONFLICT, "pending: cancel it first");
    let cancel = format!("{run_path}/cancel?action=interrupt");
    assert_eq!(
        api.send(api.request("POST", &cancel, &ana, "")).await.0,
        StatusCode::ACCEPTED
    );
    let (status, _, _) = api.send(api.request("DELETE", &run_path, &ana, "")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = api.send(api.request("GET", &run_path, &ana, "")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(runs(&api).await, 0);
}

/// The status of each run, by id (a deleted run is absent).
async fn statuses(api: &Api) -> std::collections::BTreeMap<String, String> {
    sqlx::query_as::<_, (Uuid, String)>("select run_id, status::text from mostrador.runs")
        .fetch_all(api.state.pool())
        .await
        .expect("runs")
        .into_iter()
        .map(|(run_id, status)| (run_id.to_string(), status))
        .collect()
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn cancel_many_cancels_the_callers_own_runs_only(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let luis = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let marta = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let enqueue = async |token: &str| {
        let thread = new_thread(&api, token).await;
        let (status, _, run) = api
            .send(api.request(
                "POST",
                &format!("/threads/{thread}/runs"),
                token,
                r#"{"assistant_id": "agent", "input": {}}"#,
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{run}");
        (thread, run["run_id"].as_str().expect("run id").to_owned())
    };
    let (ana_thread, first) = enqueue(&ana).await;
    let (_, second) = enqueue(&ana).await;
    let (_, theirs) = enqueue(&luis).await;
    let cancel = |token: &str, query: &str, body: String| {
        api.request("POST", &format!("/runs/cancel{query}"), token, &body)
    };
    let by_ids = json!({"thread_id": ana_thread, "run_ids": [first]}).to_string();

    // Bad requests change nothing.
    let before = statuses(&api).await;
    for (query, body) in [
        ("", json!({"status": "done"}).to_string()),
        (
            "",
            json!({"status": "all", "thread_id": ana_thread}).to_string(),
        ),
        ("", json!({"thread_id": ana_thread}).to_string()),
        ("", json!({}).to_string()),
        ("", json!({"thread_id": "nope", "run_ids": []}).to_string()),
        (
            "",
            json!({"thread_id": ana_thread, "run_ids": ["nope"]}).to_string(),
        ),
        ("?action=destroy", json!({"status": "all"}).to_string()),
        ("", "[]".to_owned()),
    ] {
        let (status, _, answer) = api.send(cancel(&ana, query, body.clone())).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{query} {body}: {answer}"
        );
    }
    // Someone else's thread: a stranger finds none, a reader may not change it.
    let (status, _, answer) = api.send(cancel(&luis, "", by_ids.clone())).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert_eq!(answer["detail"], "Thread not found");
    let (status, _, _) = api.send(cancel(&marta, "", by_ids.clone())).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(statuses(&api).await, before, "nothing changed");

    let (status, _, _) = api.send(cancel(&ana, "", by_ids.clone())).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let after = statuses(&api).await;
    assert_eq!(
        (&*after[&first], &*after[&second], &*after[&theirs]),
        ("interrupted", "pending", "pending")
    );
    // Named again, it has ended: nothing to cancel.
    let (status, _, answer) = api.send(cancel(&ana, "", by_ids)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        answer["detail"]
            .as_str()
            .is_some_and(|detail| detail.starts_with("No matching runs to cancel.")),
        "{answer}"
    );

    // Every run of hers in a status: not luis's.
    let (status, _, _) = api
        .send(cancel(&ana, "", json!({"status": "ALL"}).to_string()))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let after = statuses(&api).await;
    assert_eq!(
        (&*after[&second], &*after[&theirs]),
        ("interrupted", "pending")
    );
    let (status, _, answer) = api
        .send(cancel(&ana, "", json!({"status": "pending"}).to_string()))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing left: {answer}");
    assert_eq!(answer["detail"], "No runs found to cancel.");

    // A rollback deletes the pending run.
    let (status, _, _) = api
        .send(cancel(
            &luis,
            "?action=rollback",
            json!({"status": "pending"}).to_string(),
        ))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(!statuses(&api).await.contains_key(&theirs), "deleted");
}
