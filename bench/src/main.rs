//! `queue-bench`: the queue's throughput and latency against a real Postgres.
//!
//! Scenarios, each repeated and reported as the median:
//!
//! * `enqueue-single`: one client enqueues runs one at a time (one transaction each).
//! * `enqueue-batch`: one client enqueues runs in batches with one statement each.
//! * `claim-complete`: 16 concurrent workers drain a backlog of no-op runs, claiming up to
//!   `--claim-batch` per statement and completing each claimed batch with one statement.
//! * `claim-complete-stale`: the same, with the statistics of `runs` left as they were on the
//!   empty table (autovacuum off meanwhile), as in a new deployment's first minute: the claim's
//!   plan must not depend on them, so its ratio to `claim-complete` should be about 1.
//! * `pickup`: an idle claimer woken by NOTIFY; latency from the enqueue call to the claim.
//! * `baseline-enqueue-batch`, `baseline-claim-complete`: the same two loads in raw SQL on a
//!   minimal jobs table (one partial index, delete on completion, no thread, no event), the
//!   ceiling a Postgres queue can reach on this machine. Run side by side with ours, their ratio
//!   is what to compare across machines. (The only SQL outside `mostrador-queue`, on purpose.)
//! * `table-enqueue-batch`: the runs of `enqueue-batch` inserted straight into `runs` in raw SQL,
//!   the same columns in statements of the same size, with no thread checked, no limit and no
//!   NOTIFY: what the table and its indexes cost, the floor under `enqueue-batch`.
//! * `baseline-pickup`: the raw-SQL queue's pickup latency (insert + NOTIFY in one statement, an
//!   idle claimer on LISTEN), timed like `pickup`.
//! * `python-linear`, `python-linear1`: the Python graphs of `bench/servers/langgraph.json`
//!   executed through the worker's runner path (`worker/src/in_runner.rs`), one run after another; supersteps
//!   per second of `linear6`, milliseconds per run of `linear1` (for the cost of one superstep).
//!
//! It drops and recreates its own database (`--database-url`) on every start.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use mostrador_queue::db::{DbConfig, claimer};
use mostrador_queue::listener::Queued;
use mostrador_queue::run::ending::{End, Ending, end_many};
use mostrador_queue::run::{self, NewRun};
use mostrador_queue::thread::{self, NewThread, Thread};
use mostrador_queue::{Listener, WorkerLease, claim, schema};
use sqlx::PgPool;
use sqlx::migrate::MigrateDatabase;
use sqlx::postgres::PgPoolOptions;
use tokio::task::JoinSet;

mod baseline;
mod engine;
mod python;

pub(crate) const GRAPH: &str = "bench";

#[derive(Debug, Parser)]
struct Args {
    /// A database this benchmark may drop and recreate.
    #[arg(
        long,
        env = "BENCH_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/mostrador_bench"
    )]
    database_url: String,
    /// Scenarios to run (all by default).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "enqueue-single,enqueue-batch,baseline-enqueue-batch,claim-complete,baseline-claim-complete,pickup,baseline-pickup"
    )]
    scenarios: Vec<String>,
    /// Times each scenario runs; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    #[arg(long, default_value_t = 2_000)]
    single_runs: usize,
    #[arg(long, default_value_t = 100_000)]
    batch_runs: usize,
    #[arg(long, default_value_t = 1_000)]
    batch_size: usize,
    /// Each run's input in `enqueue-batch` and `table-enqueue-batch` (a peer's job payload, to
    /// compare the same work).
    #[arg(
        long,
        default_value = r#"{"messages": [{"role": "user", "content": "hola"}]}"#,
        value_parser = |json: &str| serde_json::from_str::<serde_json::Value>(json)
    )]
    batch_input: serde_json::Value,
    #[arg(long, default_value_t = 50_000)]
    drain_runs: usize,
    #[arg(long, default_value_t = 16)]
    workers: usize,
    /// Runs claimed (and then completed) per statement in `claim-complete`.
    #[arg(long, default_value_t = 50)]
    claim_batch: i64,
    #[arg(long, default_value_t = 500)]
    pickups: usize,
    /// Graph runs in `engine-linear` (a fifth of them in `engine-fanout`).
    #[arg(long, default_value_t = 200)]
    engine_runs: usize,
    /// The interpreter that runs the Python graphs (`python-linear`, `python-linear1`).
    #[arg(long, default_value = "python3")]
    python: std::path::PathBuf,
    /// The `langgraph.json` naming the Python graphs `linear6` and `linear1`.
    #[arg(long, default_value = "bench/servers/langgraph.json")]
    langgraph_config: std::path::PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if sqlx::Postgres::database_exists(&args.database_url).await? {
        sqlx::Postgres::force_drop_database(&args.database_url).await?;
    }
    sqlx::Postgres::create_database(&args.database_url).await?;
    let db = DbConfig {
        pool_size: args.workers as u32 + 4,
        ..DbConfig::new(&args.database_url, "queue-bench")
    };
    let pool = db.connect_lazy()?;
    schema::migrate(&pool, &[])
        .await
        .context("migrate the bench database")?;
    // The baseline gets Postgres' default settings, not the queue's connection options.
    let plain = PgPoolOptions::new()
        .max_connections(args.workers as u32 + 4)
        .connect(&args.database_url)
        .await?;

    let runner_graphs = python::PythonGraphs {
        python: &args.python,
        config: &args.langgraph_config,
    };
    println!("| scenario | median | runs |");
    println!("|---|---|---|");
    for scenario in &args.scenarios {
        let mut results = Vec::new();
        for _ in 0..args.repeat {
            reset(&pool).await?;
            results.push(match scenario.as_str() {
                "enqueue-single" => {
                    Measure::Rate(enqueue_single(&pool, args.single_runs).await?, "runs/s")
                }
                "enqueue-batch" => Measure::Rate(enqueue_batch(&pool, &args).await?, "runs/s"),
                "claim-complete" => {
                    Measure::Rate(claim_complete(&pool, &args, true).await?, "runs/s")
                }
                "claim-complete-stale" => {
                    Measure::Rate(claim_complete(&pool, &args, false).await?, "runs/s")
                }
                "table-enqueue-batch" => {
                    let threads = threads(&pool, args.batch_runs).await?;
                    Measure::Rate(
                        baseline::table_enqueue_batch(&plain, &threads, &args).await?,
                        "runs/s",
                    )
                }
                "baseline-enqueue-batch" => {
                    Measure::Rate(baseline::enqueue_batch(&plain, &args).await?, "runs/s")
                }
                "baseline-claim-complete" => {
                    Measure::Rate(baseline::claim_complete(&plain, &args).await?, "runs/s")
                }
                "baseline-pickup" => {
                    let (p50, p99) = baseline::pickup(&plain, args.pickups).await?;
                    Measure::Latency(p50, p99)
                }
                "pickup" => {
                    let (p50, p99) = pickup(&pool, args.pickups).await?;
                    Measure::Latency(p50, p99)
                }
                "engine-linear" => Measure::Rate(
                    engine::linear_supersteps_per_second(&pool, args.engine_runs).await?,
                    "supersteps/s",
                ),
                "engine-bytes" => Measure::Bytes(engine::bytes_per_superstep(&pool).await?),
                "python-linear" => {
                    let per_run = python::linear_per_run(
                        &pool,
                        &runner_graphs,
                        "linear6",
                        6,
                        args.engine_runs,
                    )
                    .await?;
                    Measure::Rate(6.0 / per_run.as_secs_f64(), "supersteps/s")
                }
                "python-linear1" => Measure::PerRun(
                    python::linear_per_run(&pool, &runner_graphs, "linear1", 1, args.engine_runs)
                        .await?,
                ),
                "engine-fanout" => {
                    Measure::PerRun(engine::fan_out_ms_per_run(&pool, args.engine_runs / 5).await?)
                }
                other => anyhow::bail!("unknown scenario {other:?}"),
            });
            eprintln!("{scenario}: {}", results.last().expect("just pushed"));
        }
        println!(
            "| {scenario} | {} | {} |",
            Measure::median(&results),
            results
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(())
}

/// One repetition's result.
enum Measure {
    /// A throughput, with its unit.
    Rate(f64, &'static str),
    /// p50 and p99.
    Latency(Duration, Duration),
    /// Milliseconds per graph run.
    PerRun(Duration),
    /// Bytes written by supersteps 1, 10 and 20 (deterministic).
    Bytes(Vec<i64>),
}

impl Measure {
    /// The repetition with the median headline figure (for latencies, the median p50 with its
    /// own p99).
    fn median(results: &[Measure]) -> &Measure {
        let mut sorted: Vec<&Measure> = results.iter().collect();
        sorted.sort_by(|a, b| a.headline().total_cmp(&b.headline()));
        sorted[sorted.len() / 2]
    }

    fn headline(&self) -> f64 {
        match self {
            Measure::Rate(rate, _) => *rate,
            Measure::Latency(p50, _) => p50.as_secs_f64(),
            Measure::PerRun(per_run) => per_run.as_secs_f64(),
            Measure::Bytes(bytes) => bytes.last().copied().unwrap_or_default() as f64,
        }
    }
}

impl std::fmt::Display for Measure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: &Duration| d.as_secs_f64() * 1e3;
        match self {
            Measure::Rate(rate, unit) => write!(f, "{rate:.0} {unit}"),
            Measure::Latency(p50, p99) => write!(f, "p50 {:.2} ms, p99 {:.2} ms", ms(p50), ms(p99)),
            Measure::PerRun(per_run) => write!(f, "{:.2} ms/run", ms(per_run)),
            Measure::Bytes(bytes) => write!(f, "{bytes:?} bytes at supersteps 1, 10, 20"),
        }
    }
}

/// Empties the queue between repetitions, so each starts from the same state.
async fn reset(pool: &PgPool) -> anyhow::Result<()> {
    baseline::reset(pool).await?;
    sqlx::raw_sql(
        "truncate mostrador.runs, mostrador.run_events, mostrador.thread_files, mostrador.threads,
                  mostrador.workers",
    )
    .execute(pool)
    .await?;
    sqlx::raw_sql("alter table mostrador.runs reset (autovacuum_enabled)")
        .execute(pool)
        .await?;
    sqlx::raw_sql("vacuum analyze mostrador.runs, mostrador.threads")
        .execute(pool)
        .await?;
    Ok(())
}

pub(crate) async fn threads(pool: &PgPool, n: usize) -> anyhow::Result<Vec<Thread>> {
    let mut threads = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(5_000) {
        threads.extend(
            thread::create_many(pool, &vec![NewThread::new(GRAPH, "bench"); chunk.len()]).await?,
        );
    }
    Ok(threads)
}

fn run_on(thread: &Thread) -> NewRun {
    NewRun {
        input: Some(serde_json::json!({"messages": [{"role": "user", "content": "hola"}]})),
        ..NewRun::new(thread.thread_id, GRAPH)
    }
}

async fn enqueue_single(pool: &PgPool, n: usize) -> anyhow::Result<f64> {
    let threads = threads(pool, n).await?;
    let start = Instant::now();
    for thread in &threads {
        run::enqueue(pool, &run_on(thread), None).await?;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

async fn enqueue_batch(pool: &PgPool, args: &Args) -> anyhow::Result<f64> {
    let threads = threads(pool, args.batch_runs).await?;
    let batches: Vec<Vec<NewRun>> = threads
        .chunks(args.batch_size)
        .map(|chunk| {
            chunk
                .iter()
                .map(|thread| NewRun {
                    input: Some(args.batch_input.clone()),
                    ..NewRun::new(thread.thread_id, GRAPH)
                })
                .collect()
        })
        .collect();
    let start = Instant::now();
    for batch in &batches {
        run::enqueue_batch(pool, batch, None).await?;
    }
    Ok(args.batch_runs as f64 / start.elapsed().as_secs_f64())
}

/// Drains the backlog; with `analyzed` false the statistics of `runs` stay the empty table's.
async fn claim_complete(pool: &PgPool, args: &Args, analyzed: bool) -> anyhow::Result<f64> {
    if !analyzed {
        sqlx::raw_sql("alter table mostrador.runs set (autovacuum_enabled = off)")
            .execute(pool)
            .await?;
    }
    let threads = threads(pool, args.drain_runs).await?;
    for chunk in threads.chunks(args.batch_size) {
        run::enqueue_batch(pool, &chunk.iter().map(run_on).collect::<Vec<_>>(), None).await?;
    }
    if analyzed {
        sqlx::raw_sql("vacuum analyze mostrador.runs")
            .execute(pool)
            .await?;
    }

    let start = Instant::now();
    let mut workers = JoinSet::new();
    for i in 0..args.workers {
        let worker = WorkerLease::new(
            format!("bench-{i}"),
            vec![GRAPH.to_owned()],
            Duration::from_secs(60),
        );
        worker.register(pool).await?;
        // Each claims on a connection of its own, as a worker process does.
        let (pool, claimer, claim_batch) = (pool.clone(), claimer(pool), args.claim_batch);
        workers.spawn(async move {
            let mut done = 0;
            loop {
                let claimed =
                    claim(&claimer, worker.worker_id, &worker.graphs, claim_batch).await?;
                if claimed.is_empty() {
                    return anyhow::Ok(done);
                }
                let ends: Vec<End> = claimed
                    .iter()
                    .map(|run| run.ending(Ending::Success))
                    .collect();
                anyhow::ensure!(
                    end_many(&mut *pool.acquire().await?, &ends)
                        .await?
                        .is_empty(),
                    "lost a lease"
                );
                done += claimed.len();
            }
        });
    }
    let mut done = 0;
    while let Some(res) = workers.join_next().await {
        done += res??;
    }
    let elapsed = start.elapsed();
    anyhow::ensure!(
        done == args.drain_runs,
        "drained {done} of {}",
        args.drain_runs
    );
    Ok(done as f64 / elapsed.as_secs_f64())
}

async fn pickup(pool: &PgPool, n: usize) -> anyhow::Result<(Duration, Duration)> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let listener = Listener::start(pool.clone(), async { stopped.await.unwrap_or(()) }).await?;
    let worker = WorkerLease::new(
        "bench-pickup",
        vec![GRAPH.to_owned()],
        Duration::from_secs(60),
    );
    worker.register(pool).await?;
    let (claimed_tx, mut claimed_rx) = tokio::sync::mpsc::channel::<Instant>(1);
    let mut queued = listener.queued();
    let claiming = {
        let (pool, claimer) = (pool.clone(), claimer(pool));
        tokio::spawn(async move {
            loop {
                let claimed = claim(&claimer, worker.worker_id, &worker.graphs, 1).await?;
                if let Some(run) = claimed.into_iter().next() {
                    let at = Instant::now();
                    run.end(&pool, Ending::Success).await?;
                    if claimed_tx.send(at).await.is_err() {
                        return anyhow::Ok(());
                    }
                    continue;
                }
                // Idle: only a notification wakes the claimer.
                if queued.recv().await.is_err() {
                    return Ok(());
                }
                while let Ok(Queued::Graph(_) | Queued::Reconnected) = queued.try_recv() {}
            }
        })
    };

    let threads = threads(pool, n).await?;
    let pool = Arc::new(pool.clone());
    let mut latencies = Vec::with_capacity(n);
    let mut after_commit = Vec::with_capacity(n);
    for thread in &threads {
        let start = Instant::now();
        run::enqueue(&*pool, &run_on(thread), None).await?;
        let committed = Instant::now();
        let claimed_at = tokio::time::timeout(Duration::from_secs(10), claimed_rx.recv())
            .await
            .context("no pickup within 10 s")?
            .context("claimer stopped")?;
        latencies.push(claimed_at - start);
        after_commit.push(claimed_at.saturating_duration_since(committed));
    }
    after_commit.sort();
    eprintln!(
        "pickup after the enqueue returned: p50 {:.2} ms, p99 {:.2} ms",
        after_commit[n / 2].as_secs_f64() * 1e3,
        after_commit[n * 99 / 100].as_secs_f64() * 1e3
    );
    drop(claimed_rx);
    let _ = stop.send(());
    listener.join().await;
    claiming.abort();
    latencies.sort();
    Ok((
        latencies[latencies.len() / 2],
        latencies[latencies.len() * 99 / 100],
    ))
}
