//! Every route of the api, and the layers around them: request timeout, refusal while draining,
//! body limit, metrics, CORS.

use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{get, post};

use crate::app::{ApiConfig, AppState};
use crate::{
    assistants, crons, dashboard, files, metrics, probes, runs, state, store, stream, threads,
};

/// Every route of the api.
pub fn router(state: AppState, config: &ApiConfig) -> Router {
    let timeout = config.request_timeout;
    let router = Router::new()
        .route("/assistants", post(assistants::configured::create))
        .route("/assistants/search", post(assistants::search))
        .route("/assistants/count", post(assistants::configured::count))
        .route(
            "/assistants/{assistant_id}",
            get(assistants::get)
                .patch(assistants::configured::update)
                .delete(assistants::configured::delete),
        )
        .route(
            "/assistants/{assistant_id}/versions",
            post(assistants::configured::versions),
        )
        .route(
            "/assistants/{assistant_id}/latest",
            post(assistants::configured::set_latest),
        )
        .route("/assistants/{assistant_id}/graph", get(assistants::graph))
        .route(
            "/assistants/{assistant_id}/schemas",
            get(assistants::schemas),
        )
        .route(
            "/assistants/{assistant_id}/subgraphs",
            get(assistants::subgraphs),
        )
        .route(
            "/assistants/{assistant_id}/subgraphs/{namespace}",
            get(assistants::subgraph),
        )
        .route("/threads", post(threads::create))
        .route("/threads/search", post(threads::search))
        .route("/threads/count", post(threads::count))
        .route("/threads/prune", post(threads::prune))
        .route("/threads/{thread_id}/copy", post(threads::copy))
        .route("/threads/{thread_id}/files", get(files::list))
        .route("/threads/{thread_id}/files/content", get(files::read))
        .route(
            "/threads/{thread_id}",
            get(threads::get)
                .patch(threads::update)
                .delete(threads::delete),
        )
        .route(
            "/threads/{thread_id}/state",
            get(state::get).post(state::update),
        )
        .route(
            "/threads/{thread_id}/state/{checkpoint_id}",
            get(state::get_at),
        )
        .route(
            "/threads/{thread_id}/state/checkpoint",
            post(state::post_at),
        )
        .route(
            "/threads/{thread_id}/history",
            get(state::history_get).post(state::history),
        )
        .route(
            "/threads/{thread_id}/runs",
            get(runs::list).post(runs::create),
        )
        .route(
            "/threads/{thread_id}/runs/{run_id}",
            get(runs::get).delete(runs::delete),
        )
        .route("/runs/crons", post(crons::create))
        .route("/runs/crons/search", post(crons::search))
        .route("/runs/crons/count", post(crons::count))
        .route(
            "/runs/crons/{cron_id}",
            get(crons::get).patch(crons::update).delete(crons::delete),
        )
        .route(
            "/threads/{thread_id}/runs/crons",
            post(crons::create_for_thread),
        )
        .route("/runs", post(runs::create_stateless))
        .route("/runs/batch", post(runs::batch))
        .route("/runs/cancel", post(runs::cancel_many))
        .route("/runs/recent", get(runs::recent))
        .route(
            "/store/items",
            get(store::get).put(store::put).delete(store::delete),
        )
        .route("/store/items/search", post(store::search))
        .route("/store/namespaces", post(store::namespaces))
        .route("/queue", get(dashboard::queue))
        .merge(
            config
                .apps
                .iter()
                .fold(Router::new(), |routes, app| routes.merge((app.router)())),
        )
        .layer(axum::middleware::from_fn(move |request, next| {
            within(timeout, request, next)
        }))
        // Streams and waits last as long as their runs: no request timeout.
        .route("/runs/stream", post(runs::stream_stateless))
        .route("/runs/wait", post(runs::wait_stateless))
        .route(
            "/threads/{thread_id}/runs/stream",
            post(runs::create_and_stream),
        )
        .route(
            "/threads/{thread_id}/runs/wait",
            post(runs::create_and_wait),
        )
        .route(
            "/threads/{thread_id}/runs/{run_id}/stream",
            get(runs::join_stream),
        )
        .route("/threads/{thread_id}/runs/{run_id}/join", get(runs::join))
        .route("/threads/{thread_id}/stream", get(stream::thread::join))
        .route(
            "/threads/{thread_id}/runs/{run_id}/cancel",
            post(runs::cancel),
        )
        // Every route above refuses new work while the pod drains; the probes below answer.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            refuse_while_draining,
        ))
        .route("/", get(dashboard::serve))
        .route("/ok", get(probes::ok))
        .route("/info", get(probes::info))
        .route("/live", get(probes::live))
        .route("/ready", get(probes::ready))
        .merge(if config.public_metrics {
            crate::serve::metrics_routes()
        } else {
            Router::new()
        })
        .merge(
            utoipa_swagger_ui::SwaggerUi::new("/docs")
                .url("/openapi.json", crate::openapi::document(&config.apps)),
        )
        .fallback(|| async { crate::ApiError::new(StatusCode::NOT_FOUND, "no such route") })
        .layer(DefaultBodyLimit::max(config.body_limit))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::count,
        ))
        .layer(axum::middleware::from_fn(crate::trace::traced));
    // Outermost: a browser's preflight is answered before anything asks for credentials.
    match config.cors.layer() {
        Some(cors) => router.layer(cors).with_state(state),
        None => router.with_state(state),
    }
}

/// Answers 503 with `Retry-After` once the pod drains: the load balancer sends new requests to
/// another pod (probes stay outside this layer).
async fn refuse_while_draining(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if state.is_draining() {
        return crate::ApiError {
            retry_after: Some(1),
            ..crate::ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "this server is shutting down; try again",
            )
        }
        .into_response();
    }
    next.run(request).await
}

/// Answers 503 when a (non-streaming) request takes longer than `timeout`.
async fn within(
    timeout: Duration,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match tokio::time::timeout(timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => crate::ApiError {
            retry_after: Some(1),
            ..crate::ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the request timed out")
        }
        .into_response(),
    }
}
