//! The runtime context a run's graph reads (LangGraph's `runtime.context`): its assistant's with
//! the run's own over it, `{}` when neither has one, however the run starts.

use axum::http::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{Api, caller, new_thread};

/// The context of every run so far, oldest first.
async fn contexts(pool: &PgPool) -> Vec<Value> {
    sqlx::query_scalar("select config->'context' from mostrador.runs order by created_at, run_id")
        .fetch_all(pool)
        .await
        .expect("runs")
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_runs_context_is_its_assistants_with_its_own_over_it_however_it_starts(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let send = |method: &'static str, path: String, body: Value| {
        let request = api.request(method, &path, &ana, &body.to_string());
        async { api.send(request).await }
    };
    let (status, _, assistant) = send(
        "POST",
        "/assistants".into(),
        json!({"graph_id": "agent", "context": {"model": "large", "tone": "terse"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{assistant}");
    let assistant_id = assistant["assistant_id"]
        .as_str()
        .expect("an id")
        .to_owned();

    // On a thread: the run's keys over the assistant's; a caller's name is the api's alone.
    let thread = new_thread(&api, &ana).await;
    let (status, _, run) = send(
        "POST",
        format!("/threads/{thread}/runs"),
        json!({"assistant_id": assistant_id,
               "context": {"tone": "warm", "langgraph_auth_user_id": "mallory"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(
        run["kwargs"]["context"],
        json!({"model": "large", "tone": "warm"})
    );
    assert!(run["kwargs"]["config"].get("context").is_none(), "{run}");
    // `config.configurable` is the context when there is no `context`; neither: `{}`.
    for body in [
        json!({"assistant_id": "agent", "config": {"configurable": {"model": "small"}},
               "multitask_strategy": "enqueue"}),
        json!({"assistant_id": "agent", "multitask_strategy": "enqueue"}),
    ] {
        let (status, _, run) = send("POST", format!("/threads/{thread}/runs"), body).await;
        assert_eq!(status, StatusCode::OK, "{run}");
    }
    // Both: the official 400, and nothing queued.
    let (status, _, refused) = send(
        "POST",
        format!("/threads/{thread}/runs"),
        json!({"assistant_id": "agent", "context": {"a": 1}, "config": {"configurable": {"b": 2}}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(contexts(&pool).await.len(), 3);

    // Stateless and batch runs.
    let (status, _, run) = send(
        "POST",
        "/runs".into(),
        json!({"assistant_id": assistant_id, "context": {"tone": "dry"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let (status, _, runs) = send(
        "POST",
        "/runs/batch".into(),
        json!([{"assistant_id": assistant_id}, {"assistant_id": "agent", "context": {"tone": "x"}}]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{runs}");

    // A cron's runs: the assistant's context as it is when each run starts, the cron's over it.
    let (status, _, cron) = send(
        "POST",
        "/runs/crons".into(),
        json!({"assistant_id": assistant_id, "schedule": "* * * * *", "context": {"tone": "daily"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{cron}");
    let (status, _, _) = send(
        "PATCH",
        format!("/assistants/{assistant_id}"),
        json!({"context": {"model": "huge", "tone": "terse"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    sqlx::query("update mostrador.crons set next_run_at = now() - interval '1 second'")
        .execute(&pool)
        .await
        .expect("due");
    assert_eq!(
        mostrador_queue::data::cron::tick(&pool, None)
            .await
            .expect("tick"),
        1
    );

    assert_eq!(
        contexts(&pool).await,
        [
            json!({"model": "large", "tone": "warm"}),
            json!({"model": "small"}),
            json!({}),
            json!({"model": "large", "tone": "dry"}),
            json!({"model": "large", "tone": "terse"}),
            json!({"tone": "x"}),
            json!({"model": "huge", "tone": "daily"}),
        ]
    );
}
