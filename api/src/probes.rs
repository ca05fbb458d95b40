//! `/ok` (unless asked to check the database), `/info` and `/live` touch nothing external
//! (restarting a pod does not fix a database); `/ready` checks the database and its schema, and
//! answers 503 while the pod drains.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use mostrador_queue::schema::check_schema;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::ApiError;
use crate::app::AppState;
use crate::extract::Params;
use crate::wire;

/// `/ok`'s query, as on the official server.
#[derive(Debug, Deserialize, IntoParams)]
pub struct OkQuery {
    /// A number: other than 0, the database is asked too (`healthy`, or `unhealthy` and a 503);
    /// 0 or none, it is not (`skipped`).
    #[param(pattern = "^[+-]?[0-9]+$", nullable = false)]
    check_db: Option<String>,
}

/// `GET /ok`, as the official server answers it: `{"ok": true, "services": {"database":
/// "skipped"}}`; with `check_db=1`, the database is asked (the readiness probe's check, kept for a
/// second), `healthy`, or `unhealthy` and a 503 with `Retry-After` (the official server answers
/// 500 there; a database away is transient here).
pub async fn ok(
    State(state): State<AppState>,
    Params(query): Params<OkQuery>,
) -> Result<Response, ApiError> {
    let check = match query.check_db.as_deref() {
        None => false,
        Some(given) => given
            .parse::<i64>()
            .map(|n| n != 0)
            .map_err(|_| ApiError::unprocessable("check_db must be 0 or 1"))?,
    };
    let health = |database| {
        Json(wire::Health {
            ok: !matches!(database, wire::DatabaseHealth::Unhealthy),
            services: wire::HealthServices { database },
        })
    };
    if !check {
        return Ok(health(wire::DatabaseHealth::Skipped).into_response());
    }
    if state
        .database_ready(READY_FRESH, database_answers(&state))
        .await
    {
        Ok(health(wire::DatabaseHealth::Healthy).into_response())
    } else {
        Ok((
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            health(wire::DatabaseHealth::Unhealthy),
        )
            .into_response())
    }
}

/// `GET /info`, which clients (agent-chat-ui, LangGraph Studio) ask to see that a server answers
/// and what it offers: the official server's shape, with mostrador's version (no LangSmith, so
/// none of its flags).
pub async fn info() -> Json<wire::Info> {
    Json(wire::Info {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        flags: wire::InfoFlags {
            assistants: true,
            crons: true,
            langsmith: false,
            langsmith_tracing_replicas: false,
            langsmith_tracing_session_on_runs: false,
        },
        host: wire::InfoHost {
            kind: "mostrador".to_owned(),
            project_id: None,
            host_revision_id: None,
            revision_id: None,
            tenant_id: None,
        },
    })
}

pub async fn live() -> &'static str {
    "ok"
}

pub async fn ready(State(state): State<AppState>) -> (StatusCode, String) {
    if state.is_draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining".into());
    }
    if state
        .database_ready(READY_FRESH, database_answers(&state))
        .await
    {
        (StatusCode::OK, "ready".into())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "database unavailable".into(),
        )
    }
}

/// Whether the database answers with a schema this process serves, within 2 s. Anonymous: what
/// the database said goes to the log, not to whoever asks.
async fn database_answers(state: &AppState) -> bool {
    match tokio::time::timeout(
        std::time::Duration::from_secs(2),
        check_schema(state.pool(), &[]),
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
}

/// How long a readiness check of the database stands for the probes that follow it.
const READY_FRESH: std::time::Duration = std::time::Duration::from_secs(1);
