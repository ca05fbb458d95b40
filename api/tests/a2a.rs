//! A2A at `/a2a/{assistant_id}`: a task is a run on its conversation's thread, and a stranger
//! reaches it no more than the thread's own routes let them; `http.disable_a2a` honoured. (A sent
//! message runs a graph: `tests/python` sends, streams, resumes and cancels on both servers with
//! the official A2A client.)

use axum::body::Body as HttpBody;
use axum::http::{Request, StatusCode, header};
use mostrador_api::app::RouteGroups;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{Api, caller, config, new_thread};

/// A JSON-RPC request to the assistant's A2A route with `token`, as the A2A client sends it.
fn rpc(assistant: &str, token: &str, method: &str, params: &Value) -> Request<HttpBody> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    Request::post(format!("/a2a/{assistant}"))
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json")
        .body(HttpBody::from(body.to_string()))
        .expect("request")
}

/// The id of the `agent` graph's own assistant.
async fn agent(api: &Api) -> String {
    let (status, _, assistant) = api
        .send(api.request("GET", "/assistants/agent", &api.token, ""))
        .await;
    assert_eq!(status, StatusCode::OK, "{assistant}");
    assistant["assistant_id"].as_str().expect("id").to_owned()
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_strangers_a2a_calls_reach_no_task_of_anothers(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let luis = api.token_for(&caller("luis", "customer", None));
    let assistant = agent(&api).await;
    // Ana's task: a run on her thread (due in an hour: it stays pending).
    let thread = new_thread(&api, &ana).await;
    let (status, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread}/runs"),
            &ana,
            r#"{"assistant_id": "agent", "after_seconds": 3600}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let run_id = run["run_id"].as_str().expect("run id");
    let task = format!("{thread}:{run_id}");
    let data = |extra: Value| {
        let mut message = json!({"role": "user", "messageId": "m1",
            "parts": [{"kind": "data", "data": {"request": "x"}}]});
        message
            .as_object_mut()
            .expect("object")
            .extend(extra.as_object().cloned().unwrap_or_default());
        json!({"message": message})
    };
    let not_found = json!({"code": -32001, "message": format!("Task not found: {task}")});

    for (method, params, refused) in [
        ("tasks/get", json!({"id": task}), not_found.clone()),
        ("tasks/cancel", json!({"id": task}), not_found.clone()),
        (
            "message/send",
            data(json!({"taskId": task, "contextId": thread})),
            not_found.clone(),
        ),
    ] {
        let (status, _, answer) = api.send(rpc(&assistant, &luis, method, &params)).await;
        assert_eq!(status, StatusCode::OK, "{method}: {answer}");
        assert_eq!(answer["error"], refused, "{method}: {answer}");
    }
    // A message of his into her conversation is a run on her thread: refused as that run is.
    let (_, _, answer) = api
        .send(rpc(
            &assistant,
            &luis,
            "message/send",
            &data(json!({"contextId": thread})),
        ))
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let (_, _, runs) = api
        .send(api.request("GET", &format!("/threads/{thread}/runs"), &ana, ""))
        .await;
    assert_eq!(
        runs.as_array().map(Vec::len),
        Some(1),
        "nothing added: {runs}"
    );
    assert_eq!(runs[0]["status"], "pending", "nothing cancelled: {runs}");

    // Hers to read and to cancel.
    let (_, _, answer) = api
        .send(rpc(&assistant, &ana, "tasks/get", &json!({"id": task})))
        .await;
    assert_eq!(answer["result"]["status"]["state"], "submitted", "{answer}");
    let (_, _, answer) = api
        .send(rpc(&assistant, &ana, "tasks/cancel", &json!({"id": task})))
        .await;
    assert_eq!(answer["result"]["status"]["state"], "canceled", "{answer}");
    let (_, _, run) = api
        .send(api.request("GET", &format!("/threads/{thread}/runs/{run_id}"), &ana, ""))
        .await;
    assert_eq!(run["status"], "interrupted");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn an_agent_card_describes_the_assistant_at_the_address_the_caller_used(pool: PgPool) {
    let api = Api::new(pool).await;
    let assistant = agent(&api).await;
    for path in [
        format!("/a2a/{assistant}"),
        format!("/a2a/{assistant}/.well-known/agent-card.json"),
        format!("/a2a/{assistant}/.well-known/agent.json"),
    ] {
        let request = Request::get(&path)
            .header(header::AUTHORIZATION, format!("Bearer {}", api.token))
            .header(header::HOST, "agents.example.com:8443")
            .header("x-forwarded-proto", "https")
            .body(HttpBody::empty())
            .expect("request");
        let (status, _, card) = api.send(request).await;
        assert_eq!(status, StatusCode::OK, "{path}: {card}");
        let url = format!("https://agents.example.com:8443/a2a/{assistant}");
        assert_eq!(card["url"], url, "{path}");
        assert_eq!(card["supportedInterfaces"][0]["url"], url);
        assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
        assert_eq!(card["name"], "agent");
        assert_eq!(card["capabilities"]["streaming"], true);
    }
    let unknown = uuid::Uuid::new_v4();
    let (status, _, answer) = api
        .send(api.request("GET", &format!("/a2a/{unknown}"), &api.token, ""))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer["error"],
        json!({"code": -32602, "message": format!("Assistant '{unknown}' not found")})
    );
    let (status, _, _) = api
        .send(api.request("DELETE", &format!("/a2a/{assistant}"), &api.token, ""))
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a2a_switched_off_is_not_served(pool: PgPool) {
    let api = Api::with(
        pool,
        mostrador_api::ApiConfig {
            disabled_routes: RouteGroups {
                a2a: true,
                ..RouteGroups::default()
            },
            ..config()
        },
    )
    .await;
    let assistant = agent(&api).await;
    let (status, _, _) = api
        .send(rpc(
            &assistant,
            &api.token,
            "tasks/get",
            &json!({"id": "x"}),
        ))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = api
        .send(api.request(
            "GET",
            &format!("/a2a/{assistant}/.well-known/agent-card.json"),
            &api.token,
            "",
        ))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
