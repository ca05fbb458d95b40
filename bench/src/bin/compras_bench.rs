//! `compras-bench`: the purchasing pass at scale. 5,000 references below their reorder point
//! (100 batches of 50), `max_concurrency` 24, the offline model answering each batch after a
//! simulated latency; one in-process worker executes the run as in production (claim, fenced
//! checkpoints, events). Reports the wall time against the ideal (total model latency / 24, and
//! the whole waves ⌈100 / 24⌉ × latency a fan-out cannot beat), and the checkpoint bytes the run
//! wrote.
//!
//! It drops and recreates its own database on every start.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use mostrador_graph::StreamMode;
use mostrador_model::{Model, Offline};
use mostrador_queue::db::DbConfig;
use mostrador_queue::run::{self, NewRun, RunConfig};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{RunStatus, schema};
use mostrador_worker::{Telemetry, WorkerConfig};
use serde_json::json;
use sqlx::PgPool;
use sqlx::migrate::MigrateDatabase;

#[derive(Debug, Parser)]
struct Args {
    /// A database this benchmark may drop and recreate.
    #[arg(
        long,
        env = "BENCH_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/mostrador_compras_bench"
    )]
    database_url: String,
    /// References below their reorder point.
    #[arg(long, default_value_t = 5_000)]
    references: usize,
    #[arg(long, default_value_t = 50)]
    batch_size: usize,
    #[arg(long, default_value_t = 24)]
    max_concurrency: usize,
    /// The offline model's latency per call, in milliseconds.
    #[arg(long, value_delimiter = ',', default_value = "200,1000")]
    latency_ms: Vec<u64>,
    #[arg(long, default_value_t = 3)]
    repeat: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if sqlx::Postgres::database_exists(&args.database_url).await? {
        sqlx::Postgres::force_drop_database(&args.database_url).await?;
    }
    sqlx::Postgres::create_database(&args.database_url).await?;
    let pool = DbConfig {
        pool_size: 32,
        ..DbConfig::new(&args.database_url, "compras-bench")
    }
    .connect_lazy()?;
    schema::migrate(&pool, &[&mostrador_retail::MIGRATOR]).await?;
    load(&pool, args.references).await?;

    let batches = args.references.div_ceil(args.batch_size);
    println!(
        "compras: {} references, {batches} batches of {}, max_concurrency {}",
        args.references, args.batch_size, args.max_concurrency
    );
    println!(
        "{:>10} {:>9} {:>11} {:>11} {:>9} {:>10} {:>12}",
        "latency", "wall", "ideal", "waves", "wall/ideal", "wall/waves", "checkpoint"
    );
    for &latency_ms in &args.latency_ms {
        for _ in 0..args.repeat {
            let latency = Duration::from_millis(latency_ms);
            let (wall, bytes) = pass(&pool, &args, latency).await?;
            let ideal = latency * batches as u32 / args.max_concurrency as u32;
            let waves = latency * batches.div_ceil(args.max_concurrency) as u32;
            println!(
                "{:>8}ms {:>8.2}s {:>10.2}s {:>10.2}s {:>9.2} {:>10.2} {:>10} kB",
                latency_ms,
                wall.as_secs_f64(),
                ideal.as_secs_f64(),
                waves.as_secs_f64(),
                wall.as_secs_f64() / ideal.as_secs_f64(),
                wall.as_secs_f64() / waves.as_secs_f64(),
                bytes / 1024,
            );
        }
    }
    pool.close().await;
    Ok(())
}

/// 100 stores × 50 products, every reference below its reorder point (the first `references`).
async fn load(pool: &PgPool, references: usize) -> anyhow::Result<()> {
    let stores = references.div_ceil(50) as i32;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "insert into retail.stores (store_id, name, city, address, opening_hours, phone)
         select 'store-' || s, 'Store ' || s, 'City', 'Street ' || s, '10-21', '+34'
         from generate_series(1, {stores}) s;
         insert into retail.products (product_id, name, category, brand, price, pack_size)
         select 'P-' || p, 'Product ' || p, 'ropa', 'Brand', 10 + p, 1 + p % 6
         from generate_series(1, 50) p;
         insert into retail.stock (store_id, product_id, quantity, reorder_point)
         select 'store-' || s, 'P-' || p, (s + p) % 10, 10 + p % 5
         from generate_series(1, {stores}) s, generate_series(1, 50) p
         order by s, p
         limit {references};
         analyze;"
    )))
    .execute(pool)
    .await
    .context("loading the references")?;
    Ok(())
}

/// One pass: enqueue, let an in-process worker run it, wait for it to end.
async fn pass(pool: &PgPool, args: &Args, latency: Duration) -> anyhow::Result<(Duration, i64)> {
    sqlx::raw_sql("truncate retail.purchase_proposals")
        .execute(pool)
        .await?;
    let model = Model::Offline(Offline::new(
        latency,
        Duration::ZERO,
        mostrador_retail::offline::answer,
    ));
    let registry: HashMap<_, _> = [(
        "compras".to_owned(),
        mostrador_retail::graphs::compras::graph(pool, &model),
    )]
    .into();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(mostrador_worker::run(
        pool.clone(),
        WorkerConfig {
            max_runs: 1,
            ..WorkerConfig::new("bench", vec!["compras".into()])
        },
        Arc::new(registry),
        Arc::new(Telemetry::new()),
        async {
            stopped.await.unwrap_or(());
        },
    ));

    let thread = thread::create(pool, &NewThread::new("compras", "bench")).await?;
    let started = Instant::now();
    let enqueued = run::enqueue(
        pool,
        &NewRun {
            input: Some(json!({"batch_size": args.batch_size})),
            config: RunConfig::from_value(json!({"max_concurrency": args.max_concurrency}))?,
            stream_mode: vec![StreamMode::Updates],
            ..NewRun::new(thread.thread_id, "compras")
        },
        None,
    )
    .await?
    .run;
    let ended = loop {
        let now = run::get(pool, thread.thread_id, enqueued.run_id).await?;
        if !matches!(now.status, RunStatus::Pending | RunStatus::Running) {
            break now;
        }
        // A benchmark of a multi-second pass: 5 ms of polling granularity is noise.
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let wall = started.elapsed();
    anyhow::ensure!(
        ended.status == RunStatus::Success,
        "the pass failed: {ended:?}"
    );
    let proposals: i64 = sqlx::query_scalar("select count(*) from retail.purchase_proposals")
        .fetch_one(pool)
        .await?;
    anyhow::ensure!(
        proposals == args.references as i64,
        "{proposals} proposals for {} references",
        args.references
    );
    let bytes: i64 = sqlx::query_scalar(
        "select (select coalesce(sum(pg_column_size(c.*)), 0) from mostrador.checkpoints c where thread_id = $1)
              + (select coalesce(sum(pg_column_size(b.*)), 0) from mostrador.checkpoint_blobs b where thread_id = $1)
              + (select coalesce(sum(pg_column_size(w.*)), 0) from mostrador.checkpoint_writes w where thread_id = $1)",
    )
    .bind(thread.thread_id.0)
    .fetch_one(pool)
    .await?;
    let _ = stop.send(());
    worker.await??;
    Ok((wall, bytes))
}
