//! `/ok`, `/info` and `/live` touch nothing external (restarting a pod does not fix a database);
//! `/ready` checks the database and its schema, and answers 503 while the pod drains.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use mostrador_queue::schema::check_schema_serves;
use serde_json::{Value, json};

use crate::app::AppState;

pub async fn ok() -> Json<Value> {
    Json(json!({"ok": true}))
}

/// `GET /info`, which clients (agent-chat-ui) ask to see that a server answers: the official
/// server's shape, with mostrador's version.
pub async fn info() -> Json<Value> {
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "flags": {"assistants": true, "crons": true, "langsmith": false},
        "host": {"kind": "mostrador"},
    }))
}

pub async fn live() -> &'static str {
    "ok"
}

pub async fn ready(State(state): State<AppState>) -> (StatusCode, String) {
    if state.is_draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining".into());
    }
    let checked = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        check_schema_serves(state.pool()),
    )
    .await;
    match checked {
        Ok(Ok(())) => (StatusCode::OK, "ready".into()),
        Ok(Err(err)) => (StatusCode::SERVICE_UNAVAILABLE, format!("database: {err}")),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "database: no answer within 2s".into(),
        ),
    }
}
