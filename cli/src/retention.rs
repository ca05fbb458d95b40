//! `mostrador retention`: one sweep of the retention policies (the chart's CronJob runs it).

use anyhow::Context;
use clap::Args;
use mostrador_queue::data::retention::{self, Sweep};
use mostrador_queue::db::DbConfig;
use mostrador_queue::schema;

use crate::DatabaseArgs;

#[derive(Debug, Args)]
pub(crate) struct RetentionArgs {
    #[command(flatten)]
    database: DatabaseArgs,

    /// Only this graph's threads (`_unbound`: threads that never ran).
    #[arg(long)]
    graph: Option<String>,

    /// Threads read per batch.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(i64).range(1..=10_000))]
    batch: i64,

    /// Print what would be deleted; change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Deletes the idle threads the policies name, in batches, or with `dry_run` lists them.
pub(crate) async fn run(args: RetentionArgs, graphs: &crate::App) -> anyhow::Result<()> {
    let db = DbConfig {
        pool_size: 2,
        ..DbConfig::new(&args.database.database_url, "mostrador-retention")
    };
    let pool = db.connect_lazy().context("invalid database url")?;
    schema::check_schema(&pool, graphs.migrations)
        .await
        .context("failed to check the database schema")?;
    let sweep = Sweep {
        graph: args.graph,
        batch: args.batch,
        dry_run: args.dry_run,
    };
    let report = retention::sweep(&pool, &sweep, |candidate| {
        println!(
            "would delete thread {} (graph {}, last active {})",
            candidate.thread_id,
            candidate.graph_id.as_deref().unwrap_or(retention::UNBOUND),
            candidate.last_activity_at.to_rfc3339()
        );
    })
    .await?;
    let rows = report.rows;
    if args.dry_run {
        println!(
            "dry run: {} threads would be deleted; nothing changed",
            report.deleted
        );
    } else {
        println!(
            "deleted {} threads ({} runs, {} events, {} checkpoints, {} blobs, {} writes); \
             skipped {} busy or touched since listed",
            report.deleted,
            rows.runs,
            rows.events,
            rows.checkpoints,
            rows.blobs,
            rows.writes,
            report.skipped
        );
    }
    pool.close().await;
    Ok(())
}
