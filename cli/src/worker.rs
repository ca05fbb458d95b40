//! `mostrador worker`: claims runs of the graphs it serves and executes them, with probes and
//! metrics on an http port of its own.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use mostrador_queue::db::DbConfig;
use mostrador_queue::schema;
use mostrador_worker::config::MAX_RUNS_DEFAULT;
use mostrador_worker::{Telemetry, WorkerConfig, telemetry};

use crate::duration::parse_duration;
use crate::langgraph::PythonArgs;
use crate::model::ModelArgs;
use crate::{App, DatabaseArgs, duration, terminated};

#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    #[command(flatten)]
    database: DatabaseArgs,

    #[command(flatten)]
    model: ModelArgs,

    /// The graphs to claim runs of, comma-separated [default: every graph of this binary].
    #[arg(long, env = "MOSTRADOR_GRAPHS", value_delimiter = ',')]
    graphs: Vec<String>,

    /// This worker's name, for people [default: $HOSTNAME, the pod name].
    #[arg(long, env = "MOSTRADOR_WORKER_NAME")]
    name: Option<String>,

    /// Runs executing at most (as many more may wait for their endings to commit).
    #[arg(long, env = "MOSTRADOR_MAX_RUNS", default_value_t = MAX_RUNS_DEFAULT)]
    max_runs: usize,

    /// Tasks of a superstep at once, for runs whose config sets no max_concurrency, and the most
    /// a run's may ask for (so model calls in flight are at most max runs × this) [default: the
    /// engine's, 16, for the Rust graphs; Python runs are bounded only when this is set].
    #[arg(long, env = "MOSTRADOR_MAX_CONCURRENCY")]
    max_concurrency: Option<usize>,

    /// How long the worker's runs stay its own without a heartbeat (e.g. 60s, 500ms, 2m) [default: 60s].
    #[arg(long, env = "MOSTRADOR_LEASE", value_parser = parse_duration)]
    lease: Option<Duration>,

    /// How often leases are renewed; at most a third of the lease [default: lease / 3].
    #[arg(long, env = "MOSTRADOR_HEARTBEAT", value_parser = parse_duration)]
    heartbeat: Option<Duration>,

    /// How often to look for runs when no notification arrived [default: 1s].
    #[arg(long, env = "MOSTRADOR_POLL_INTERVAL", value_parser = parse_duration)]
    poll_interval: Option<Duration>,

    /// How often to give back the runs of workers whose lease expired [default: 10s].
    #[arg(long, env = "MOSTRADOR_SWEEP_INTERVAL", value_parser = parse_duration)]
    sweep_interval: Option<Duration>,

    /// After SIGTERM, how long runs may take to reach a superstep boundary before they are
    /// cancelled and handed back [default: 25s].
    #[arg(long, env = "MOSTRADOR_DRAIN_TIMEOUT", value_parser = parse_duration)]
    drain_timeout: Option<Duration>,

    /// The pod's terminationGracePeriodSeconds: the drain timeout must be below it [default: 30s].
    #[arg(long, env = "MOSTRADOR_GRACE_PERIOD", value_parser = parse_duration)]
    grace_period: Option<Duration>,

    /// How often to try to be the scheduler of due crons [default: 5s].
    #[arg(long, env = "MOSTRADOR_CRON_INTERVAL", value_parser = parse_duration)]
    cron_interval: Option<Duration>,

    /// Pending runs per graph above which the scheduler holds a cron's run to its next tick (the
    /// api's limit for clients' runs: the same setting).
    #[arg(long, env = "MOSTRADOR_MAX_PENDING", default_value_t = mostrador_worker::config::MAX_PENDING_DEFAULT)]
    max_pending: i64,

    /// Pending runs of one owner above which the scheduler holds their cron's run to its next
    /// tick (the api's share for a caller's runs: the same setting).
    #[arg(long, env = "MOSTRADOR_MAX_PENDING_PER_CALLER", default_value_t = mostrador_queue::run::MAX_PENDING_PER_CALLER_DEFAULT, value_parser = clap::value_parser!(i64).range(1..))]
    max_pending_per_caller: i64,

    /// End runs that take longer as `timeout` [default: 24h, as the official server; `0`: no
    /// limit].
    #[arg(long, env = "MOSTRADOR_RUN_TIMEOUT", value_parser = parse_duration)]
    run_timeout: Option<Duration>,

    /// The address of /live, /ready and /metrics.
    #[arg(long, env = "MOSTRADOR_WORKER_LISTEN", default_value = "0.0.0.0:9091")]
    listen: SocketAddr,

    /// Database connections [default: max runs + 4].
    #[arg(long, env = "MOSTRADOR_POOL_SIZE")]
    pool_size: Option<u32>,

    #[command(flatten)]
    python: PythonArgs,
}

pub(crate) async fn worker(args: WorkerArgs, graphs: App) -> anyhow::Result<()> {
    let graphs = args.python.beside(graphs);
    let model = args.model.model(graphs.offline)?;
    let db = DbConfig {
        pool_size: args.pool_size.unwrap_or(
            u32::try_from(args.max_runs)
                .unwrap_or(u32::MAX)
                .saturating_add(4),
        ),
        ..DbConfig::new(&args.database.database_url, "mostrador-worker")
    };
    let pool = db.connect_lazy().context("invalid database url")?;
    schema::check_schema(&pool, graphs.migrations)
        .await
        .context("failed to check the database schema")?;
    let registry = Arc::new((graphs.build)(&pool, &model));
    let name = args
        .name
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| format!("worker-{}", std::process::id()));
    let runners = args.python.runners()?;
    mostrador_worker::store::set_quota(args.python.quota.store());
    // Rust nodes and JavaScript graphs have their store's texts embedded by the worker (a
    // Python graph's runner embeds its own).
    if !registry.is_empty()
        || runners
            .iter()
            .any(|runners| runners.language == mostrador_worker::runner::Language::JavaScript)
    {
        crate::langgraph::embed_in_the_worker(&args.python, None)?;
    }
    let mut graph_ids = args.graphs;
    if graph_ids.is_empty() {
        graph_ids = registry.keys().cloned().collect();
        graph_ids.extend(runners.iter().flat_map(|runners| runners.graphs.clone()));
        graph_ids.sort();
        graph_ids.dedup();
    }
    let defaults = WorkerConfig::new(name, graph_ids);
    let lease = args.lease.unwrap_or(defaults.lease);
    let config = WorkerConfig {
        max_runs: args.max_runs,
        lease,
        heartbeat: args.heartbeat.unwrap_or(lease / 3),
        poll_interval: args.poll_interval.unwrap_or(defaults.poll_interval),
        sweep_interval: args.sweep_interval.unwrap_or(defaults.sweep_interval),
        drain_timeout: args.drain_timeout.unwrap_or(defaults.drain_timeout),
        grace_period: args.grace_period.unwrap_or(defaults.grace_period),
        run_timeout: duration::run_timeout(args.run_timeout),
        max_concurrency: args.max_concurrency,
        cron_interval: args.cron_interval.unwrap_or(defaults.cron_interval),
        max_pending: args.max_pending,
        max_pending_per_caller: args.max_pending_per_caller,
        runners,
        ..defaults
    };
    config
        .validate(&registry)
        .map_err(|message| anyhow::anyhow!("invalid worker configuration: {message}"))?;

    let telemetry = Arc::new(Telemetry::new());
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("failed to listen on {}", args.listen))?;
    tracing::info!(addr = %listener.local_addr()?, "serving /live, /ready and /metrics");
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let http = tokio::spawn(telemetry::serve(
        listener,
        Arc::clone(&telemetry),
        pool.clone(),
        async {
            http_stopped.await.unwrap_or(());
        },
    ));

    let worked =
        mostrador_worker::run(pool.clone(), config, registry, telemetry, terminated()).await;
    let _ = stop_http.send(());
    http.await.context("the http port panicked")??;
    crate::close_after_serving(&pool).await;
    Ok(worked?)
}
