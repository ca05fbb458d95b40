//! The api process ([`run`]) and its HTTP edge: its connection loop (a header-read timeout, a
//! connection cap, graceful shutdown) and `/metrics`, served on a port of its own.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use mostrador_graph::Graph;
use mostrador_queue::Listener;
use tokio::net::TcpListener;

use crate::app::{ApiConfig, AppState};
use crate::metrics;

/// What the api's HTTP edge allows each connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// Connections served at once; past it, new ones wait in the listen backlog.
    pub max_connections: u32,
    /// How long a client may take to send a request's headers (a slow one holds a connection
    /// for nothing: closed past it).
    pub header_read_timeout: Duration,
}

/// Connections at once per api process when no limit is configured.
pub const MAX_CONNECTIONS_DEFAULT: u32 = 20_000;

impl Default for Edge {
    fn default() -> Self {
        Self {
            max_connections: MAX_CONNECTIONS_DEFAULT,
            header_read_timeout: Duration::from_secs(10),
        }
    }
}

/// Why the api stopped other than by its shutdown.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("failed to listen for run events: {0}")]
    Listen(#[source] mostrador_queue::Error),
    #[error("invalid auth configuration: {0}")]
    Auth(#[from] crate::AuthError),
    #[error("serving the api failed: {0}")]
    Serve(#[from] std::io::Error),
}

/// The api process: serves the api on `listener` (and `/metrics` on `metrics`, for as long as the
/// process lives) with the process's one LISTEN connection and its webhook sender, until
/// `shutdown` resolves; then it drains (streams end, new requests get 503) until its connections
/// close, and stops its sender and its LISTEN connection. `graphs`: the binary's Rust graphs,
/// which the api describes and never runs.
///
/// # Errors
///
/// The LISTEN connection could not start, the auth configuration is unusable, or serving failed.
pub async fn run(
    (listener, metrics): (TcpListener, Option<TcpListener>),
    pool: mostrador_queue::PgPool,
    config: &ApiConfig,
    graphs: BTreeMap<String, Graph>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    let (stop_listening, listening_stopped) = tokio::sync::oneshot::channel::<()>();
    let events = Listener::start(pool.clone(), async {
        listening_stopped.await.unwrap_or(());
    })
    .await
    .map_err(RunError::Listen)?;
    let state = AppState::new(pool, config, graphs, events)?;
    tracing::info!(addr = %listener.local_addr()?, "api listening");
    if let Some(metrics) = metrics {
        tracing::info!(addr = %metrics.local_addr()?, "metrics listening");
        tokio::spawn(serve_metrics(metrics, state.clone()));
    }
    let webhooks = tokio::spawn(crate::webhooks::send(state.clone(), config.webhook_retry));
    let draining = state.clone();
    serve(
        listener,
        crate::router(state, config),
        config.edge,
        async move {
            shutdown.await;
            draining.start_draining();
        },
    )
    .await?;
    // A delivery cut short is sent again by another process once its hold expires.
    webhooks.abort();
    let _ = stop_listening.send(());
    tracing::info!("api stopped");
    Ok(())
}

/// Serves `router` on `listener` until `shutdown` resolves, then until its connections close
/// (streams end when the api drains), within `edge`'s limits.
///
/// # Errors
///
/// Serving failed.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    edge: Edge,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};

    let slots = Arc::new(tokio::sync::Semaphore::new(
        usize::try_from(edge.max_connections).unwrap_or(usize::MAX),
    ));
    // Set when the api stops: each connection finishes the request it serves, then closes.
    let (stopping, stop) = tokio::sync::watch::channel(false);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(edge.header_read_timeout);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    // Out of file descriptors, or a connection reset before it was taken: wait a
                    // little rather than spin, as axum does.
                    tracing::warn!(error = %err, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        // With upgrades: the thread-centric stream protocol's WebSocket (once upgraded, a socket
        // is its session's, which ends when the api drains).
        let connection = builder
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = async { drop(stop.wait_for(|stopping| *stopping).await) } => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(err) = served {
                tracing::trace!(error = %err, "a connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    // Every connection closed: all the slots are free again.
    let _ = slots.acquire_many(edge.max_connections).await;
    Ok(())
}

/// `/metrics` alone, for the port Prometheus scrapes (the api's callers do not reach it).
pub fn metrics_router(state: AppState) -> Router {
    metrics_routes().with_state(state)
}

/// Serves [`metrics_router`] on `listener`, for as long as the process lives (Prometheus scrapes a
/// draining pod too).
///
/// # Errors
///
/// Serving failed.
pub async fn serve_metrics(listener: TcpListener, state: AppState) -> std::io::Result<()> {
    axum::serve(listener, metrics_router(state)).await
}

pub(crate) fn metrics_routes() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics::serve))
}
