//! The dashboard: one static page (`/dashboard`, HTML and plain JavaScript embedded in the binary, no build
//! step) that reads the same authenticated api as every client, and the one route it needs that
//! no client has, `GET /queue` (the queue's depth and the live workers, for operators).
//!
//! The page asks for a token and keeps it in the tab's session storage. `mostrador dev` serves it
//! with the development token filled in ([`ApiConfig::dashboard_token`]) for a request whose
//! `Host` is this machine's loopback name; nothing else does.
//!
//! [`ApiConfig::dashboard_token`]: crate::ApiConfig::dashboard_token

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use mostrador_queue::{run, run::lease};

use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::runs::queue_error;
use crate::wire;

const PAGE: &str = include_str!("dashboard/index.html");

/// Where the page's token field takes its initial value from.
const TOKEN_SLOT: &str = r#"<meta name="mostrador-dev-token" content="">"#;

/// The page, with `token` (a development token) filled in when there is one.
pub fn page(token: Option<&str>) -> String {
    match token {
        // A JWT is base64url and dots: nothing to escape in an attribute.
        Some(token)
            if token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) =>
        {
            PAGE.replace(
                TOKEN_SLOT,
                &format!(r#"<meta name="mostrador-dev-token" content="{token}">"#),
            )
        }
        _ => PAGE.to_owned(),
    }
}

/// `GET /`: the dashboard (the development token in it only for a request to this machine).
pub async fn serve(State(state): State<AppState>, headers: axum::http::HeaderMap) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok());
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        state.dashboard(host).to_owned(),
    )
        .into_response()
}

/// `GET /queue`: pending and running runs per graph, and the live workers with their runs in
/// flight. The policy's operators only: these are counts over every tenant.
pub async fn queue(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<wire::Queue>, ApiError> {
    if !state.policy().is_operator(&caller) {
        return Err(ApiError::forbidden(
            "only the authorization policy's operators see the queue",
        ));
    }
    let depth = run::depth(state.pool()).await.map_err(queue_error)?;
    let workers = lease::live_workers(state.pool())
        .await
        .map_err(queue_error)?;
    let depth = depth
        .into_iter()
        .map(|(graph_id, status, runs)| wire::QueueDepth {
            graph_id,
            status: status.as_str(),
            runs,
        })
        .collect();
    let workers = workers
        .into_iter()
        .map(|worker| wire::Worker {
            worker_id: worker.worker_id.0,
            name: worker.name,
            graphs: worker.graphs,
            started_at: worker.started_at,
            heartbeat_at: worker.heartbeat_at,
            running: worker.running,
        })
        .collect();
    Ok(Json(wire::Queue {
        at: chrono::Utc::now(),
        depth,
        workers,
    }))
}
