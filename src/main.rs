//! The `mostrador` command line: parse configuration, install tracing, call a crate's entry point
//! and turn its result into an exit code. Nothing else lives here.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use mostrador_queue::db::DbConfig;
use mostrador_queue::schema;
use sqlx::migrate::MigrateDatabase;
use tracing_subscriber::EnvFilter;

/// The database a local `mostrador` uses when none is configured.
const DATABASE_URL_DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/mostrador";

/// Serve LangGraph-style agent graphs from PostgreSQL.
#[derive(Debug, Parser)]
#[command(name = "mostrador", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply the schema migrations (connect directly, with a role that may run DDL).
    Migrate(MigrateArgs),
}

#[derive(Debug, Args)]
struct MigrateArgs {
    /// The database to migrate; created first when it does not exist.
    #[arg(long, env = "MOSTRADOR_DATABASE_URL", default_value = DATABASE_URL_DEFAULT, hide_default_value = true)]
    database_url: String,

    /// Then grant this existing role the runtime privileges only: SELECT, INSERT, UPDATE and
    /// DELETE on mostrador's tables, nothing that creates, alters or drops.
    #[arg(long, env = "MOSTRADOR_RUNTIME_ROLE", value_name = "ROLE")]
    grant_runtime_role: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Migrate(args) => migrate(args).await,
    }
}

async fn migrate(args: MigrateArgs) -> anyhow::Result<()> {
    if !sqlx::Postgres::database_exists(&args.database_url)
        .await
        .context("failed to connect to database")?
    {
        sqlx::Postgres::create_database(&args.database_url)
            .await
            .context("failed to create the database")?;
        tracing::info!("created the database");
    }
    let db = DbConfig {
        pool_size: 2,
        ..DbConfig::new(&args.database_url, "mostrador-migrate")
    };
    let pool = db.connect_lazy().context("invalid database url")?;
    schema::migrate(&pool)
        .await
        .context("failed to apply migrations")?;
    schema::check_schema(&pool).await?;
    tracing::info!(
        migrations = schema::MIGRATOR.iter().count(),
        "schema is up to date"
    );
    if let Some(role) = &args.grant_runtime_role {
        schema::grant_runtime_role(&pool, role)
            .await
            .context("failed to grant the runtime role")?;
        tracing::info!(role, "granted the runtime role its privileges");
    }
    pool.close().await;
    Ok(())
}
