//! Who answers a thread's interrupts: its owner, or for a graph that leaves them to its store's
//! managers, a manager; only while the thread waits (resume, or a state update).

use axum::http::StatusCode;
use mostrador_api::ApiConfig;
use mostrador_graph::stream::discard;
use mostrador_graph::{RunControl, RunInput, RunOptions};
use mostrador_queue::PgCheckpointer;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::{Api, caller, config, new_thread, policy, runs};

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn only_a_manager_resumes_and_only_a_waiting_thread(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let marta = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let thread = new_thread(&api, &ana).await;
    let path = format!("/threads/{thread}/runs");
    let resume = r#"{"assistant_id": "approval", "command": {"resume": "approved"}}"#;

    let (status, _, answer) = api.send(api.request("POST", &path, &marta, resume)).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "nothing to resume yet: {answer}"
    );

    run_to_its_interrupt(&api, pool, &thread).await;
    let (_, _, waiting) = api
        .send(api.request("GET", &format!("/threads/{thread}"), &ana, ""))
        .await;
    let interrupts: Vec<&Value> = waiting["interrupts"]
        .as_object()
        .expect("map")
        .values()
        .collect();
    assert_eq!(interrupts.len(), 1, "{waiting}");
    assert_eq!(interrupts[0][0]["value"], json!({"refund": 40}));

    let (status, _, _) = api.send(api.request("POST", &path, &ana, resume)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "the customer may not decide");
    assert_eq!(runs(&api).await, 0);
    let (status, _, run) = api.send(api.request("POST", &path, &marta, resume)).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["kwargs"]["command"], json!({"resume": "approved"}));
}

/// Runs the `approval` graph on `thread` (as a worker would) until it stops at its interrupt.
async fn run_to_its_interrupt(api: &Api, pool: PgPool, thread: &str) {
    let graph = mostrador_api::AppState::graph(&api.state, "approval")
        .expect("graph")
        .clone();
    let thread_uuid = Uuid::parse_str(thread).expect("uuid");
    // As its first run would have, through the api.
    sqlx::query("update mostrador.threads set graph_id = 'approval' where thread_id = $1")
        .bind(thread_uuid)
        .execute(&pool)
        .await
        .expect("bind the thread to its graph");
    let result = graph
        .run(
            &PgCheckpointer::new(pool),
            thread_uuid,
            RunInput::Values(json!({})),
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await
        .expect("run");
    assert!(matches!(
        result.outcome,
        mostrador_graph::Outcome::Interrupted(_)
    ));
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn the_threads_owner_answers_interrupts_unless_the_graph_leaves_them_to_managers(
    pool: PgPool,
) {
    let config = ApiConfig {
        policy: policy("[graphs.\"*\"]\nread = [\"manager\"]"),
        ..config()
    };
    let api = Api::with(pool.clone(), config).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let marta = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let thread = new_thread(&api, &ana).await;
    run_to_its_interrupt(&api, pool, &thread).await;
    let path = format!("/threads/{thread}/runs");
    let resume = r#"{"assistant_id": "approval", "command": {"resume": "approved"}}"#;

    let (status, _, answer) = api.send(api.request("POST", &path, &marta, resume)).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "the store's manager sees the thread, but it is not hers to answer: {answer}"
    );
    let update = r#"{"values": {"decision": "no"}}"#;
    let state = format!("/threads/{thread}/state");
    let (status, _, _) = api.send(api.request("POST", &state, &marta, update)).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "nor to change while it waits"
    );
    assert_eq!(runs(&api).await, 0);

    let (status, _, run) = api.send(api.request("POST", &path, &ana, resume)).await;
    assert_eq!(status, StatusCode::OK, "the owner answers: {run}");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_customer_starts_no_run_of_a_graph_only_staff_start(pool: PgPool) {
    let api = Api::with(
        pool,
        ApiConfig {
            policy: policy(
                r#"
                [graphs.approval]
                start = ["clerk", "manager"]
                crons = ["clerk", "manager"]
                "#,
            ),
            ..config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let pepe = api.token_for(&caller("pepe", "clerk", Some("madrid-1")));
    let body = r#"{"assistant_id": "approval", "input": {}}"#;
    for path in ["/runs", "/runs/wait", "/runs/stream"] {
        let (status, _, answer) = api.send(api.request("POST", path, &ana, body)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {answer}");
    }
    let thread = new_thread(&api, &ana).await;
    let (status, _, _) = api
        .send(api.request("POST", &format!("/threads/{thread}/runs"), &ana, body))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let batch = r#"[{"assistant_id": "agent"}, {"assistant_id": "approval"}]"#;
    let (status, _, _) = api
        .send(api.request("POST", "/runs/batch", &ana, batch))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "all or nothing");
    let cron = r#"{"assistant_id": "approval", "schedule": "*/5 * * * *"}"#;
    let (status, _, _) = api
        .send(api.request("POST", "/runs/crons", &ana, cron))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "nor by a cron");
    assert_eq!(runs(&api).await, 0, "nothing was queued");

    let (status, _, answer) = api.send(api.request("POST", "/runs", &pepe, body)).await;
    assert_eq!(status, StatusCode::OK, "a clerk starts it: {answer}");
    let (status, _, _) = api
        .send(api.request("POST", "/runs", &ana, r#"{"assistant_id": "agent"}"#))
        .await;
    assert_eq!(status, StatusCode::OK, "the other graphs are anyone's");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_run_names_the_caller_it_acts_for_whatever_the_request_says(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let marta = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let thread = new_thread(&api, &ana).await;
    run_to_its_interrupt(&api, pool.clone(), &thread).await;
    // Marta resumes, claiming to be ana; ana's cron claims to be a manager.
    let forged = json!({"langgraph_auth_user": {"identity": "ana", "role": "manager"},
                        "langgraph_auth_user_id": "ana", "langgraph_auth_permissions": ["all"],
                        "tone": "terse"});
    let resume = json!({"assistant_id": "approval", "command": {"resume": "approved"},
                        "config": {"configurable": forged}});
    let path = format!("/threads/{thread}/runs");
    let (status, _, run) = api
        .send(api.request("POST", &path, &marta, &resume.to_string()))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let cron = json!({"assistant_id": "agent", "schedule": "*/5 * * * *",
                      "config": {"configurable": forged}});
    let (status, _, answer) = api
        .send(api.request("POST", "/runs/crons", &ana, &cron.to_string()))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    let configurable: Value = sqlx::query_scalar(
        "select config->'configurable' from mostrador.runs where run_id = $1::uuid",
    )
    .bind(run["run_id"].as_str())
    .fetch_one(&pool)
    .await
    .expect("the run");
    assert_eq!(configurable["langgraph_auth_user_id"], "marta");
    assert_eq!(
        configurable["langgraph_auth_user"],
        json!({"identity": "marta", "display_name": "marta", "is_authenticated": true,
               "permissions": [], "roles": ["manager"], "tenant": "madrid-1"})
    );
    assert_eq!(configurable["langgraph_auth_permissions"], json!([]));
    assert_eq!(configurable["tone"], "terse", "the rest is the request's");
    let cron: Value =
        sqlx::query_scalar("select payload->'config'->'configurable' from mostrador.crons")
            .fetch_one(&pool)
            .await
            .expect("the cron");
    assert_eq!(cron["langgraph_auth_user"]["identity"], "ana");
    assert_eq!(cron["langgraph_auth_user"]["roles"], json!(["customer"]));
}

/// A decider answers a thread where it waits: a manager may change the waiting state (naming its
/// checkpoint or none), not take the thread back to a past checkpoint, which would rewrite its
/// history; its owner may.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_decider_answers_where_the_thread_waits_not_from_a_past_checkpoint(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let marta = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let thread = new_thread(&api, &ana).await;
    // Asked twice: the thread waits at its latest checkpoint, and has past ones.
    run_to_its_interrupt(&api, pool.clone(), &thread).await;
    run_to_its_interrupt(&api, pool, &thread).await;
    let update = |token: &str, checkpoint: &str| {
        let body = json!({"values": {"decision": "no"}, "checkpoint_id": checkpoint}).to_string();
        let request = api.request("POST", &format!("/threads/{thread}/state"), token, &body);
        async { api.send(request).await }
    };
    let (_, _, history) = api
        .send(api.request("GET", &format!("/threads/{thread}/history"), &ana, ""))
        .await;
    let checkpoints: Vec<String> = history
        .as_array()
        .expect("states")
        .iter()
        .map(|state| {
            state["checkpoint"]["checkpoint_id"]
                .as_str()
                .expect("id")
                .to_owned()
        })
        .collect();
    assert!(checkpoints.len() >= 2, "{history}");
    let past = &checkpoints[checkpoints.len() - 1];
    let (status, _, answer) = update(&marta, past).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "from a past checkpoint: {answer}"
    );
    let (status, _, answer) = update(&ana, past).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "its owner branches from the past: {answer}"
    );
    // A decider answers where it waits, naming its checkpoint (on a thread of its own: the
    // owner's branch above moved this one on).
    let other = new_thread(&api, &ana).await;
    run_to_its_interrupt(&api, api.state.pool().clone(), &other).await;
    let (_, _, waiting) = api
        .send(api.request("GET", &format!("/threads/{other}/state"), &ana, ""))
        .await;
    let at = waiting["checkpoint"]["checkpoint_id"].as_str().expect("id");
    let body = json!({"values": {"decision": "no"}, "checkpoint_id": at}).to_string();
    let (status, _, answer) = api
        .send(api.request("POST", &format!("/threads/{other}/state"), &marta, &body))
        .await;
    assert_eq!(status, StatusCode::OK, "where it waits: {answer}");
}
