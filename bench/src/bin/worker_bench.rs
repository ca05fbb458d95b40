//! `worker-bench`: worker processes of the built binary under load.
//!
//! It starts `mostrador-e2e worker` processes (the `mostrador` command line serving the test
//! graphs; build it with `cargo build --release -p mostrador-tests --bin mostrador-e2e`) against
//! its own database, which it drops and recreates on every start.
//!
//! Scenarios:
//!
//! * `throughput`: 2 worker processes (16 runs each) drain a backlog of 1-superstep and of
//!   6-superstep runs of no-op nodes; runs/s and supersteps/s. Beside it, `engine-only`: the same
//!   graphs run by the engine in this process on the fenced Postgres checkpointer, 32 at a time,
//!   with no claim, no events and no transitions: what the queue costs on top of the engine.
//! * `pickup`: one idle worker; from the enqueue call to the first event (its NOTIFY) of a run
//!   a client streams, p50 and p99, one run at a time.
//! * `drain`: one worker with 16 runs in flight whose supersteps take S; SIGTERM to exit.
//! * `memory`: one worker's RSS with 0, 1, 100 and 1,000 runs parked in a sleeping node.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use mostrador_graph::stream::discard;
use mostrador_graph::{
    Command as Update, Graph, Reducer, RunControl, RunInput, RunOptions, START, StateGraph,
};
use mostrador_queue::db::DbConfig;
use mostrador_queue::listener::EVENTS_CHANNEL;
use mostrador_queue::run::{NewRun, enqueue, enqueue_batch};
use mostrador_queue::thread::{NewThread, create_many};
use mostrador_queue::{PgCheckpointer, WorkerLease, claim, schema};
use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::migrate::MigrateDatabase;
use sqlx::postgres::PgListener;
use tokio::process::{Child, Command};
use tokio::task::JoinSet;

#[derive(Debug, Parser)]
struct Args {
    /// A database this benchmark may drop and recreate.
    #[arg(
        long,
        env = "BENCH_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/mostrador_worker_bench"
    )]
    database_url: String,
    /// The `mostrador-e2e` binary.
    #[arg(long, default_value = "target/release/mostrador-e2e")]
    binary: PathBuf,
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "throughput,engine-only,pickup,drain,memory"
    )]
    scenarios: Vec<String>,
    /// Runs per throughput measure.
    #[arg(long, default_value_t = 3_000)]
    runs: usize,
    #[arg(long, default_value_t = 300)]
    pickups: usize,
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Superstep counts of the throughput and engine-only graphs.
    #[arg(long, value_delimiter = ',', default_value = "1,6")]
    steps: Vec<usize>,
    /// Worker processes of the throughput scenario (`--max-runs` runs at a time each), one
    /// measure per count.
    #[arg(long, value_delimiter = ',', default_value = "2")]
    workers: Vec<usize>,
    /// Runs at a time per worker process of the throughput scenario (the engine alone runs 32).
    #[arg(long, default_value_t = 16)]
    max_runs: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.binary.exists(),
        "{} is missing: cargo build --release -p mostrador-tests --bin mostrador-e2e",
        args.binary.display()
    );
    if sqlx::Postgres::database_exists(&args.database_url).await? {
        sqlx::Postgres::force_drop_database(&args.database_url).await?;
    }
    sqlx::Postgres::create_database(&args.database_url).await?;
    let pool = DbConfig {
        pool_size: 40,
        ..DbConfig::new(&args.database_url, "worker-bench")
    }
    .connect_lazy()?;
    schema::migrate(&pool, &[&mostrador_retail::MIGRATOR])
        .await
        .context("migrate")?;

    for scenario in &args.scenarios {
        match scenario.as_str() {
            "throughput" => {
                for &steps in &args.steps {
                    for &workers in &args.workers {
                        let mut rates = Vec::new();
                        for _ in 0..args.repeat {
                            reset(&pool).await?;
                            rates.push(throughput(&args, &pool, steps, workers).await?);
                        }
                        report_rate(
                            &format!("throughput {steps}-superstep, {workers} workers"),
                            steps,
                            rates,
                        );
                    }
                }
            }
            "engine-only" => {
                for &steps in &args.steps {
                    let mut rates = Vec::new();
                    for _ in 0..args.repeat {
                        reset(&pool).await?;
                        rates.push(engine_only(&pool, steps, args.runs).await?);
                    }
                    report_rate(
                        &format!("engine only {steps}-superstep, 32 at a time"),
                        steps,
                        rates,
                    );
                }
            }
            "pickup" => {
                reset(&pool).await?;
                let (p50, p99) = pickup(&args, &pool).await?;
                println!(
                    "| pickup, idle worker (enqueue → first event) | p50 {:.2} ms, p99 {:.2} ms |",
                    ms(p50),
                    ms(p99)
                );
            }
            "drain" => {
                for superstep in [
                    Duration::from_millis(100),
                    Duration::from_secs(1),
                    Duration::from_secs(5),
                ] {
                    reset(&pool).await?;
                    let took = drain(&args, &pool, superstep).await?;
                    println!(
                        "| drain, 16 runs in flight, supersteps of {:.1} s (SIGTERM → exit) | {:.0} ms |",
                        superstep.as_secs_f64(),
                        ms(took)
                    );
                }
            }
            "memory" => {
                reset(&pool).await?;
                memory(&args, &pool).await?;
            }
            other => anyhow::bail!("unknown scenario {other:?}"),
        }
    }
    Ok(())
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn report_rate(name: &str, steps: usize, mut rates: Vec<f64>) {
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    let all: Vec<String> = rates.iter().map(|rate| format!("{rate:.0}")).collect();
    println!(
        "| {name} | {median:.0} runs/s = {:.0} supersteps/s | runs/s: {} |",
        median * steps as f64,
        all.join("; ")
    );
}

async fn reset(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::raw_sql(
        "truncate mostrador.threads, mostrador.runs, mostrador.run_events, mostrador.workers,
                  mostrador.checkpoints, mostrador.checkpoint_blobs, mostrador.checkpoint_writes cascade",
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// A worker process; killed when dropped.
struct Worker(Child);

impl Worker {
    fn start(args: &Args, name: &str, max_runs: usize) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(&args.binary)
            .arg("worker")
            .args(["--database-url", &args.database_url, "--name", name])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--max-runs", &max_runs.to_string()])
            .args(["--graphs", "bench_linear_1,bench_linear_6"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("start a worker")?;
        Ok(Self(child))
    }

    fn pid(&self) -> u32 {
        self.0.id().expect("running")
    }

    /// User + system CPU time so far.
    fn cpu_seconds(&self) -> anyhow::Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))?;
        let after_name = stat.rsplit_once(')').context("stat")?.1;
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
        Ok(ticks / 100.0)
    }

    fn rss_kib(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .context("VmRSS")
    }
}

async fn enqueue_many(pool: &PgPool, graph: &str, n: usize, input: Value) -> anyhow::Result<()> {
    let news: Vec<NewThread> = (0..n).map(|_| NewThread::new(graph, "bench")).collect();
    for chunk in news.chunks(1_000) {
        let threads = create_many(pool, chunk).await?;
        let runs: Vec<NewRun> = threads
            .iter()
            .map(|thread| NewRun {
                input: Some(input.clone()),
                ..NewRun::new(thread.thread_id, graph)
            })
            .collect();
        enqueue_batch(pool, &runs, None).await?;
    }
    // Fresh statistics, as autovacuum keeps them in a running system: on a table emptied by
    // `reset` and never analyzed, the planner expects a handful of pending runs and sorts them
    // all on every claim instead of reading the claim index in order (18 ms a claim at 5,000
    // pending, measured).
    sqlx::query("analyze mostrador.runs").execute(pool).await?;
    Ok(())
}

/// Waits until `n` runs are in `status`; a progress count, sampled every 10 ms.
async fn until_count(pool: &PgPool, status: &str, n: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let count: i64 = sqlx::query_scalar(
            "select count(*) from mostrador.runs where status = $1::mostrador.run_status",
        )
        .bind(status)
        .fetch_one(pool)
        .await?;
        if count as usize >= n {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{count} of {n} runs {status}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn throughput(
    args: &Args,
    pool: &PgPool,
    steps: usize,
    workers: usize,
) -> anyhow::Result<f64> {
    let graph = format!("bench_linear_{steps}");
    enqueue_many(pool, &graph, args.runs, json!({})).await?;
    // Each run's end is heard, not polled for: a count of runs by status every 10 ms was a scan
    // of the table, 15 % of PostgreSQL's execution, taken from the workers measured.
    let mut events = PgListener::connect_with(pool).await?;
    events.listen(EVENTS_CHANNEL).await?;
    let start = Instant::now();
    let workers = (1..=workers)
        .map(|i| Worker::start(args, &format!("w{i}"), args.max_runs))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut ended = 0;
    while ended < args.runs {
        let notification = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .context("no event within a minute")??;
        let event: Value = serde_json::from_str(notification.payload())?;
        if event["event"] == "end" {
            ended += 1;
        }
    }
    let took = start.elapsed();
    until_count(pool, "success", args.runs).await?;
    let cpu: f64 = workers.iter().map(|w| w.cpu_seconds().unwrap_or(0.0)).sum();
    eprintln!(
        "{steps}-superstep: {:.2} s wall, workers' CPU {cpu:.2} s",
        took.as_secs_f64()
    );
    drop(workers);
    Ok(args.runs as f64 / took.as_secs_f64())
}

fn linear(steps: usize) -> Graph {
    let mut graph = StateGraph::new()
        .channel("log", Reducer::Append)
        .edge(START, "n1");
    for step in 1..=steps {
        let name = format!("n{step}");
        if step > 1 {
            graph = graph.edge(format!("n{}", step - 1), name.clone());
        }
        graph = graph.node(name, |ctx| async move {
            Ok(Update::new().set("log", json!([ctx.node()])))
        });
    }
    graph.compile().expect("valid graph")
}

async fn engine_only(pool: &PgPool, steps: usize, runs: usize) -> anyhow::Result<f64> {
    let graph_id = format!("bench_linear_{steps}");
    enqueue_many(pool, &graph_id, runs, json!({})).await?;
    let worker = WorkerLease::new(
        "engine-only",
        vec![graph_id.clone()],
        Duration::from_secs(600),
    );
    worker.register(pool).await?;
    let claimed = claim(pool, worker.worker_id, &worker.graphs, runs as i64).await?;
    let graph = Arc::new(linear(steps));
    let queue = Arc::new(std::sync::Mutex::new(claimed));
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..32 {
        let (pool, graph, queue) = (pool.clone(), Arc::clone(&graph), Arc::clone(&queue));
        tasks.spawn(async move {
            loop {
                let Some(run) = queue.lock().expect("lock").pop() else {
                    return anyhow::Ok(());
                };
                let checkpointer = PgCheckpointer::fenced(pool.clone(), &run);
                graph
                    .run(
                        &checkpointer,
                        run.thread_id.0,
                        RunInput::Values(json!({})),
                        &RunOptions::default(),
                        &RunControl::new(),
                        discard(),
                    )
                    .await?;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(runs as f64 / start.elapsed().as_secs_f64())
}

async fn pickup(args: &Args, pool: &PgPool) -> anyhow::Result<(Duration, Duration)> {
    let _worker = Worker::start(args, "w1", 16)?;
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(EVENTS_CHANNEL).await?;
    let threads = create_many(
        pool,
        &(0..args.pickups + 20)
            .map(|_| NewThread::new("bench_linear_1", "bench"))
            .collect::<Vec<_>>(),
    )
    .await?;
    let mut samples = Vec::new();
    for (i, thread) in threads.iter().enumerate() {
        // As `runs.stream` creates it: its first event is written at once.
        let new = NewRun {
            streamed: true,
            ..NewRun::new(thread.thread_id, "bench_linear_1")
        };
        let start = Instant::now();
        let run_id = enqueue(pool, &new, None).await?.run.run_id.0.to_string();
        let mut first = None;
        // The first event of the run marks the pickup; its `end` frees the idle worker again.
        loop {
            let notification = tokio::time::timeout(Duration::from_secs(10), listener.recv())
                .await
                .context("no event within 10 s")??;
            if !notification.payload().contains(&run_id) {
                continue;
            }
            first.get_or_insert_with(|| start.elapsed());
            if notification.payload().contains("\"end\"") {
                break;
            }
        }
        // The first runs warm the worker's connections up.
        if i >= 20 {
            samples.push(first.expect("an event arrived"));
        }
    }
    samples.sort();
    Ok((
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
    ))
}

async fn drain(args: &Args, pool: &PgPool, superstep: Duration) -> anyhow::Result<Duration> {
    let mut worker = Worker::start(args, "w1", 16)?;
    enqueue_many(
        pool,
        "bench_linear_6",
        16,
        json!({"delay_ms": superstep.as_millis() as u64}),
    )
    .await?;
    until_count(pool, "running", 16).await?;
    // Land the SIGTERM somewhere inside a superstep.
    tokio::time::sleep(superstep / 3).await;
    let start = Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &worker.pid().to_string()])
        .status()?;
    anyhow::ensure!(killed.success(), "SIGTERM");
    let status = worker.0.wait().await?;
    let took = start.elapsed();
    anyhow::ensure!(status.success(), "the worker exited with {status}");
    Ok(took)
}

async fn memory(args: &Args, pool: &PgPool) -> anyhow::Result<()> {
    let worker = Worker::start(args, "w1", 1_000)?;
    // One run through first, so connections and code are warm.
    enqueue_many(pool, "bench_linear_1", 1, json!({})).await?;
    until_count(pool, "success", 1).await?;
    let idle = worker.rss_kib()?;
    println!(
        "| memory, idle worker | RSS {:.1} MiB |",
        idle as f64 / 1024.0
    );
    let mut parked = 0;
    for n in [1, 100, 1_000] {
        enqueue_many(
            pool,
            "bench_linear_1",
            n - parked,
            json!({"delay_ms": 600_000}),
        )
        .await?;
        parked = n;
        until_count(pool, "running", n).await?;
        // Let the runs reach their sleeping node.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rss = worker.rss_kib()?;
        println!(
            "| memory, {n} runs parked | RSS {:.1} MiB, {:.1} KiB per run over idle |",
            rss as f64 / 1024.0,
            rss.saturating_sub(idle) as f64 / n as f64
        );
    }
    Ok(())
}
