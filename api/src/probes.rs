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
    // Anonymous: what the database said goes to the log, not to whoever asks.
    let check = async {
        match tokio::time::timeout(
            std::time::Duration::from_secs(2),
            check_schema_serves(state.pool()),
        )
        .await
        {
            Ok(Ok(())) => true,
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "not ready: the database failed");
                false
            }
            Err(_) => {
                tracing::warn!("not ready: the database did not answer within 2 s");
                false
            }
        }
    };
    if state.database_ready(READY_FRESH, check).await {
        (StatusCode::OK, "ready".into())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "database unavailable".into(),
        )
    }
}

/// How long a readiness check of the database stands for the probes that follow it.
const READY_FRESH: std::time::Duration = std::time::Duration::from_secs(1);
