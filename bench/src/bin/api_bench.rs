//! `api-bench`: the api process of the built binary under load.
//!
//! It starts `mostrador-e2e api` (and, for `pickup`, a worker) against its own database, which it
//! drops and recreates. Requests are plain HTTP/1.1 over a new connection each (`Connection:
//! close`), so figures include connection setup.
//!
//! Scenarios:
//!
//! * `create-runs`: 32 concurrent clients create background runs on their own threads.
//! * `fanout`: 1,000 SSE subscribers to one run; the benchmark, holding the run as a worker does,
//!   appends 200 events 10 ms apart, each carrying its append time; latency append → client.
//!   Also the api's RSS before and with the subscribers connected.
//! * `pickup`: one idle worker; from the `POST /threads/{id}/runs/stream` request to the first
//!   `values` event at the client, one run at a time.
//! * `overload`: 2,000 SSE connections held open, then a burst of 5,000 run creations from 200
//!   concurrent clients against a queue limit of 2,000 pending runs: every answer is a 200 or a
//!   503 with `Retry-After` (never a 500), the api's memory is sampled throughout, and the 2,000
//!   streams still get the next event.

use mostrador_queue::run::ending::Ending;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::Parser;
use mostrador_api::auth::mint;
use mostrador_api::{AuthConfig, Caller, ClaimPaths};
use mostrador_queue::db::DbConfig;
use mostrador_queue::run::event::{self, NewEvent};
use mostrador_queue::run::{NewRun, enqueue};
use mostrador_queue::thread::{NewThread, create_many};
use mostrador_queue::{WorkerLease, claim, schema};
use serde_json::{Value, json};
use sqlx::migrate::MigrateDatabase;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::task::JoinSet;

const SECRET: &str = "api-bench-secret";

#[derive(Debug, Parser)]
struct Args {
    /// A database this benchmark may drop and recreate.
    #[arg(
        long,
        env = "BENCH_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/mostrador_api_bench"
    )]
    database_url: String,
    /// The `mostrador-e2e` binary.
    #[arg(long, default_value = "target/release/mostrador-e2e")]
    binary: PathBuf,
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "create-runs,fanout,pickup"
    )]
    scenarios: Vec<String>,
    #[arg(long, default_value_t = 5_000)]
    runs: usize,
    /// Api processes of `create-runs` (the clients spread over them), one measure per count.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    apis: Vec<usize>,
    #[arg(long, default_value_t = 1_000)]
    subscribers: usize,
    #[arg(long, default_value_t = 200)]
    pickups: usize,
    /// SSE connections held open during `overload`.
    #[arg(long, default_value_t = 2_000)]
    streams: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.binary.exists(),
        "{} is missing: cargo build --release -p mostrador-tests --bin mostrador-e2e",
        args.binary.display()
    );
    for scenario in &args.scenarios {
        match scenario.as_str() {
            "create-runs" => {
                for &apis in &args.apis {
                    let pool = fresh_database(&args).await?;
                    create_runs(&args, &pool, apis).await?;
                    pool.close().await;
                }
            }
            "fanout" => fanout(&args, &fresh_database(&args).await?).await?,
            "pickup" => pickup(&args, &fresh_database(&args).await?).await?,
            "overload" => overload(&args, &fresh_database(&args).await?).await?,
            other => anyhow::bail!("unknown scenario {other:?}"),
        }
    }
    Ok(())
}

/// The benchmark's database, dropped and made again, with the schema.
async fn fresh_database(args: &Args) -> anyhow::Result<sqlx::PgPool> {
    if sqlx::Postgres::database_exists(&args.database_url).await? {
        sqlx::Postgres::force_drop_database(&args.database_url).await?;
    }
    sqlx::Postgres::create_database(&args.database_url).await?;
    let pool = DbConfig {
        pool_size: 8,
        ..DbConfig::new(&args.database_url, "api-bench")
    }
    .connect_lazy()?;
    schema::migrate(&pool, &[&mostrador_retail::MIGRATOR])
        .await
        .context("migrate")?;
    Ok(pool)
}

/// A process of the binary; killed when dropped.
struct Process {
    child: Child,
    port: u16,
}

impl Process {
    fn start(args: &Args, command: &str, extra: &[&str]) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(&args.binary)
            .arg(command)
            .args(["--database-url", &args.database_url])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(extra)
            .env("MOSTRADOR_JWT_SECRET", SECRET)
            // Every request is one caller's: the shares that keep callers from starving each
            // other (measured by the hostile tenants' soak) are out of the way.
            .env("MOSTRADOR_MAX_PENDING_PER_CALLER", "1000000")
            .env("MOSTRADOR_MAX_STREAMS_PER_CALLER", "100000")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        Ok(Self { child, port })
    }

    async fn until_ready(&self) -> anyhow::Result<()> {
        for _ in 0..200 {
            if let Ok((200, _)) = request(self.port, "GET", "/ready", "", "").await {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        anyhow::bail!("the process never got ready")
    }

    fn rss_kib(&self) -> anyhow::Result<u64> {
        rss_kib(self.child.id().context("running")?)
    }
}

/// A process's resident memory, in KiB.
fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .context("VmRSS")
}

/// A run on a thread of its own, claimed as a worker claims it (the benchmark appends its events).
async fn held_run(
    pool: &sqlx::PgPool,
) -> anyhow::Result<(
    mostrador_queue::Thread,
    mostrador_queue::Run,
    mostrador_queue::ClaimedRun,
)> {
    let thread = create_many(
        pool,
        &[NewThread::new("bench_linear_1", "bench").tenant("bench")],
    )
    .await?
    .remove(0);
    let run = enqueue(pool, &NewRun::new(thread.thread_id, "bench_linear_1"), None)
        .await?
        .run;
    let worker = WorkerLease::new(
        "api-bench",
        vec!["bench_linear_1".into()],
        Duration::from_secs(600),
    );
    worker.register(pool).await?;
    let held = claim(pool, worker.worker_id, &worker.graphs, 1)
        .await?
        .pop()
        .context("the run")?;
    Ok((thread, run, held))
}

fn token() -> anyhow::Result<String> {
    let config = AuthConfig {
        secret: SECRET.into(),
        jwks_url: None,
        issuer: "mostrador".into(),
        audience: "mostrador".into(),
        // The retail policy's claims, which the binary reads.
        claims: ClaimPaths {
            subject: "sub".into(),
            tenant: "store".into(),
            roles: "role".into(),
        },
    };
    let caller = Caller::new("bench")
        .with_roles(["manager"])
        .in_tenant(Some("bench"));
    Ok(mint(&config, &caller, Duration::from_secs(3600))?)
}

/// One request on a new connection: status and body.
async fn request(
    port: u16,
    method: &str,
    path: &str,
    token: &str,
    body: &str,
) -> anyhow::Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .context("status")?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// Opens an SSE stream and returns its reader once the response head has been read.
async fn open_stream(
    port: u16,
    method: &str,
    path: &str,
    token: &str,
    body: &str,
) -> anyhow::Result<BufReader<TcpStream>> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        anyhow::ensure!(
            reader.read_line(&mut line).await? > 0,
            "closed before the head ended"
        );
        if line == "\r\n" {
            return Ok(reader);
        }
    }
}

/// The next `(event, data)` of an SSE stream (chunk-size lines and comments skipped); `None` once
/// the response ends (its last, empty chunk: a run's stream closes after its last event) or the
/// connection closes.
async fn next_event(reader: &mut BufReader<TcpStream>) -> anyhow::Result<Option<(String, String)>> {
    let (mut event, mut data) = (None, None);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let line = line.trim_end();
        if line == "0" {
            // The last chunk, then the empty line that ends the response.
            let mut rest = String::new();
            reader.read_line(&mut rest).await?;
            return Ok(None);
        }
        if let Some(value) = line.strip_prefix("event: ") {
            event = Some(value.to_owned());
        } else if let Some(value) = line.strip_prefix("data: ") {
            data = Some(value.to_owned());
        } else if line.is_empty()
            && let (Some(event), Some(data)) = (event.take(), data.take())
        {
            return Ok(Some((event, data)));
        }
    }
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or_default()
}

async fn create_runs(args: &Args, pool: &sqlx::PgPool, apis: usize) -> anyhow::Result<()> {
    let apis = (0..apis)
        .map(|_| Process::start(args, "api", &["--max-pending", "1000000"]))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for api in &apis {
        api.until_ready().await?;
    }
    let token = Arc::new(token()?);
    let clients = 32;
    let threads = create_many(
        pool,
        &(0..clients)
            .map(|_| NewThread::new("bench_linear_1", "bench").tenant("bench"))
            .collect::<Vec<_>>(),
    )
    .await?;
    let per_client = args.runs / clients;
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for (i, thread) in threads.into_iter().enumerate() {
        let (token, port) = (Arc::clone(&token), apis[i % apis.len()].port);
        tasks.spawn(async move {
            let path = format!("/threads/{}/runs", thread.thread_id);
            let body = r#"{"assistant_id": "bench_linear_1", "input": {}, "multitask_strategy": "enqueue"}"#;
            for _ in 0..per_client {
                let (status, answer) = request(port, "POST", &path, &token, body).await?;
                anyhow::ensure!(status == 200, "{status} {answer}");
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    let rate = (per_client * clients) as f64 / start.elapsed().as_secs_f64();
    println!(
        "| create background runs, 32 clients, {} api process{} | {rate:.0} requests/s |",
        apis.len(),
        if apis.len() == 1 { "" } else { "es" }
    );
    Ok(())
}

async fn fanout(args: &Args, pool: &sqlx::PgPool) -> anyhow::Result<()> {
    let api = Process::start(args, "api", &[])?;
    api.until_ready().await?;
    let token = Arc::new(token()?);
    let (thread, run, held) = held_run(pool).await?;

    let idle = api.rss_kib()?;
    let path = format!("/threads/{}/runs/{}/stream", thread.thread_id, run.run_id);
    let mut readers = Vec::with_capacity(args.subscribers);
    for _ in 0..args.subscribers {
        let mut reader = open_stream(api.port, "GET", &path, &token, "").await?;
        let first = next_event(&mut reader).await?.context("metadata")?;
        anyhow::ensure!(first.0 == "metadata", "{first:?}");
        readers.push(reader);
    }
    let connected = api.rss_kib()?;
    println!(
        "| SSE: {} idle subscribers | api RSS {:.1} MiB → {:.1} MiB: {:.1} KiB per connection |",
        args.subscribers,
        idle as f64 / 1024.0,
        connected as f64 / 1024.0,
        connected.saturating_sub(idle) as f64 / args.subscribers as f64
    );

    let mut clients = JoinSet::new();
    for mut reader in readers {
        clients.spawn(async move {
            let mut latencies = Vec::new();
            while let Some((_, data)) = next_event(&mut reader).await? {
                let sent: Value = serde_json::from_str(&data)?;
                let sent = sent["sent_us"].as_u64().context("sent_us")?;
                latencies.push(Duration::from_micros(now_micros().saturating_sub(sent)));
            }
            anyhow::Ok(latencies)
        });
    }
    let events = 200;
    for i in 0..events {
        event::append(
            pool,
            held.lease(),
            &[NewEvent::new(
                "custom",
                json!({"i": i, "sent_us": now_micros()}),
            )],
        )
        .await?;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    held.end(pool, Ending::Success).await?;
    let mut all = Vec::new();
    while let Some(latencies) = clients.join_next().await {
        let latencies = latencies??;
        anyhow::ensure!(
            latencies.len() == events,
            "a subscriber got {} of {events}",
            latencies.len()
        );
        all.extend(latencies);
    }
    all.sort();
    println!(
        "| SSE fan-out: {} subscribers × {events} events, append → client | p50 {:.2} ms, p99 {:.2} ms (target p99 ≤ 50 ms) |",
        args.subscribers,
        ms(percentile(&all, 50)),
        ms(percentile(&all, 99))
    );
    Ok(())
}

async fn pickup(args: &Args, pool: &sqlx::PgPool) -> anyhow::Result<()> {
    let api = Process::start(args, "api", &[])?;
    let _worker = Process::start(args, "worker", &["--graphs", "bench_linear_1"])?;
    api.until_ready().await?;
    let token = token()?;
    let threads = create_many(
        pool,
        &(0..args.pickups + 10)
            .map(|_| NewThread::new("bench_linear_1", "bench").tenant("bench"))
            .collect::<Vec<_>>(),
    )
    .await?;
    let mut samples = Vec::new();
    for (i, thread) in threads.iter().enumerate() {
        let path = format!("/threads/{}/runs/stream", thread.thread_id);
        let start = Instant::now();
        let mut reader = open_stream(
            api.port,
            "POST",
            &path,
            &token,
            r#"{"assistant_id": "bench_linear_1", "input": {}, "stream_mode": "values"}"#,
        )
        .await?;
        let mut first = None;
        while let Some((event, _)) = next_event(&mut reader).await? {
            if event == "values" && first.is_none() {
                first = Some(start.elapsed());
            }
        }
        // The first runs warm connections up.
        if i >= 10 {
            samples.push(first.context("a values event")?);
        }
    }
    samples.sort();
    println!(
        "| enqueue → first SSE event through api and worker processes, idle worker | p50 {:.2} ms, p99 {:.2} ms |",
        ms(percentile(&samples, 50)),
        ms(percentile(&samples, 99))
    );
    Ok(())
}

async fn overload(args: &Args, pool: &sqlx::PgPool) -> anyhow::Result<()> {
    let limit = 2_000;
    let api = Process::start(
        args,
        "api",
        &[
            "--max-pending",
            &limit.to_string(),
            "--max-subscribers",
            &(args.streams + 100).to_string(),
        ],
    )?;
    api.until_ready().await?;
    let token = Arc::new(token()?);
    let idle = api.rss_kib()?;

    // The streams: all on one held run, as a worker holds it.
    let (thread, run, held) = held_run(pool).await?;
    let path = format!("/threads/{}/runs/{}/stream", thread.thread_id, run.run_id);
    let mut readers = Vec::with_capacity(args.streams);
    for _ in 0..args.streams {
        let mut reader = open_stream(api.port, "GET", &path, &token, "").await?;
        let first = next_event(&mut reader).await?.context("metadata")?;
        anyhow::ensure!(first.0 == "metadata", "{first:?}");
        readers.push(reader);
    }
    let streaming = api.rss_kib()?;

    // The burst, with the api's memory sampled while it lasts.
    let clients = 200;
    let threads = create_many(
        pool,
        &(0..clients)
            .map(|_| NewThread::new("bench_linear_1", "bench").tenant("bench"))
            .collect::<Vec<_>>(),
    )
    .await?;
    let per_client = args.runs / clients;
    let peak = Arc::new(std::sync::atomic::AtomicU64::new(streaming));
    let pid = api.child.id().context("running")?;
    let sampling = tokio::spawn({
        let peak = Arc::clone(&peak);
        async move {
            loop {
                if let Ok(kib) = rss_kib(pid) {
                    peak.fetch_max(kib, std::sync::atomic::Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for thread in threads {
        let (token, port) = (Arc::clone(&token), api.port);
        tasks.spawn(async move {
            let path = format!("/threads/{}/runs", thread.thread_id);
            let body = r#"{"assistant_id": "bench_linear_1", "input": {}, "multitask_strategy": "enqueue"}"#;
            let mut statuses = Vec::with_capacity(per_client);
            for _ in 0..per_client {
                let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
                let request = format!(
                    "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                stream.write_all(request.as_bytes()).await?;
                let mut response = String::new();
                stream.read_to_string(&mut response).await?;
                let status: u16 = response
                    .split_whitespace()
                    .nth(1)
                    .and_then(|code| code.parse().ok())
                    .context("status")?;
                let retry_after = response.to_ascii_lowercase().contains("\r\nretry-after: ");
                statuses.push((status, retry_after));
            }
            anyhow::Ok(statuses)
        });
    }
    let mut answers: std::collections::BTreeMap<(u16, bool), usize> = Default::default();
    while let Some(done) = tasks.join_next().await {
        for answer in done?? {
            *answers.entry(answer).or_default() += 1;
        }
    }
    let burst = start.elapsed();
    sampling.abort();
    let after = api.rss_kib()?;
    let pending: i64 =
        sqlx::query_scalar("select count(*) from mostrador.runs where status = 'pending'")
            .fetch_one(pool)
            .await?;

    // The streams still work: every one gets the next event.
    let mut streams = JoinSet::new();
    for mut reader in readers {
        streams.spawn(async move {
            let next = next_event(&mut reader).await?.context("an event")?;
            anyhow::ensure!(next.0 == "custom", "{next:?}");
            anyhow::Ok(())
        });
    }
    event::append(
        pool,
        held.lease(),
        &[NewEvent::new("custom", json!({"after": "burst"}))],
    )
    .await?;
    let mut alive = 0;
    while let Some(done) = streams.join_next().await {
        done??;
        alive += 1;
    }
    held.end(pool, Ending::Success).await?;

    let count = |wanted: &dyn Fn(u16, bool) -> bool| -> usize {
        answers
            .iter()
            .filter(|((status, retry), _)| wanted(*status, *retry))
            .map(|(_, n)| n)
            .sum()
    };
    println!(
        "| overload: {} SSE streams open, then {} run creations from {clients} clients (queue limit {limit}) in {:.1} s | {} accepted (200), {} refused with 503 + Retry-After, {} other ({answers:?}); {pending} pending after |",
        args.streams,
        per_client * clients,
        burst.as_secs_f64(),
        count(&|s, _| s == 200),
        count(&|s, r| s == 503 && r),
        count(&|s, r| !(s == 200 || (s == 503 && r))),
    );
    println!(
        "| overload: api RSS | idle {:.1} MiB, with the streams {:.1} MiB, peak during the burst {:.1} MiB, after {:.1} MiB; {alive} of {} streams got the next event |",
        idle as f64 / 1024.0,
        streaming as f64 / 1024.0,
        peak.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1024.0,
        after as f64 / 1024.0,
        args.streams
    );
    anyhow::ensure!(
        count(&|s, r| !(s == 200 || (s == 503 && r))) == 0,
        "an answer other than 200 or 503 + Retry-After"
    );
    Ok(())
}
