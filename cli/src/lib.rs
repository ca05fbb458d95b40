//! The `mostrador` command line: parse configuration, install tracing, call a crate's entry point
//! and turn its result into an exit code; and the processes' allocator. Nothing else lives here.
//!
//! It is a library so that a binary can serve another set of graphs with the same commands: the
//! `mostrador` binary serves the built-in graphs, and the end-to-end tests build one that adds
//! graphs which record their executions (see `tests/`).

mod api_key;
mod app;
mod batch;
mod cluster;
mod dev;
mod dockerfile;
mod duration;
mod langgraph;
mod logs;
mod model;
mod retention;
mod worker;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use mostrador_api::webhooks::WebhookHosts;
use mostrador_api::{ApiConfig, AuthConfig, Caller, ClaimPaths};
use mostrador_model::{Model, Offline};
use mostrador_queue::db::DbConfig;
use mostrador_queue::schema;
use sqlx::migrate::MigrateDatabase;

pub use crate::app::App;
use crate::app::PolicyArgs;
pub use crate::cluster::binaries as postgres_binaries;
use crate::dev::DevArgs;
use crate::duration::parse_duration;
use crate::langgraph::PythonArgs;
use crate::logs::install_tracing;
use crate::retention::RetentionArgs;

/// The allocator of every process this crate starts: glibc's `malloc` and `free` took a tenth of
/// the server's CPU, and with mimalloc a run costs the server 7 to 13 % less (bench/RESULTS.md,
/// "mimalloc, measured for memory"). It keeps about 12 MiB more resident, a level that does not
/// grow; `MIMALLOC_ARENA_EAGER_COMMIT=0` trades it back (docs/operations.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The database a local `mostrador` uses when none is configured.
const DATABASE_URL_DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/mostrador";

/// Serve LangGraph-style agent graphs from PostgreSQL.
#[derive(Debug, Parser)]
#[command(name = "mostrador", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,

    /// Logs on stderr: text for people, json (one object per line, with the fields of the
    /// request or run span, its trace_id included) for a log pipeline.
    #[arg(long, global = true, env = "MOSTRADOR_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply the schema migrations (connect directly, with a role that may run DDL).
    Migrate(MigrateArgs),
    /// Claim and execute runs until SIGTERM or SIGINT, then drain and exit.
    Worker(worker::WorkerArgs),
    /// Serve the HTTP api until SIGTERM or SIGINT.
    Api(ApiArgs),
    /// Everything in one process on a local Postgres (migrations, the api, a worker for every
    /// graph), for development.
    Dev(DevArgs),
    /// Print a development token (HS256) for a caller.
    Token(TokenArgs),
    /// Create, list and revoke API keys: what clients send as `x-api-key` (the langgraph-sdk
    /// from LANGGRAPH_API_KEY) or as a bearer token, each standing for a caller as a token does.
    #[command(name = "api-key")]
    ApiKey(api_key::ApiKeyArgs),
    /// Delete whole threads idle longer than their graph's retention policy (and purge threads
    /// the api deleted): runs, events, checkpoints; one thread per transaction, in batches.
    Retention(RetentionArgs),
    /// Load the demo data of the retail graphs (stores, catalogue, stock, orders); loading it
    /// again changes nothing.
    Seed(SeedArgs),
    /// Submit one run of a graph (for a scheduler: a CronJob), wait for it, exit non-zero if it
    /// failed.
    Enqueue(batch::EnqueueArgs),
    /// Submit one run per JSON line of a file (or stdin), wait for them with a progress line,
    /// print a summary, exit non-zero if any failed.
    Batch(batch::BatchArgs),
    /// Print a Dockerfile for a worker image of a langgraph.json's Python graphs: Python,
    /// langgraph and the graphs' dependencies, the project, and the mostrador binary.
    Dockerfile(dockerfile::DockerfileArgs),
}

impl Command {
    /// The subcommand's name (the default `service.name` of its traces).
    fn name(&self) -> &'static str {
        match self {
            Command::Migrate(_) => "migrate",
            Command::Worker(_) => "worker",
            Command::Api(_) => "api",
            Command::Dev(_) => "dev",
            Command::Token(_) => "token",
            Command::ApiKey(_) => "api-key",
            Command::Retention(_) => "retention",
            Command::Seed(_) => "seed",
            Command::Enqueue(_) => "enqueue",
            Command::Batch(_) => "batch",
            Command::Dockerfile(_) => "dockerfile",
        }
    }
}

#[derive(Debug, Args)]
struct SeedArgs {
    #[command(flatten)]
    database: DatabaseArgs,
}

/// What one caller may keep: in the Store (the api's writes and the graphs' alike), and threads.
#[derive(Debug, Clone, Args)]
pub(crate) struct QuotaArgs {
    /// Items one caller may keep in the Store; a new one past it is refused (422).
    #[arg(long, env = "MOSTRADOR_STORE_ITEMS_PER_CALLER", default_value_t = 100_000, value_parser = clap::value_parser!(i64).range(1..))]
    store_items_per_caller: i64,

    /// MiB of values one caller may keep in the Store; a new item past it is refused (422).
    #[arg(long, env = "MOSTRADOR_STORE_MIB_PER_CALLER", default_value_t = 1024, value_parser = clap::value_parser!(i64).range(1..=(1 << 30)))]
    store_mib_per_caller: i64,

    /// Threads one caller may have (not deleted, stateless runs' own included); a new one past
    /// it is refused (422).
    #[arg(long, env = "MOSTRADOR_THREADS_PER_CALLER", default_value_t = 1_000_000, value_parser = clap::value_parser!(i64).range(1..))]
    threads_per_caller: i64,
}

impl QuotaArgs {
    pub(crate) fn threads(&self) -> i64 {
        self.threads_per_caller
    }

    pub(crate) fn store(&self) -> mostrador_queue::data::store::StoreQuota {
        mostrador_queue::data::store::StoreQuota {
            items: self.store_items_per_caller,
            bytes: self.store_mib_per_caller << 20,
        }
    }
}

#[derive(Debug, Args)]
struct ApiArgs {
    #[command(flatten)]
    database: DatabaseArgs,

    #[command(flatten)]
    jwt: JwtArgs,

    /// The address to serve on.
    #[arg(long, env = "MOSTRADOR_API_LISTEN", default_value = "0.0.0.0:8123")]
    listen: SocketAddr,

    /// Bodies above this many bytes get a 413, on the routes that carry a run's input, a state's
    /// values or a stored value; on the others, above 1 MiB (or this, if lower).
    #[arg(long, env = "MOSTRADOR_BODY_LIMIT", default_value_t = mostrador_api::app::BODY_LIMIT_DEFAULT)]
    body_limit: usize,

    /// Browser origins that may call the api (CORS), comma-separated: `https://chat.example.com`,
    /// `localhost` for any local port, or `*`. None by default.
    #[arg(long, env = "MOSTRADOR_CORS_ALLOW_ORIGINS", default_value = "")]
    cors_allow_origins: String,

    /// Non-streaming requests taking longer get a 503; a body (any route's) that takes longer
    /// to arrive, a 408 [default: 30s].
    #[arg(long, env = "MOSTRADOR_REQUEST_TIMEOUT", value_parser = parse_duration)]
    request_timeout: Option<Duration>,

    /// Pending runs per graph above which new runs get a 503 with Retry-After.
    #[arg(long, env = "MOSTRADOR_MAX_PENDING", default_value_t = mostrador_api::app::MAX_PENDING_DEFAULT)]
    max_pending: i64,

    /// Pending runs of one caller (a token's or key's subject; every graph) above which their new
    /// runs get a 429 with Retry-After.
    #[arg(long, env = "MOSTRADOR_MAX_PENDING_PER_CALLER", default_value_t = mostrador_queue::run::MAX_PENDING_PER_CALLER_DEFAULT, value_parser = clap::value_parser!(i64).range(1..))]
    max_pending_per_caller: i64,

    /// The furthest ahead a run may be delayed (`after_seconds`); further gets a 422.
    #[arg(long, env = "MOSTRADOR_MAX_DELAY", default_value = "366d", value_parser = parse_duration)]
    max_delay: Duration,

    /// Open SSE streams and waits (wait, join, cancel with wait) above which new ones get a 503
    /// with Retry-After.
    #[arg(long, env = "MOSTRADOR_MAX_SUBSCRIBERS", default_value_t = mostrador_api::app::MAX_SUBSCRIBERS_DEFAULT)]
    max_subscribers: usize,

    /// Open SSE streams and waits of one caller (a token's or key's subject) above which their
    /// new ones get a 429 with Retry-After.
    #[arg(long, env = "MOSTRADOR_MAX_STREAMS_PER_CALLER", default_value_t = mostrador_api::app::MAX_SUBSCRIBERS_PER_CALLER_DEFAULT)]
    max_streams_per_caller: usize,

    /// An SSE client that reads nothing this long while its buffer is full is disconnected
    /// [default: 30s].
    #[arg(long, env = "MOSTRADOR_SLOW_CLIENT_TIMEOUT", value_parser = parse_duration)]
    slow_client_timeout: Option<Duration>,

    /// Crons one caller may have, enabled or not; a creation past it gets a 422.
    #[arg(long, env = "MOSTRADOR_MAX_CRONS_PER_CALLER", default_value_t = mostrador_api::app::MAX_CRONS_PER_CALLER_DEFAULT, value_parser = clap::value_parser!(i64).range(1..))]
    max_crons_per_caller: i64,

    /// The bytes a page (a thread search, a thread's runs or history, a Store search) may hold;
    /// past it a 413 asks for a smaller page.
    #[arg(long, env = "MOSTRADOR_MAX_PAGE_BYTES", default_value_t = mostrador_api::app::MAX_PAGE_BYTES_DEFAULT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..))]
    max_page_bytes: usize,

    /// The hosts webhooks may be sent to, comma-separated: `hooks.example.com`,
    /// `*.example.com`, an address, each with `:port`, `:*` (any), or without one the default port
    /// of http or https [default: none; a run naming a webhook gets a 422].
    #[arg(long, env = "MOSTRADOR_WEBHOOK_HOSTS", default_value = "", hide_default_value = true, value_parser = parse_webhook_hosts)]
    webhook_hosts: WebhookHosts,

    /// The most supersteps a run may ask for (`config.recursion_limit`); more gets a 422.
    #[arg(long, env = "MOSTRADOR_MAX_RECURSION_LIMIT", default_value_t = mostrador_api::runs::config::RECURSION_LIMIT_MAX, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_recursion_limit: u64,

    /// The largest metadata of a thread or a run, in bytes of JSON; larger gets a 422.
    #[arg(long, env = "MOSTRADOR_MAX_METADATA_BYTES", default_value_t = mostrador_queue::METADATA_MAX_BYTES_DEFAULT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..=16 * 1024 * 1024))]
    max_metadata_bytes: usize,

    /// Where `/metrics` is served, apart from the api's routes (Prometheus scrapes it; the api's
    /// callers do not reach it) [default: not served; the chart serves it on 0.0.0.0:9092].
    #[arg(long, env = "MOSTRADOR_API_METRICS_LISTEN")]
    metrics_listen: Option<SocketAddr>,

    /// Connections served at once; past it, new ones wait in the listen backlog.
    #[arg(long, env = "MOSTRADOR_MAX_CONNECTIONS", default_value_t = mostrador_api::serve::MAX_CONNECTIONS_DEFAULT, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,

    /// How long a client may take to send a request's headers before its connection is closed.
    #[arg(long, env = "MOSTRADOR_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    header_read_timeout: Duration,

    /// Database connections.
    #[arg(long, env = "MOSTRADOR_POOL_SIZE", default_value_t = 16)]
    pool_size: u32,

    #[command(flatten)]
    python: PythonArgs,

    #[command(flatten)]
    policy: PolicyArgs,
}

/// How the api verifies tokens (and `token` mints them).
#[derive(Debug, Args)]
struct JwtArgs {
    /// The HS256 shared secret (development; `token` signs with it).
    #[arg(
        long = "jwt-secret",
        env = "MOSTRADOR_JWT_SECRET",
        hide_env_values = true
    )]
    secret: Option<String>,

    /// Verify RS256 tokens against this JWKS instead (Keycloak:
    /// https://<host>/realms/<realm>/protocol/openid-connect/certs).
    #[arg(long, env = "MOSTRADOR_JWKS_URL")]
    jwks_url: Option<String>,

    /// The issuer tokens must name (`iss`).
    #[arg(
        long = "jwt-issuer",
        env = "MOSTRADOR_JWT_ISSUER",
        default_value = "mostrador"
    )]
    issuer: String,

    /// The audience tokens must name (`aud`).
    #[arg(
        long = "jwt-audience",
        env = "MOSTRADOR_JWT_AUDIENCE",
        default_value = "mostrador"
    )]
    audience: String,
}

impl JwtArgs {
    /// With the claims where `claims` says (a policy file's `[caller]`).
    fn config(&self, claims: Option<ClaimPaths>) -> AuthConfig {
        AuthConfig {
            secret: self.secret.clone().unwrap_or_default(),
            jwks_url: self.jwks_url.clone(),
            issuer: self.issuer.clone(),
            audience: self.audience.clone(),
            claims: claims.unwrap_or_default(),
        }
    }
}

#[derive(Debug, Args)]
struct TokenArgs {
    #[command(flatten)]
    jwt: JwtArgs,

    /// The caller's subject (user id).
    #[arg(long)]
    sub: String,

    /// A role of the caller's (as the policy names them; repeat it for several).
    #[arg(long = "role")]
    roles: Vec<String>,

    /// The caller's tenant (the retail app's store).
    #[arg(long, visible_alias = "store")]
    tenant: Option<String>,

    #[command(flatten)]
    policy: PolicyArgs,

    /// How long the token is valid.
    #[arg(long, value_parser = parse_duration, default_value = "12h")]
    ttl: Duration,

    /// Sign with this user's `mostrador dev` secret (made by `dev` on its first start).
    #[arg(long, conflicts_with = "secret")]
    dev: bool,
}

fn parse_webhook_hosts(text: &str) -> Result<WebhookHosts, String> {
    WebhookHosts::parse(text)
}

#[derive(Debug, Args)]
struct DatabaseArgs {
    /// The database (PostgreSQL URL).
    #[arg(long, env = "MOSTRADOR_DATABASE_URL", default_value = DATABASE_URL_DEFAULT, hide_default_value = true)]
    database_url: String,
}

#[derive(Debug, Args)]
struct MigrateArgs {
    #[command(flatten)]
    database: DatabaseArgs,

    /// Then grant this existing role the runtime privileges only: SELECT, INSERT, UPDATE and
    /// DELETE on mostrador's tables, nothing that creates, alters or drops.
    #[arg(long, env = "MOSTRADOR_RUNTIME_ROLE", value_name = "ROLE")]
    grant_runtime_role: Option<String>,
}

/// Runs the command line with `graphs` as the graphs this binary serves.
pub fn main(graphs: App) -> ExitCode {
    let cli = Cli::parse();
    let traces = match install_tracing(&cli.log_format, cli.command.name()) {
        Ok(traces) => traces,
        Err(err) => {
            eprintln!("failed to set up tracing: {err:#}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!("failed to start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(run(cli, graphs)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
    };
    drop(runtime);
    if let Some(traces) = traces
        && let Err(err) = traces.shutdown()
    {
        eprintln!("failed to flush the last traces: {err}");
    }
    code
}

async fn run(cli: Cli, graphs: App) -> anyhow::Result<()> {
    match cli.command {
        Command::Migrate(args) => migrate(args, &graphs).await,
        Command::Worker(args) => worker::worker(args, graphs).await,
        Command::Api(args) => api(args, graphs).await,
        Command::Dev(args) => dev::dev(args, graphs).await,
        Command::Token(args) => token(&args, &graphs),
        Command::ApiKey(args) => api_key::run(args, &graphs).await,
        Command::Seed(args) => seed(&args.database.database_url, &graphs).await,
        Command::Retention(args) => retention::run(args, &graphs).await,
        Command::Enqueue(args) => batch::enqueue(args, graphs).await,
        Command::Batch(args) => batch::batch(args, graphs).await,
        Command::Dockerfile(args) => dockerfile::run(&args),
    }
}

async fn api(args: ApiArgs, graphs: App) -> anyhow::Result<()> {
    let graphs = args.python.beside(graphs);
    let db = DbConfig {
        pool_size: args.pool_size,
        ..DbConfig::new(&args.database.database_url, "mostrador-api")
    };
    let pool = db.connect_lazy().context("invalid database url")?;
    schema::check_schema(&pool, graphs.migrations)
        .await
        .context("failed to check the database schema")?;
    let policy = args.policy.load(&graphs)?;
    let mut config = ApiConfig::new(args.jwt.config(policy.claims));
    config.body_limit = args.body_limit;
    config.store_quota = args.python.quota.store();
    config.threads_per_caller = args.python.quota.threads();
    config.cors = mostrador_api::cors::Cors::parse(&args.cors_allow_origins);
    config.max_pending = args.max_pending;
    config.max_pending_per_caller = args.max_pending_per_caller;
    config.max_delay = args.max_delay;
    config.max_subscribers = args.max_subscribers;
    config.max_subscribers_per_caller = args.max_streams_per_caller;
    config.max_crons_per_caller = args.max_crons_per_caller;
    config.max_page_bytes = args.max_page_bytes;
    config.max_recursion_limit = args.max_recursion_limit;
    mostrador_queue::set_metadata_max_bytes(args.max_metadata_bytes);
    config.edge = mostrador_api::serve::Edge {
        max_connections: args.max_connections,
        header_read_timeout: args.header_read_timeout,
    };
    if let Some(timeout) = args.request_timeout {
        config.request_timeout = timeout;
    }
    if let Some(timeout) = args.slow_client_timeout {
        config.slow_client_timeout = timeout;
    }
    config.runner_graphs = args.python.graph_ids()?;
    langgraph::Project::configure(args.python.project()?, &mut config);
    langgraph::project_code(&args.python, args.policy.is_set(), &mut config).await?;
    config.policy = policy.policy;
    config.webhook_hosts = args.webhook_hosts.clone();
    config.apps = graphs.routes.to_vec();
    // The api describes the graphs and never runs a node: it needs no model.
    let registry = (graphs.build)(&pool, &Model::Offline(Offline::default()))
        .into_iter()
        .collect();
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("failed to listen on {}", args.listen))?;
    let metrics = match args.metrics_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("failed to listen on {addr}"))?,
        ),
        None => None,
    };
    mostrador_api::run(
        (listener, metrics),
        pool.clone(),
        &config,
        registry,
        terminated(),
    )
    .await?;
    close_after_serving(&pool).await;
    Ok(())
}

/// How long a server waits, once it has stopped, for the database connections it lent to come
/// back before it exits without them.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Closes a server's pool once it has stopped serving, within [`CLOSE_TIMEOUT`]: a connection
/// still lent out then (a task that outlived the server's drain) is left for the process's exit
/// to drop, and said, rather than holding the exit for ever.
pub(crate) async fn close_after_serving(pool: &sqlx::PgPool) {
    if tokio::time::timeout(CLOSE_TIMEOUT, pool.close())
        .await
        .is_err()
    {
        tracing::warn!(
            lent = pool
                .size()
                .saturating_sub(u32::try_from(pool.num_idle()).unwrap_or(u32::MAX)),
            "database connections still lent out after the server stopped: exiting without them"
        );
    }
}

async fn seed(database_url: &str, graphs: &App) -> anyhow::Result<()> {
    let Some(demo_data) = graphs.demo_data else {
        anyhow::bail!("this binary's graphs come with no demo data");
    };
    let db = DbConfig {
        pool_size: 1,
        ..DbConfig::new(database_url, "mostrador-seed")
    };
    let pool = db.connect_lazy().context("invalid database url")?;
    schema::check_schema(&pool, graphs.migrations)
        .await
        .context("failed to check the database schema")?;
    demo_data(&pool)
        .await
        .context("failed to load the demo data")?;
    tracing::info!("loaded the demo data");
    pool.close().await;
    Ok(())
}

fn token(args: &TokenArgs, graphs: &App) -> anyhow::Result<()> {
    let caller = Caller::new(&args.sub)
        .with_roles(args.roles.iter().cloned())
        .in_tenant(args.tenant.clone());
    let claims = args.policy.load(graphs)?.claims;
    let mut config = args.jwt.config(claims);
    if args.dev {
        config.secret = dev::dev_secret(false)?;
    }
    anyhow::ensure!(
        !config.secret.is_empty(),
        "minting needs the HS256 secret: --jwt-secret or MOSTRADOR_JWT_SECRET, or --dev for `mostrador dev`'s"
    );
    let token = mostrador_api::auth::mint(&config, &caller, args.ttl)?;
    println!("{token}");
    Ok(())
}

async fn migrate(args: MigrateArgs, graphs: &App) -> anyhow::Result<()> {
    let url = &args.database.database_url;
    if !sqlx::Postgres::database_exists(url)
        .await
        .context("failed to connect to database")?
    {
        sqlx::Postgres::create_database(url)
            .await
            .context("failed to create the database")?;
        tracing::info!("created the database");
    }
    let db = DbConfig {
        pool_size: 2,
        ..DbConfig::new(url, "mostrador-migrate")
    };
    let pool = db.connect_lazy().context("invalid database url")?;
    schema::migrate(&pool, graphs.migrations)
        .await
        .context("failed to apply migrations")?;
    schema::check_schema(&pool, graphs.migrations).await?;
    tracing::info!(
        migrations = schema::MIGRATOR.iter().count()
            + graphs
                .migrations
                .iter()
                .map(|app| app.iter().count())
                .sum::<usize>(),
        "schema is up to date"
    );
    if let Some(role) = &args.grant_runtime_role {
        schema::grant_runtime_role(&pool, role, graphs.schemas)
            .await
            .context("failed to grant the runtime role")?;
        tracing::info!(role, "granted the runtime role its privileges");
    }
    pool.close().await;
    Ok(())
}

/// Resolves on the first SIGTERM (Kubernetes stopping the pod) or SIGINT (Ctrl-C).
async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot listen for SIGTERM and SIGINT: stopping now");
        return;
    };
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    tracing::info!(signal = name, "shutting down");
}

#[cfg(test)]
mod tests {
    /// Every subcommand's arguments are well formed (clap checks names and groups only when a
    /// command is built: a duplicate would panic at start-up).
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    /// A task that outlived the server's drain and still holds a connection does not hold the
    /// process's exit: the pool is closed without it, within the timeout.
    #[sqlx::test]
    async fn a_server_exits_though_a_task_still_holds_a_connection(pool: sqlx::PgPool) {
        let lent = pool.acquire().await.expect("a connection");
        let started = std::time::Instant::now();
        super::close_after_serving(&pool).await;
        assert!(started.elapsed() < super::CLOSE_TIMEOUT + std::time::Duration::from_secs(2));
        drop(lent);
    }
}
