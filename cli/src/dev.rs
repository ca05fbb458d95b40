//! `mostrador dev`: migrations, the api (with the dashboard's token filled in) and a worker for
//! every graph in one process on a local Postgres (the one it is given, the server at the default
//! address, or a private cluster: `cluster`); it prints a development token and an API key for
//! the same caller.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use mostrador_api::{ApiConfig, AuthConfig, Caller};
use mostrador_queue::data::api_keys::{self, NewApiKey};
use mostrador_queue::db::DbConfig;
use mostrador_worker::{Telemetry, WorkerConfig};

use crate::app::PolicyArgs;
use crate::cluster::DevDatabase;
use crate::langgraph::{Project, PythonArgs};
use crate::model::ModelArgs;
use crate::{App, DatabaseArgs, MigrateArgs, migrate, seed, terminated};

/// The file under this user's data folder holding the secret `dev` signs its tokens with.
const DEV_SECRET_FILE: &str = "dev-jwt-secret";

/// How long the development token and API key are valid. A key outlives the process (it is a
/// row), so one pasted into a `.env` keeps working across restarts until then.
const DEV_CREDENTIAL_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

#[derive(Debug, Args)]
pub(crate) struct DevArgs {
    /// The database (PostgreSQL URL). Without one: the server at the default address
    /// (`postgres@127.0.0.1:5432`, or libpq's PGUSER, PGHOST and PGPORT) if it lets us in, else a
    /// private cluster of this user's, started with PostgreSQL's own binaries.
    #[arg(long, env = "MOSTRADOR_DATABASE_URL")]
    database_url: Option<String>,

    /// The private cluster's folder (default `$XDG_DATA_HOME/mostrador/pg`).
    #[arg(long, env = "MOSTRADOR_DATA_DIR")]
    data_dir: Option<PathBuf>,

    #[command(flatten)]
    model: ModelArgs,

    /// The api's address: loopback unless --allow-remote.
    #[arg(long, env = "MOSTRADOR_API_LISTEN", default_value = "127.0.0.1:8123")]
    listen: SocketAddr,

    /// Let `dev` listen beyond loopback. Its dashboard hands a development token to anyone who
    /// reaches it, and its tokens are signed with a development secret: only on a network that is
    /// yours alone.
    #[arg(long, env = "MOSTRADOR_DEV_ALLOW_REMOTE")]
    allow_remote: bool,

    /// Require a token or API key of every request, as `mostrador api` does (by default, on
    /// loopback, a request from this machine without one acts as the development caller, as with
    /// `langgraph dev`).
    #[arg(long, env = "MOSTRADOR_REQUIRE_CREDENTIALS")]
    require_credentials: bool,

    /// Load the demo data of the retail graphs first (as `mostrador seed`).
    #[arg(long)]
    demo_data: bool,

    /// Browser origins that may call the api (CORS): any local port and LangGraph Studio by
    /// default, so a chat UI served on this machine (agent-chat-ui) and Studio can; `*`, or a
    /// comma-separated list.
    #[arg(
        long,
        env = "MOSTRADOR_CORS_ALLOW_ORIGINS",
        default_value = "localhost,https://smith.langchain.com"
    )]
    cors_allow_origins: String,

    #[command(flatten)]
    python: PythonArgs,

    #[command(flatten)]
    policy: PolicyArgs,

    /// The hosts webhooks may be sent to, comma-separated (see `api --help`) [default: none].
    #[arg(long, env = "MOSTRADOR_WEBHOOK_HOSTS", default_value = "", hide_default_value = true, value_parser = crate::parse_webhook_hosts)]
    webhook_hosts: mostrador_api::webhooks::WebhookHosts,
}

/// Everything in one process on a local Postgres: migrations, the api, and a worker for every
/// graph; prints the URL, a development token and an API key.
pub(crate) async fn dev(args: DevArgs, graphs: App) -> anyhow::Result<()> {
    // A project mostrador would not serve as it says is refused before anything is touched.
    args.python.project()?;
    let graphs = args.python.beside(graphs);
    anyhow::ensure!(
        args.listen.ip().is_loopback() || args.allow_remote,
        "`dev` listens on loopback only ({} is not): its dashboard hands a development token to \
         anyone who reaches it. Add --allow-remote on a network that is yours alone, or run \
         `mostrador api` and `mostrador worker` for others to reach",
        args.listen
    );
    let model = args.model.model(graphs.offline)?;
    // The private cluster, if it is one, stops when `found` is dropped: at exit, or on an error.
    let (database_url, found) = match &args.database_url {
        Some(url) => (url.clone(), None),
        None => {
            let found = DevDatabase::find(args.data_dir.as_deref()).await?;
            (found.url.clone(), Some(found))
        }
    };
    migrate(
        MigrateArgs {
            database: DatabaseArgs {
                database_url: database_url.clone(),
            },
            grant_runtime_role: None,
        },
        &graphs,
    )
    .await?;
    let db = DbConfig {
        pool_size: 24,
        ..DbConfig::new(&database_url, "mostrador-dev")
    };
    let pool = db.connect_lazy().context("invalid database url")?;
    if args.demo_data {
        seed(&database_url, &graphs).await?;
    }
    let registry = (graphs.build)(&pool, &model);
    let policy = args.policy.load(&graphs)?;
    let secret = match std::env::var("MOSTRADOR_JWT_SECRET") {
        Ok(secret) => secret,
        Err(_) => dev_secret(true)?,
    };
    let auth = AuthConfig {
        secret,
        jwks_url: None,
        issuer: "mostrador".into(),
        audience: "mostrador".into(),
        claims: policy.claims.unwrap_or_default(),
    };
    // The deployment's operator: the policy's operator roles, in a tenant of its own.
    let operator = Caller::new("dev")
        .with_roles(policy.policy.operators.names().cloned())
        .in_tenant(Some("dev"));
    let token = mostrador_api::auth::mint(&auth, &operator, DEV_CREDENTIAL_TTL)?;
    let (_, api_key) = api_keys::create(
        &pool,
        &NewApiKey {
            subject: operator.subject.clone(),
            roles: operator.roles.iter().cloned().collect(),
            tenant: operator.tenant.clone(),
            expires_in: Some(DEV_CREDENTIAL_TTL),
        },
    )
    .await
    .context("failed to create the development API key")?;
    let runners = args.python.runners()?;
    mostrador_worker::store::set_quota(args.python.quota.store());
    let mut config = ApiConfig {
        dashboard_token: Some(token.clone()),
        runner_graphs: runners
            .iter()
            .flat_map(|runners| runners.graphs.clone())
            .collect(),
        cors: mostrador_api::cors::Cors::parse(&args.cors_allow_origins),
        // As `langgraph dev`: the official clients with no key (LangGraph Studio, scripts) act
        // as the development caller, from this machine only.
        development_caller: (args.listen.ip().is_loopback() && !args.require_credentials)
            .then(|| operator.clone()),
        policy: policy.policy,
        webhook_hosts: args.webhook_hosts.clone(),
        apps: graphs.routes.to_vec(),
        // On loopback only: /metrics beside the api's routes.
        public_metrics: true,
        store_quota: args.python.quota.store(),
        threads_per_caller: args.python.quota.threads(),
        ..ApiConfig::new(auth)
    };
    Project::configure(args.python.project()?, &mut config);
    crate::langgraph::project_code(&args.python, args.policy.is_set(), &mut config).await?;
    crate::langgraph::embed_in_the_worker(&args.python, config.store_index.clone())?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("failed to listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the dashboard hands an operator's development token to anyone who reaches this address");
    }
    let url = format!(
        "http://{addr}{}",
        config.mount_prefix.as_deref().unwrap_or_default()
    );

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = move || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        }
    };
    let worker = if registry.is_empty() && runners.is_empty() {
        tracing::warn!("this binary has no graphs: the api serves no assistant, no worker runs");
        None
    } else {
        let mut graph_ids: Vec<String> = registry.keys().cloned().collect();
        graph_ids.extend(config.runner_graphs.iter().cloned());
        graph_ids.sort();
        graph_ids.dedup();
        let config = WorkerConfig {
            drain_timeout: Duration::from_secs(10),
            runners,
            ..WorkerConfig::new("dev", graph_ids)
        };
        Some(tokio::spawn(mostrador_worker::run(
            pool.clone(),
            config,
            Arc::new(registry.clone()),
            Arc::new(Telemetry::new()),
            until_stopped(),
        )))
    };
    let api = tokio::spawn({
        let (pool, config, registry) =
            (pool.clone(), config.clone(), registry.into_iter().collect());
        let shutdown = until_stopped();
        async move { mostrador_api::run((listener, None), pool, &config, registry, shutdown).await }
    });

    println!("mostrador dev is running");
    match &found {
        Some(found) => println!("  database: {}", found.description),
        None => println!("  database: the one --database-url names"),
    }
    println!("  dashboard: {url}/dashboard  (the token below is filled in)");
    println!("  api:   {url}  (probes: {url}/ok, {url}/ready)");
    println!("  token: {token}");
    println!(
        "         (sub dev, tenant dev, roles {:?}: the policy's operators; valid 30 days; `mostrador token` mints others)",
        operator.roles
    );
    println!("  api key: {}", api_key.expose());
    println!(
        "         (the same caller, valid 30 days; send it as x-api-key, e.g. LANGGRAPH_API_KEY for the SDK, or as a bearer token; `mostrador api-key` manages keys)"
    );
    println!(
        "  e.g.:  curl -H 'Authorization: Bearer <token>' -X POST {url}/assistants/search -d '{{}}' -H 'Content-Type: application/json'"
    );

    terminated().await;
    let _ = stop.send(true);
    api.await.context("the api panicked")??;
    if let Some(worker) = worker {
        worker.await.context("the worker panicked")??;
    }
    crate::close_after_serving(&pool).await;
    if let Some(found) = found {
        found.close();
    }
    Ok(())
}

/// The secret `dev` signs and verifies its tokens with when `MOSTRADOR_JWT_SECRET` names none:
/// this user's own, 256 random bits made the first time (`create`) and kept in their data folder
/// (`$XDG_DATA_HOME/mostrador/dev-jwt-secret`, readable by them alone), so tokens outlive a
/// restart and a token minted for one person's `dev` is worth nothing on anyone else's.
/// `mostrador token --dev` signs with it.
pub(crate) fn dev_secret(create: bool) -> anyhow::Result<String> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;

    let path = crate::cluster::data_home()?.join(DEV_SECRET_FILE);
    match std::fs::read_to_string(&path) {
        Ok(secret) if !secret.trim().is_empty() => return Ok(secret.trim().to_owned()),
        Ok(_) => anyhow::bail!(
            "{} is empty: delete it and run `mostrador dev`",
            path.display()
        ),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound && create => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!(
                "no development secret at {} yet: run `mostrador dev` first",
                path.display()
            )
        }
        Err(err) => return Err(err).with_context(|| format!("failed to read {}", path.display())),
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|err| anyhow::anyhow!("no random bytes: {err}"))?;
    let secret: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder)
            .with_context(|| format!("failed to create {}", folder.display()))?;
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut file| file.write_all(secret.as_bytes()));
    match written {
        Ok(()) => Ok(secret),
        // Another `dev` made it first: theirs.
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => dev_secret(false),
        Err(err) => Err(err).with_context(|| format!("failed to write {}", path.display())),
    }
}
