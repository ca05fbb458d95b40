//! MCP at `/mcp`, as the official server answers it: JSON-RPC over HTTP, the caller's assistants
//! as tools, nobody else's, and `http.disable_mcp` honoured. (A tool call runs a graph: the
//! Python suites call tools on both servers, `tests/python/templates`.)

use axum::body::Body as HttpBody;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{Api, caller, config};

/// A JSON-RPC message to `/mcp` with `token`, as MCP clients send it.
fn message(token: &str, body: &Value) -> Request<HttpBody> {
    Request::post("/mcp")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .body(HttpBody::from(body.to_string()))
        .expect("request")
}

fn call(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn mcp_speaks_json_rpc_as_the_official_server_does(pool: PgPool) {
    let api = Api::new(pool).await;
    let token = api.token.clone();
    let (status, _, answer) = api
        .send(message(
            &token,
            &call(1, "initialize", json!({"protocolVersion": "2025-03-26"})),
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["jsonrpc"], "2.0");
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(
        answer["result"]["capabilities"],
        json!({"tools": {"listChanged": false}})
    );
    let (_, _, answer) = api
        .send(message(
            &token,
            &call(2, "initialize", json!({"protocolVersion": "1999-01-01"})),
        ))
        .await;
    assert_eq!(
        answer["result"]["protocolVersion"], "2025-11-25",
        "the latest"
    );

    let (_, _, answer) = api.send(message(&token, &call(3, "ping", json!({})))).await;
    assert_eq!(answer, json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
    let (_, _, answer) = api
        .send(message(&token, &call(4, "resources/list", json!({}))))
        .await;
    assert_eq!(answer["error"]["code"], -32601);
    assert_eq!(
        answer["error"]["message"],
        "Method not found: resources/list"
    );

    // A notification is taken, not answered.
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = api.send(message(&token, &notification)).await;
    assert_eq!(status, StatusCode::ACCEPTED);

    // What is no JSON-RPC message is a 400 that says why.
    for (body, why) in [
        ("{", "Invalid JSON"),
        ("[1]", "Invalid message format."),
        (
            r#"{"id": 1, "method": "ping"}"#,
            "Invalid JSON-RPC message. Missing or invalid jsonrpc version.",
        ),
    ] {
        let mut request = message(&token, &json!({}));
        *request.body_mut() = HttpBody::from(body);
        let (status, _, answer) = api.send(request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(answer["error"], why, "{body}");
    }
    let mut request = message(&token, &call(5, "ping", json!({})));
    request
        .headers_mut()
        .insert(header::ACCEPT, "text/html".parse().expect("accept"));
    let (status, _, _) = api.send(request).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "an Accept without JSON or SSE"
    );

    // No server-sent stream and no session, as officially; nothing without a credential.
    let (status, _, _) = api.send(api.request("GET", "/mcp", &token, "")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, _, _) = api.send(api.request("DELETE", "/mcp", &token, "")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let mut anonymous = message(&token, &call(6, "ping", json!({})));
    anonymous.headers_mut().remove(header::AUTHORIZATION);
    let (status, _, _) = api.send(anonymous).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_callers_tools_are_its_assistants_and_nobody_elses(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token.clone();
    let luis = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let (status, _, _) = api
        .send(api.request(
            "POST",
            "/assistants",
            &ana,
            r#"{"graph_id": "agent", "name": "ana's  helper", "description": "Helps ana."}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK);

    let tools = |token: String| {
        let request = message(&token, &call(1, "tools/list", json!({})));
        let answered = api.send(request);
        async move {
            let (status, _, answer) = answered.await;
            assert_eq!(status, StatusCode::OK, "{answer}");
            answer["result"]["tools"].as_array().expect("tools").clone()
        }
    };
    let anas = tools(ana.clone()).await;
    let names: Vec<&str> = anas
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(
        names.contains(&"agent") && names.contains(&"approval"),
        "{names:?}"
    );
    let helper = anas
        .iter()
        .find(|tool| tool["title"] == "ana's  helper")
        .expect("ana's assistant is her tool");
    assert_eq!(helper["name"], "anas_helper", "a tool name MCP allows");
    assert_eq!(helper["description"], "Helps ana.");
    assert_eq!(helper["inputSchema"]["type"], "object");
    assert!(
        helper["inputSchema"]["properties"]
            .get("messages")
            .is_some(),
        "{helper}"
    );
    let agent = anas
        .iter()
        .find(|tool| tool["name"] == "agent")
        .expect("agent");
    assert_eq!(agent["description"], "Tool based on the agent assistant");

    let luiss = tools(luis.clone()).await;
    assert!(
        luiss.iter().all(|tool| tool["title"] != "ana's  helper"),
        "another caller's assistant is no tool of luis's: {luiss:?}"
    );
    let (_, _, answer) = api
        .send(message(
            &luis,
            &call(
                2,
                "tools/call",
                json!({"name": "anas_helper", "arguments": {}}),
            ),
        ))
        .await;
    assert_eq!(answer["error"]["code"], -32602);
    assert_eq!(answer["error"]["message"], "Unknown tool: anas_helper");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn mcp_is_off_when_the_project_disables_it(pool: PgPool) {
    use mostrador_api::app::RouteGroups;

    let api = Api::with(
        pool,
        mostrador_api::ApiConfig {
            disabled_routes: RouteGroups {
                mcp: true,
                ..RouteGroups::default()
            },
            ..config()
        },
    )
    .await;
    let (status, _, _) = api
        .send(message(&api.token, &call(1, "ping", json!({}))))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
