//! The api's Prometheus metrics, served on `/metrics`.

use axum::extract::{Query, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::app::AppState;

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Open SSE streams.
    pub sse_subscribers: Gauge,
    /// Requests answered, by method and status code.
    pub requests: Family<RequestLabels, Counter>,
    pub runs_created: Counter,
    /// Runs refused because their graph's queue was over its limit.
    pub backpressure_rejections: Counter,
    /// Pending and running runs by graph, read from the database when scraped.
    pub queue_depth: Family<DepthLabels, Gauge>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DepthLabels {
    pub graph: String,
    pub status: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub method: String,
    pub status: u16,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("mostrador_api");
        let metrics = Self {
            sse_subscribers: Gauge::default(),
            requests: Family::default(),
            runs_created: Counter::default(),
            backpressure_rejections: Counter::default(),
            queue_depth: Family::default(),
            registry: Registry::default(),
        };
        registry.register(
            "sse_subscribers",
            "Open SSE streams",
            metrics.sse_subscribers.clone(),
        );
        registry.register(
            "requests",
            "Requests answered, by method and status",
            metrics.requests.clone(),
        );
        registry.register(
            "runs_created",
            "Runs enqueued through the api",
            metrics.runs_created.clone(),
        );
        registry.register(
            "backpressure_rejections",
            "Runs refused with 503 because their graph's queue was over its limit",
            metrics.backpressure_rejections.clone(),
        );
        registry.register(
            "queue_depth",
            "Pending and running runs, by graph and status (read when scraped)",
            metrics.queue_depth.clone(),
        );
        Self {
            registry,
            ..metrics
        }
    }
}

impl Metrics {
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// `/metrics`'s query: `format=json` asks for the official server's JSON snapshot of the queue.
#[derive(Debug, serde::Deserialize)]
pub struct MetricsQuery {
    format: Option<String>,
}

/// `GET /metrics`: Prometheus's text (OpenMetrics), or with `format=json` the official server's
/// JSON snapshot of the queue (`{"queue": {"n_pending", "n_running", ...}}`; any other format is
/// Prometheus's, as officially).
pub async fn serve(
    State(state): State<AppState>,
    Query(query): Query<MetricsQuery>,
) -> Result<Response, crate::ApiError> {
    if query.format.as_deref() != Some("json") {
        return Ok(prometheus(state).await.into_response());
    }
    let stats = mostrador_queue::run::stats(state.pool())
        .await
        .map_err(crate::ApiError::failed)?;
    Ok(axum::Json(serde_json::json!({
        "queue": {
            "n_pending": stats.pending,
            "n_running": stats.running,
            "pending_runs_wait_time_max_secs": stats.wait_max_secs,
            "pending_runs_wait_time_med_secs": stats.wait_median_secs,
            "pending_unblocked_runs_wait_time_max_secs": stats.unblocked_wait_max_secs,
        },
    }))
    .into_response())
}

/// The Prometheus text. The queue's depth is read from the database first (within a second; on
/// a failure the last values stand).
async fn prometheus(state: AppState) -> impl IntoResponse {
    let depth = tokio::time::timeout(
        std::time::Duration::from_secs(1),
        mostrador_queue::run::depth(state.pool()),
    )
    .await;
    match depth {
        Ok(Ok(depth)) => {
            let family = &state.metrics().queue_depth;
            family.clear();
            // Every graph shows, empty queues as 0: a chart needs the line.
            for assistant in state.assistants() {
                for status in ["pending", "running"] {
                    family
                        .get_or_create(&DepthLabels {
                            graph: assistant.graph_id.clone(),
                            status: status.into(),
                        })
                        .set(0);
                }
            }
            for (graph, status, runs) in depth {
                family
                    .get_or_create(&DepthLabels {
                        graph,
                        status: status.as_str().into(),
                    })
                    .set(runs);
            }
        }
        Ok(Err(err)) => tracing::warn!(error = %err, "reading the queue depth failed"),
        Err(_) => tracing::warn!("reading the queue depth took over a second"),
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics().encode(),
    )
}

/// Counts every answered request.
pub async fn count(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // A method outside HTTP's own is one label, whatever a client names it.
    let method = match request.method().as_str() {
        known @ ("GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS") => known,
        _ => "other",
    }
    .to_owned();
    let response = next.run(request).await;
    state
        .metrics()
        .requests
        .get_or_create(&RequestLabels {
            method,
            status: response.status().as_u16(),
        })
        .inc();
    response
}
