//! Every route of the api, and the layers around them: request timeout, refusal while draining,
//! body limit, metrics, CORS.

use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;

use crate::app::{ApiConfig, AppState};
use crate::metrics;
use crate::openapi::{Kind, ROUTES};

/// Swagger UI at `/docs` and the OpenAPI document at `/openapi.json`, as configured: under a
/// project's own auth handlers, with the security they describe (`auth.openapi`); with its own
/// routes (`http.app`), with their paths (a FastAPI app's document's), as officially.
fn docs(config: &ApiConfig) -> utoipa_swagger_ui::SwaggerUi {
    let document = crate::openapi::document(&config.apps);
    let ui = utoipa_swagger_ui::SwaggerUi::new("/docs");
    let app_paths = config
        .custom_routes
        .as_ref()
        .and_then(|routes| routes.openapi_paths());
    if config.custom_auth.is_none() && app_paths.is_none() {
        return ui.url("/openapi.json", document);
    }
    let described = if config.custom_auth.is_some() {
        crate::openapi::with_project_security(&document, config.auth_openapi.as_ref())
    } else {
        serde_json::to_value(&document)
    };
    match described {
        Ok(mut described) => {
            for (path, item) in app_paths.into_iter().flatten() {
                described["paths"][path] = item.clone();
            }
            ui.external_url_unchecked("/openapi.json", described)
        }
        Err(err) => {
            tracing::error!(error = %err, "the OpenAPI document does not serialize");
            ui.url("/openapi.json", document)
        }
    }
}

/// Every route of the api ([`ROUTES`]) and of the binary's apps, wrapped as its [`Kind`] says.
pub fn router(state: AppState, config: &ApiConfig) -> Router {
    let timeout = config.request_timeout;
    let routes = ROUTES.iter().chain(
        config
            .apps
            .iter()
            .flat_map(|app| app.routes)
            .map(|app| &app.route),
    );
    let disabled = config.disabled_routes;
    let [calls, lasting, probes] = [Kind::Call, Kind::Lasting, Kind::Probe].map(|kind| {
        routes
            .clone()
            .filter(|route| route.kind == kind && !disabled.disables(route.path))
            .fold(Router::new(), |router, route| {
                router.route(route.path, route.method_router())
            })
    });
    let limits = BodyLimits {
        input: config.body_limit,
        other: config.body_limit.min(OTHER_BODY_LIMIT),
        prefix: config.mount_prefix.clone(),
    };
    let router = calls
        .layer(axum::middleware::from_fn(move |request, next| {
            within(timeout, request, next)
        }))
        // Streams and waits last as long as their runs: no request timeout.
        .merge(lasting)
        // But no request's body may take longer than that to arrive, whatever its route.
        .layer(axum::middleware::from_fn(move |request, next| {
            let limit = limits.of(&request);
            body_within(timeout, limit, request, next)
        }))
        // Every route above refuses new work while the pod drains; the probes below answer.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            refuse_while_draining,
        ))
        .merge(probes)
        .merge(if config.public_metrics && !disabled.meta {
            crate::serve::metrics_routes()
        } else {
            Router::new()
        })
        .merge(if disabled.meta {
            Router::new()
        } else {
            Router::new().merge(docs(config))
        })
        .fallback(|| async { crate::ApiError::not_found("no such route") })
        .layer(DefaultBodyLimit::max(config.body_limit))
        // A project's own routes (`http.app`) before mostrador's, as officially.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::custom_routes::forward,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::count,
        ))
        .layer(axum::middleware::from_fn(crate::trace::traced));
    // Outermost: a browser's preflight is answered before anything asks for credentials.
    let router = match config.cors.layer(config.development_caller.is_some()) {
        Some(cors) => router.layer(cors).with_state(state.clone()),
        None => router.with_state(state.clone()),
    };
    let Some(prefix) = &config.mount_prefix else {
        return router;
    };
    // Under a prefix (`http.mount_prefix`), as the official server mounts it: every route below
    // it, the health checks at the root too (a load balancer's probes need no change). Answers
    // name paths below the prefix (`Location: /threads/...`), which clients join to their base
    // URL, the prefix in it.
    let probes = ROUTES
        .iter()
        .filter(|route| {
            route.kind == Kind::Probe && matches!(route.path, "/" | "/ok" | "/live" | "/ready")
        })
        .fold(Router::new(), |router, route| {
            router.route(route.path, route.method_router())
        })
        .with_state(state);
    Router::new()
        .nest(prefix, router)
        .merge(probes)
        .fallback(|| async { crate::ApiError::not_found("no such route") })
}

/// The most a body of a route that carries no run's input, state's values or stored value may
/// hold (filters, metadata, configs), unless the configured limit is lower.
pub const OTHER_BODY_LIMIT: usize = 1024 * 1024;

/// The routes whose bodies carry a run's input, a state's values or a stored value: their bodies
/// may hold the configured limit (`--body-limit`); every other route's, [`OTHER_BODY_LIMIT`].
const INPUT_ROUTES: [&str; 12] = [
    "/threads/{thread_id}/runs",
    "/threads/{thread_id}/runs/stream",
    "/threads/{thread_id}/runs/wait",
    "/threads/{thread_id}/state",
    "/runs",
    "/runs/stream",
    "/runs/wait",
    "/runs/batch",
    "/runs/crons",
    "/threads/{thread_id}/runs/crons",
    "/runs/crons/{cron_id}",
    "/store/items",
];

/// The body limit of each route.
#[derive(Clone)]
struct BodyLimits {
    input: usize,
    other: usize,
    /// `http.mount_prefix`, which the matched path begins with.
    prefix: Option<String>,
}

impl BodyLimits {
    fn of(&self, request: &axum::extract::Request) -> usize {
        let path = request
            .extensions()
            .get::<axum::extract::MatchedPath>()
            .map(axum::extract::MatchedPath::as_str)
            .unwrap_or_default();
        let path = self
            .prefix
            .as_deref()
            .and_then(|prefix| path.strip_prefix(prefix))
            .unwrap_or(path);
        if INPUT_ROUTES.contains(&path) {
            self.input
        } else {
            self.other
        }
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
/// Reads the request's whole body within `timeout` (a 408 otherwise, and a 413 past `limit`),
/// before its route runs: a client that sends its body slowly holds no connection for longer,
/// be the route a stream or a wait that lasts as long as its run.
async fn body_within(
    timeout: Duration,
    limit: usize,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let (parts, body) = request.into_parts();
    match read_body(timeout, limit, body).await {
        Ok(bytes) => {
            next.run(axum::extract::Request::from_parts(
                parts,
                axum::body::Body::from(bytes),
            ))
            .await
        }
        Err(refused) => axum::response::IntoResponse::into_response(refused),
    }
}

/// A body, whole, within `timeout` and `limit`.
///
/// # Errors
///
/// A 408 past the time, a 413 past the limit, a 400 for a body cut short.
pub(crate) async fn read_body(
    timeout: Duration,
    limit: usize,
    body: axum::body::Body,
) -> Result<axum::body::Bytes, crate::ApiError> {
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        // N.B. The limit's error is http-body-util's, known here by what it says.
        Ok(Err(err)) if err.to_string().contains("length limit exceeded") => {
            Err(crate::ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is larger than {limit} bytes"),
            ))
        }
        Ok(Err(_)) => Err(crate::ApiError::bad_request(
            "the request body was cut short",
        )),
        Err(_) => Err(crate::ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!("the request body did not arrive within {timeout:?}"),
        )),
    }
}

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
