//! The long haul: the client and the judge of `bench/chaos/run.sh`, which makes a PostgreSQL
//! cluster of its own behind PgBouncer and starts this test with their addresses. For
//! `CHAOS_SECONDS` (an hour) real processes serve runs while a fault comes every 15 to 45 s; then
//! it reports runs lost, finished supersteps repeated, streams that missed or repeated an event,
//! pickup, and the memory of every process at the start and the end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;
use uuid::Uuid;

use crate::restart::watch;
use mostrador_api::Caller;
use mostrador_api::auth::mint;

use crate::retail::retail_auth;
use crate::soak::WORKER_ARGS;
use crate::support::{Db, Worker};

const SECRET: &str = "e2e secret";
const GRAPH: &str = "e2e_linear_5";
/// How long a streamed run's client follows it at most.
const WATCH_AT_MOST: Duration = Duration::from_secs(600);
/// The clients making no run for this long fail the haul: the system stalled.
const STALL: Duration = Duration::from_secs(180);

/// The workers a fault may stop; `steady` is never stopped, so its memory compares.
const STOPPABLE: [&str; 2] = ["a", "b"];

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name}: bench/chaos/run.sh sets it"))
}

/// A small deterministic generator, so a seed replays the faults' order.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

fn worker(url: &str, name: &str) -> Worker {
    let mut args = vec![
        "--name",
        name,
        "--poll-interval",
        "200ms",
        "--sweep-interval",
        "300ms",
    ];
    args.extend_from_slice(WORKER_ARGS);
    Worker::spawn_at(url, name, "worker", &args)
}

/// A process's resident memory, in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kib| kib.trim().trim_end_matches(" kB").trim().parse().ok())
}

fn pidfile(path: &str) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// A request to the api; `None` when it could not be made or answered (the api's database is
/// restarting: the client tries again, as a person's would).
async fn call(
    api: (&'static str, u16),
    method: &str,
    path: &str,
    bearer: &str,
    body: &Value,
) -> Option<(u16, Value)> {
    let body = body.to_string();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {bearer}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let exchange = async {
        let mut socket = tokio::net::TcpStream::connect(api).await.ok()?;
        socket.write_all(request.as_bytes()).await.ok()?;
        let mut answer = Vec::new();
        socket.read_to_end(&mut answer).await.ok()?;
        let answer = String::from_utf8_lossy(&answer).into_owned();
        let status = answer.split(' ').nth(1)?.parse().ok()?;
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        Some((status, serde_json::from_str(body).unwrap_or(Value::Null)))
    };
    tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .ok()
        .flatten()
}

/// What the clients did: the runs the api acknowledged, and each streamed run's ids as received.
#[derive(Default)]
struct Clients {
    acknowledged: Vec<Uuid>,
    streams: Vec<(Uuid, Vec<i64>)>,
}

/// Creates a run every 200 ms through the api until `until`, and streams every fifth.
async fn clients(
    api: (&'static str, u16),
    until: Instant,
    seen: Arc<Mutex<Clients>>,
    refused: Arc<AtomicU64>,
) {
    // Valid for the whole haul (the retail helper's tokens last ten minutes).
    let caller = Caller::new("ana")
        .with_roles(["customer"])
        .in_tenant(Some("madrid-1"));
    let lasts = until.saturating_duration_since(Instant::now()) + Duration::from_secs(3600);
    let bearer = mint(&retail_auth(SECRET), &caller, lasts).expect("token");
    let mut watchers = Vec::new();
    let mut n = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    while Instant::now() < until {
        tick.tick().await;
        n += 1;
        let created = async {
            let (status, thread) = call(api, "POST", "/threads", &bearer, &json!({})).await?;
            (status == 200).then_some(())?;
            let thread_id = thread["thread_id"].as_str()?.to_owned();
            let body = json!({"assistant_id": GRAPH, "input": {"delay_ms": 100}});
            let path = format!("/threads/{thread_id}/runs");
            let (status, run) = call(api, "POST", &path, &bearer, &body).await?;
            (status == 200).then_some(())?;
            Some((thread_id, run["run_id"].as_str()?.parse::<Uuid>().ok()?))
        };
        let Some((thread_id, run_id)) = created.await else {
            refused.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        seen.lock().await.acknowledged.push(run_id);
        if n.is_multiple_of(5) {
            let (seen, bearer) = (Arc::clone(&seen), bearer.clone());
            watchers.push(tokio::spawn(async move {
                let path = format!("/threads/{thread_id}/runs/{run_id}/stream");
                // A stream that has not ended ten minutes on is wrong: recorded without its ids.
                let ids = tokio::time::timeout(
                    WATCH_AT_MOST,
                    watch(api, format!("Bearer {bearer}"), path),
                )
                .await
                .unwrap_or_else(|_| vec![-1]);
                seen.lock().await.streams.push((run_id, ids));
            }));
        }
    }
    for watcher in watchers {
        watcher.await.expect("watcher");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "the long haul: bench/chaos/run.sh starts it"]
async fn chaos_loses_nothing_for_an_hour() {
    let pooled = env("CHAOS_DATABASE_URL");
    let pgdata = env("CHAOS_PGDATA");
    let pg_bin = std::path::PathBuf::from(env("CHAOS_PG_BIN"));
    let pooler_ini = env("CHAOS_PGBOUNCER_INI");
    let pooler_pid = std::path::Path::new(&pooler_ini)
        .with_file_name("pgbouncer.pid")
        .display()
        .to_string();
    let seconds: u64 =
        std::env::var("CHAOS_SECONDS").map_or(3600, |s| s.parse().expect("CHAOS_SECONDS"));
    let seed: u64 = std::env::var("CHAOS_SEED").map_or_else(
        |_| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_nanos() as u64
                | 1
        },
        |s| s.parse().expect("CHAOS_SEED"),
    );
    let pool = PgPool::connect(&env("CHAOS_DIRECT_URL"))
        .await
        .expect("the cluster");
    let db = Db::new(pool).await;

    let api = Worker::spawn_at(&pooled, "api", "api", &["--jwt-secret", SECRET]);
    let steady = worker(&pooled, "steady");
    let mut stoppable: BTreeMap<&str, Worker> = STOPPABLE
        .iter()
        .map(|name| (*name, worker(&pooled, name)))
        .collect();
    api.until_ready_is(200).await;
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let seen = Arc::new(Mutex::new(Clients::default()));
    let refused = Arc::new(AtomicU64::new(0));
    let load = tokio::spawn(clients(
        api.addr(),
        until,
        Arc::clone(&seen),
        Arc::clone(&refused),
    ));

    // Memory once warm: a minute in (or a fifth of a short run).
    let warm = Duration::from_secs((seconds / 5).min(60));
    tokio::time::sleep(warm).await;
    let memory_at_start = [("api", rss_kib(api.pid)), ("steady", rss_kib(steady.pid))];

    let mut dice = Dice(seed);
    let mut progress = (0, Instant::now());
    let mut faults: BTreeMap<&str, u64> = BTreeMap::new();
    loop {
        let pause = Duration::from_secs(15 + dice.roll(31));
        if Instant::now() + pause >= until {
            break;
        }
        tokio::time::sleep(pause).await;
        let at = started.elapsed().as_secs();
        let fault = match dice.roll(4) {
            0 | 1 => {
                let name = STOPPABLE[dice.roll(2) as usize];
                let mut old = stoppable.remove(name).expect("a stoppable worker");
                let fault = if dice.roll(2) == 0 {
                    old.kill().await;
                    "sigkill a worker"
                } else {
                    old.terminate();
                    let exit = old.exit(Duration::from_secs(30)).await;
                    assert!(
                        exit.success(),
                        "{name} drains and exits 0: {exit}\n{}",
                        old.log()
                    );
                    "sigterm a worker"
                };
                stoppable.insert(name, worker(&pooled, name));
                fault
            }
            2 => {
                let restarted = tokio::process::Command::new("runuser")
                    .args(["-u", "postgres", "--"])
                    .arg(pg_bin.join("pg_ctl"))
                    .args(["-D", &pgdata, "-m", "fast", "-w", "restart", "-l"])
                    .arg(std::path::Path::new(&pgdata).with_file_name("pg.log"))
                    .stdout(std::process::Stdio::null())
                    .status()
                    .await
                    .expect("pg_ctl");
                assert!(restarted.success(), "PostgreSQL restarts");
                "restart PostgreSQL"
            }
            _ => {
                if let Some(pid) = pidfile(&pooler_pid) {
                    let _ = tokio::process::Command::new("kill")
                        .args(["-TERM", &pid.to_string()])
                        .status()
                        .await;
                    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                let started = tokio::process::Command::new("runuser")
                    .args(["-u", "postgres", "--", "pgbouncer", "-d", &pooler_ini])
                    .status()
                    .await
                    .expect("pgbouncer");
                assert!(started.success(), "PgBouncer starts again");
                "restart PgBouncer"
            }
        };
        *faults.entry(fault).or_default() += 1;
        let acknowledged = seen.lock().await.acknowledged.len();
        let refused_so_far = refused.load(Ordering::Relaxed);
        eprintln!(
            "fault {at} s: {fault} ({acknowledged} runs acknowledged so far, {refused_so_far} creations refused or cut)"
        );
        if acknowledged > progress.0 {
            progress = (acknowledged, Instant::now());
        }
        assert!(
            progress.1.elapsed() < STALL,
            "the clients made no run for {STALL:?}: {acknowledged} acknowledged, {refused_so_far} refused or cut"
        );
    }
    load.await.expect("clients");
    let memory_at_end = [("api", rss_kib(api.pid)), ("steady", rss_kib(steady.pid))];
    let mut others: Vec<(String, Option<u64>)> = stoppable
        .iter()
        .map(|(name, worker)| (format!("{name} (its last start)"), rss_kib(worker.pid)))
        .collect();
    others.push(("pgbouncer".into(), pidfile(&pooler_pid).and_then(rss_kib)));

    // Every acknowledged run ends; then the judgment.
    let clients = seen.lock().await;
    let ids: Vec<Uuid> = clients.acknowledged.clone();
    let settle = tokio::time::timeout(Duration::from_secs(300), async {
        loop {
            let open: i64 = sqlx::query_scalar(
                "select count(*) from mostrador.runs where run_id = any($1) and status in ('pending', 'running')",
            )
            .bind(&ids)
            .fetch_one(&db.pool)
            .await
            .unwrap_or(i64::MAX);
            if open == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    let by_status: Vec<(String, i64)> = sqlx::query_as(
        "select coalesce(r.status::text, 'missing'), count(*) from unnest($1::uuid[]) as a(run_id)
         left join mostrador.runs r using (run_id) group by 1 order by 1",
    )
    .bind(&ids)
    .fetch_all(&db.pool)
    .await
    .expect("statuses");
    let lost: i64 = by_status
        .iter()
        .filter(|(status, _)| status != "success")
        .map(|(_, n)| n)
        .sum();
    // A finished superstep that ran again would write a second checkpoint after the same parent.
    let repeated_supersteps: i64 = sqlx::query_scalar(
        "select count(*) from (select 1 from mostrador.checkpoints where parent_checkpoint_id is not null
         group by thread_id, checkpoint_ns, parent_checkpoint_id having count(*) > 1) forks",
    )
    .fetch_one(&db.pool)
    .await
    .expect("forks");
    // An unfinished one runs again after a kill or a lost database: its node starts twice.
    let rerun_tasks: i64 = sqlx::query_scalar(
        "select count(*) from (select 1 from e2e_executions where phase = 'start'
         group by thread_id, node having count(*) > 1) rerun",
    )
    .fetch_one(&db.pool)
    .await
    .expect("reruns");
    let mut wrong_streams = Vec::new();
    for (run_id, got) in &clients.streams {
        let logged: Vec<i64> = sqlx::query_scalar(
            "select seq from mostrador.run_events where run_id = $1 and event not in ('end', 'drained') order by seq",
        )
        .bind(run_id)
        .fetch_all(&db.pool)
        .await
        .expect("events");
        if *got != logged {
            wrong_streams.push(json!({"run_id": run_id, "got": got, "logged": logged}));
        }
    }
    let (pickup_p50, pickup_p99): (Option<f64>, Option<f64>) = sqlx::query_as(
        "select percentile_cont(0.5) within group (order by ms), percentile_cont(0.99) within group (order by ms)
         from (select extract(epoch from started_at - created_at) * 1000 as ms from mostrador.runs
               where run_id = any($1) and attempt = 1 and drain_count = 0 and started_at is not null) p",
    )
    .bind(&ids)
    .fetch_one(&db.pool)
    .await
    .expect("pickup");
    let memory = |at: &[(&str, Option<u64>)]| -> Value {
        at.iter()
            .map(|(name, kib)| ((*name).to_owned(), json!(kib.map(|k| k / 1024))))
            .collect()
    };
    let result = json!({
        "kind": "chaos",
        "seconds": seconds,
        "seed": seed,
        "faults": faults,
        "runs_acknowledged": ids.len(),
        "runs_by_status": by_status.iter().map(|(s, n)| (s.clone(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "runs_lost": lost,
        "settled": settle.is_ok(),
        "finished_supersteps_repeated": repeated_supersteps,
        "unfinished_tasks_rerun": rerun_tasks,
        "streams": clients.streams.len(),
        "streams_wrong": wrong_streams.len(),
        "creations_refused_or_cut": refused.load(Ordering::Relaxed),
        "pickup_ms_p50": pickup_p50,
        "pickup_ms_p99": pickup_p99,
        "memory_mib_warm": memory(&memory_at_start),
        "memory_mib_end": memory(&memory_at_end),
        "memory_mib_end_others": others.iter().map(|(n, k)| (n.clone(), json!(k.map(|k| k / 1024)))).collect::<serde_json::Map<_, _>>(),
    });
    println!("{result}");
    assert_eq!(lost, 0, "every acknowledged run succeeded: {by_status:?}");
    assert_eq!(repeated_supersteps, 0, "no finished superstep ran twice");
    assert!(
        wrong_streams.is_empty(),
        "every stream got its run's log once, in order: {wrong_streams:?}"
    );
    for ((name, warm), (_, end)) in memory_at_start.iter().zip(&memory_at_end) {
        let (warm, end) = (
            warm.expect("alive when warm"),
            end.expect("alive at the end"),
        );
        assert!(
            end <= warm * 3 / 2 + 16 * 1024,
            "{name}'s memory grew: {warm} KiB warm, {end} KiB at the end"
        );
    }
    drop(steady);
    drop(api);
}
