//! The api in process: its real router and state on a test database, and tokens for callers.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::body::Body as HttpBody;
use axum::http::{Request, StatusCode, header};
use mostrador_api::auth::mint;
use mostrador_api::{ApiConfig, AppState, AuthConfig, Caller, ClaimPaths, Policy, router};
use mostrador_graph::{Command, START, StateGraph};
use serde_json::Value;
use sqlx::PgPool;
use tower::ServiceExt;

/// The policy the api's tests run under: the retail app's rules on the test graphs.
pub const POLICY: &str = r#"
    operators = ["manager"]
    # A store's managers read its threads.
    [graphs."*"]
    read = ["manager"]
    # As the retail app's `cliente`: a refund is the store managers' decision.
    [graphs.approval]
    decide = ["manager"]
"#;

/// A policy file's policy.
pub fn policy(text: &str) -> Policy {
    Policy::parse(text).expect("a policy").policy
}

pub fn config() -> ApiConfig {
    ApiConfig {
        body_limit: 64 * 1024,
        policy: policy(POLICY),
        ..ApiConfig::new(AuthConfig {
            secret: "api test secret".into(),
            jwks_url: None,
            issuer: "mostrador".into(),
            audience: "mostrador".into(),
            claims: ClaimPaths::default(),
        })
    }
}

pub fn graphs() -> BTreeMap<String, mostrador_graph::Graph> {
    let agent = StateGraph::new()
        .channel("messages", mostrador_graph::Reducer::Messages)
        .node("model", |_| async { Ok(Command::new()) })
        .node("tools", |_| async { Ok(Command::new()) })
        .edge(START, "model")
        .edge("tools", "model")
        .conditional_edge("model", |_| vec!["tools"])
        .compile()
        .expect("valid graph");
    let approval = StateGraph::new()
        .channel("decision", mostrador_graph::Reducer::LastValue)
        .node("ask", |ctx| async move {
            let decision = ctx.interrupt(serde_json::json!({"refund": 40}))?;
            Ok(Command::new().set("decision", decision))
        })
        .edge(START, "ask")
        .compile()
        .expect("valid graph");
    BTreeMap::from([
        ("agent".to_owned(), agent),
        ("approval".to_owned(), approval),
    ])
}

pub struct Api {
    pub state: AppState,
    pub config: ApiConfig,
    pub token: String,
}

impl Api {
    pub async fn new(pool: PgPool) -> Self {
        Self::with(pool, config()).await
    }

    pub async fn with(pool: PgPool, config: ApiConfig) -> Self {
        let listener = mostrador_queue::Listener::start(pool.clone(), std::future::pending())
            .await
            .expect("listener");
        let caller = caller("ana", "customer", Some("madrid-1"));
        Self {
            state: AppState::new(pool, &config, graphs(), listener).expect("state"),
            token: mint(&config.auth, &caller, Duration::from_secs(300)).expect("token"),
            config,
        }
    }

    /// Sends a request; returns the status, the headers and the body (JSON when it parses).
    pub async fn send(&self, request: Request<HttpBody>) -> (StatusCode, header::HeaderMap, Value) {
        let response = router(self.state.clone(), &self.config)
            .oneshot(request)
            .await
            .expect("infallible");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, headers, body)
    }

    /// The process's metrics, as Prometheus scrapes them on their own port.
    pub async fn metrics(&self) -> String {
        self.metrics_at("/metrics").await.1
    }

    /// `path` on the metrics port: its status and body.
    pub async fn metrics_at(&self, path: &str) -> (StatusCode, String) {
        let response = mostrador_api::metrics_router(self.state.clone())
            .oneshot(Request::get(path).body(HttpBody::empty()).expect("request"))
            .await
            .expect("infallible");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Sends a request; returns the status and headers without waiting for the body (a stream
    /// or a wait whose run no worker takes).
    pub async fn head_of(&self, request: Request<HttpBody>) -> (StatusCode, header::HeaderMap) {
        let response = router(self.state.clone(), &self.config)
            .oneshot(request)
            .await
            .expect("infallible");
        (response.status(), response.headers().clone())
    }

    pub fn get(&self, path: &str) -> Request<HttpBody> {
        Request::get(path)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token))
            .body(HttpBody::empty())
            .expect("request")
    }

    pub fn post(&self, path: &str, body: impl Into<HttpBody>) -> Request<HttpBody> {
        Request::post(path)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token))
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.into())
            .expect("request")
    }
}

/// A caller with one role, of a tenant (a store).
pub fn caller(subject: &str, role: &str, store: Option<&str>) -> Caller {
    Caller::new(subject).with_roles([role]).in_tenant(store)
}

impl Api {
    /// A token for `caller`.
    pub fn token_for(&self, caller: &Caller) -> String {
        mint(&self.config.auth, caller, Duration::from_secs(300)).expect("token")
    }

    /// A request with `token` (none when empty) and a JSON body (none when empty).
    pub fn request(&self, method: &str, path: &str, token: &str, body: &str) -> Request<HttpBody> {
        let mut request = Request::builder().method(method).uri(path);
        if !token.is_empty() {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if !body.is_empty() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        request
            .body(HttpBody::from(body.to_owned()))
            .expect("request")
    }
}

/// A new thread of the caller of `token`; its id.
pub async fn new_thread(api: &Api, token: &str) -> String {
    let (status, _, thread) = api.send(api.request("POST", "/threads", token, "{}")).await;
    assert_eq!(status, StatusCode::OK);
    thread["thread_id"].as_str().expect("id").to_owned()
}

/// A run of the `agent` graph on `thread`, created by the caller of `token`; the answer.
pub async fn new_run(api: &Api, token: &str, thread: &str) -> Value {
    let (status, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread}/runs"),
            token,
            r#"{"assistant_id": "agent"}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    run
}

/// Runs in the database, of every thread.
pub async fn runs(api: &Api) -> i64 {
    sqlx::query_scalar("select count(*) from mostrador.runs")
        .fetch_one(api.state.pool())
        .await
        .expect("count")
}
