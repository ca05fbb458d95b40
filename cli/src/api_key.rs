//! `mostrador api-key`: create, list and revoke the API keys the api accepts beside JWTs
//! (`x-api-key`, or `Authorization: Bearer mostrador_…`). A key is printed once, when it is
//! created; the database keeps only its hash, so nothing can show it again.

use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use mostrador_queue::data::api_keys::{self, ApiKey, ApiKeyId, NewApiKey};
use mostrador_queue::db::DbConfig;
use mostrador_queue::schema;
use sqlx::PgPool;

use crate::DatabaseArgs;
use crate::duration::parse_duration;

#[derive(Debug, Args)]
pub(crate) struct ApiKeyArgs {
    #[command(subcommand)]
    command: ApiKeyCommand,
}

#[derive(Debug, Subcommand)]
enum ApiKeyCommand {
    /// Create a key for a caller and print it (only this once).
    Create(CreateArgs),
    /// List the keys (their ids and first characters, never the keys).
    List(ListArgs),
    /// Revoke a key: from now on it authenticates nobody.
    Revoke(RevokeArgs),
}

#[derive(Debug, Args)]
struct CreateArgs {
    #[command(flatten)]
    database: DatabaseArgs,

    /// The caller's subject (user id).
    #[arg(long)]
    sub: String,

    /// A role of the caller's (as the authorization policy names them; repeat it for several).
    #[arg(long = "role")]
    roles: Vec<String>,

    /// The caller's tenant (the retail app's store).
    #[arg(long, visible_alias = "store")]
    tenant: Option<String>,

    /// How long the key is valid (e.g. 90d, 12h) [default: until revoked].
    #[arg(long, value_parser = parse_duration)]
    expires: Option<Duration>,
}

#[derive(Debug, Args)]
struct ListArgs {
    #[command(flatten)]
    database: DatabaseArgs,
}

#[derive(Debug, Args)]
struct RevokeArgs {
    #[command(flatten)]
    database: DatabaseArgs,

    /// The key's id, as `list` shows it.
    key_id: ApiKeyId,
}

/// Runs `api-key create`, `list` or `revoke`.
pub(crate) async fn run(args: ApiKeyArgs, graphs: &crate::App) -> anyhow::Result<()> {
    let database = match &args.command {
        ApiKeyCommand::Create(CreateArgs { database, .. })
        | ApiKeyCommand::List(ListArgs { database })
        | ApiKeyCommand::Revoke(RevokeArgs { database, .. }) => database,
    };
    let db = DbConfig {
        pool_size: 1,
        ..DbConfig::new(&database.database_url, "mostrador-api-key")
    };
    let pool = db.connect_lazy().context("invalid database url")?;
    schema::check_schema(&pool, graphs.migrations)
        .await
        .context("failed to check the database schema")?;
    let done = match args.command {
        ApiKeyCommand::Create(create) => create_key(&pool, create).await,
        ApiKeyCommand::List(_) => list(&pool).await,
        ApiKeyCommand::Revoke(revoke) => revoke_key(&pool, revoke.key_id).await,
    };
    pool.close().await;
    done
}

async fn create_key(pool: &PgPool, args: CreateArgs) -> anyhow::Result<()> {
    let new = NewApiKey {
        subject: args.sub,
        roles: args.roles,
        tenant: args.tenant,
        expires_in: args.expires,
    };
    let (key, secret) = api_keys::create(pool, &new)
        .await
        .context("failed to create the key")?;
    tracing::info!(
        key_id = %key.key_id,
        subject = key.subject,
        roles = ?key.roles,
        "created an API key; it is printed only this once"
    );
    println!("{}", secret.expose());
    Ok(())
}

async fn list(pool: &PgPool) -> anyhow::Result<()> {
    let keys = api_keys::list(pool)
        .await
        .context("failed to list the keys")?;
    let now = Utc::now();
    let rows: Vec<[String; 8]> = keys.iter().map(|key| row(key, now)).collect();
    let header = [
        "KEY ID", "PREFIX", "SUBJECT", "ROLES", "TENANT", "CREATED", "EXPIRES", "STATUS",
    ]
    .map(str::to_owned);
    // In characters, as `format!` pads (the prefix ends with a three-byte `…`).
    let mut widths = header.clone().map(|title| title.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
    Ok(())
}

/// A key's line in `list`.
fn row(key: &ApiKey, now: DateTime<Utc>) -> [String; 8] {
    let time = |at: DateTime<Utc>| at.format("%Y-%m-%d %H:%M").to_string();
    let status = if key.revoked_at.is_some() {
        "revoked"
    } else if key.is_active(now) {
        "active"
    } else {
        "expired"
    };
    [
        key.key_id.to_string(),
        format!("{}…", key.key_prefix),
        key.subject.clone(),
        if key.roles.is_empty() {
            "-".into()
        } else {
            key.roles.join(",")
        },
        key.tenant.clone().unwrap_or_else(|| "-".into()),
        time(key.created_at),
        key.expires_at.map_or_else(|| "never".into(), time),
        status.into(),
    ]
}

async fn revoke_key(pool: &PgPool, key_id: ApiKeyId) -> anyhow::Result<()> {
    let key = api_keys::revoke(pool, key_id)
        .await
        .context("failed to revoke the key")?;
    println!(
        "revoked {} ({}…, {})",
        key.key_id, key.key_prefix, key.subject
    );
    Ok(())
}
