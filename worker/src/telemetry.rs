//! What a worker process tells its operators: whether it is alive and ready (the probes), and
//! its Prometheus metrics, served on the worker's own HTTP port.
//!
//! * `/live`: 200 while the process runs.
//! * `/ready`: 200 while the worker claims runs and its database answers with the schema this
//!   binary embeds; 503 before it has registered, from the moment it starts draining (so
//!   Kubernetes stops counting the pod while it hands its runs back), and while the database is
//!   unreachable or on another schema. The body says which.
//! * `/metrics`: the Prometheus text format.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use mostrador_queue::PgPool;
use mostrador_queue::schema::check_schema;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

/// The probes' state and the metrics of one worker process.
#[derive(Debug)]
pub struct Telemetry {
    ready: AtomicBool,
    registry: Registry,
    pub runs_in_flight: Gauge,
    pub runs_claimed: Counter,
    /// Runs handed back by a drain (at a superstep boundary or, past the drain timeout, cancelled).
    pub runs_drained: Counter,
    /// Runs whose lease this worker lost (it was too slow to heartbeat; another worker may have
    /// them now).
    pub leases_lost: Counter,
    /// Runs of dead workers that this worker's sweeper took back.
    pub leases_swept: Counter,
    /// How long runs stayed on this worker, by graph and by how they left.
    pub run_seconds: Family<RunLabels, Histogram, fn() -> Histogram>,
    pub superstep_seconds: Family<GraphLabel, Histogram, fn() -> Histogram>,
    /// Durable checkpoint writes: `checkpoint` (end of superstep) and `writes` (a task's writes).
    pub checkpoint_write_seconds: Family<WriteLabel, Histogram, fn() -> Histogram>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunLabels {
    pub graph: String,
    pub outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GraphLabel {
    pub graph: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabel {
    pub kind: &'static str,
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new()
    }
}

impl Telemetry {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("mostrador_worker");
        let runs_in_flight = Gauge::default();
        let runs_claimed = Counter::default();
        let runs_drained = Counter::default();
        let leases_lost = Counter::default();
        let leases_swept = Counter::default();
        let run_seconds: Family<_, _, fn() -> Histogram> =
            Family::new_with_constructor(run_buckets);
        let superstep_seconds: Family<_, _, fn() -> Histogram> =
            Family::new_with_constructor(superstep_buckets);
        let checkpoint_write_seconds: Family<_, _, fn() -> Histogram> =
            Family::new_with_constructor(write_buckets);
        registry.register(
            "runs_in_flight",
            "Runs this worker executes now",
            runs_in_flight.clone(),
        );
        registry.register(
            "runs_claimed",
            "Runs this worker claimed",
            runs_claimed.clone(),
        );
        registry.register(
            "runs_drained",
            "Runs this worker handed back to the queue while draining",
            runs_drained.clone(),
        );
        registry.register(
            "leases_lost",
            "Runs whose lease this worker lost before it finished them",
            leases_lost.clone(),
        );
        registry.register(
            "leases_swept",
            "Runs of workers whose lease expired that this worker's sweeper gave back",
            leases_swept.clone(),
        );
        registry.register(
            "run_seconds",
            "Time a run spent on this worker, by graph and by how it left",
            run_seconds.clone(),
        );
        registry.register(
            "superstep_seconds",
            "Duration of a superstep, its checkpoint included",
            superstep_seconds.clone(),
        );
        registry.register(
            "checkpoint_write_seconds",
            "Latency of durable checkpoint and pending-write saves",
            checkpoint_write_seconds.clone(),
        );
        Self {
            ready: AtomicBool::new(false),
            registry,
            runs_in_flight,
            runs_claimed,
            runs_drained,
            leases_lost,
            leases_swept,
            run_seconds,
            superstep_seconds,
            checkpoint_write_seconds,
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    pub(crate) fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    pub(crate) fn observe_write(&self, kind: &'static str, took: Duration) {
        self.checkpoint_write_seconds
            .get_or_create(&WriteLabel { kind })
            .observe(took.as_secs_f64());
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// 1 ms .. ~4 h: runs (approvals wait for days, but not on a worker).
fn run_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 3.0, 16))
}

/// 0.5 ms .. ~40 min: supersteps.
fn superstep_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 3.0, 15))
}

/// 0.1 ms .. ~6 s: one durable write.
fn write_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.5, 13))
}

/// How long `/ready` waits for the database.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// The worker's HTTP port: `/live`, `/ready`, `/metrics`.
pub fn router(telemetry: Arc<Telemetry>, pool: PgPool) -> Router {
    Router::new()
        .route("/live", get(|| async { "ok" }))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .with_state((telemetry, pool))
}

/// Serves [`router`] on `listener` until `shutdown` resolves.
///
/// # Errors
///
/// Serving failed.
pub async fn serve(
    listener: TcpListener,
    telemetry: Arc<Telemetry>,
    pool: PgPool,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(telemetry, pool))
        .with_graceful_shutdown(shutdown)
        .await
}

type Probed = State<(Arc<Telemetry>, PgPool)>;

async fn ready(State((telemetry, pool)): Probed) -> (StatusCode, String) {
    let unavailable = |reason: String| (StatusCode::SERVICE_UNAVAILABLE, reason);
    if !telemetry.is_ready() {
        return unavailable("not claiming: starting or draining".into());
    }
    match tokio::time::timeout(READY_TIMEOUT, check_schema(&pool, &[])).await {
        Ok(Ok(())) => (StatusCode::OK, "ready".into()),
        Ok(Err(err)) => unavailable(format!("database: {err}")),
        Err(_) => unavailable(format!("database: no answer within {READY_TIMEOUT:?}")),
    }
}

async fn metrics(State((telemetry, _)): Probed) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        telemetry.encode(),
    )
}
