//! `hostile_tenants_cannot_starve_or_reach_others`: a bounded soak on loopback, with real `api` and
//! `worker` processes. 20 customers of four stores and a manager of each run a random mix of
//! legitimate and hostile calls beside a steady legitimate load: foreign ids (reads and writes of
//! others' threads), floods of runs and of delayed runs, bodies over the limit, streams nobody
//! reads, and managers deciding approvals they read long ago. Afterwards: no read or write crossed
//! tenants, no steady run waited while a run of a caller with more runs waiting started, a steady
//! run once accepted waited for a worker (p99) no longer than three times an idle system's whole
//! pickup, no run was lost, and the api's memory stayed bounded.
//!
//! A pickup has two parts, measured apart: the enqueue (from the run's creation, its transaction's
//! start, to the api's answer) and the wait for a worker (from the answer, when the run is
//! committed and the caller holds its id, to its start). The bound is on the wait: that is the
//! queue's. The enqueue's tail under the hostile mix is the machine's, reported beside it: the
//! test's callers, the api, the worker and Postgres share two cores and one disk, and the steady
//! caller's commit queues behind the hostile callers' writes (Postgres logs commits of 100 ms
//! there).
//!
//! Ignored in the parallel suite (it measures latency, and takes two minutes and a half); `.ci/run`
//! runs it alone, against a release build of the processes (`MOSTRADOR_E2E_BIN`): a debug build's
//! latency is not the product's. `MOSTRADOR_SOAK_SECONDS` shortens or lengthens the hostile phase.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::io::AsyncWriteExt;

use crate::refunds::place_order_at;
use crate::retail::{call, token};
use crate::support::{Db, Worker};
use measure::{Pickup, overtaken, p99_since_creation, quiescent, rss_kib};

mod measure;

const SECRET: &str = "hostile soak secret";
const STORES: [&str; 4] = [
    "madrid-centro",
    "madrid-norte",
    "barcelona-gracia",
    "valencia-ruzafa",
];
/// The graph of the steady load and of the floods: six short supersteps.
const GRAPH: &str = "bench_linear_6";
/// Each caller's share of pending runs, and of open streams, in this deployment.
const SHARE: &str = "5";
const STREAMS: &str = "5";
/// The steady load: a run every this long, from a caller of its own.
const STEADY_EVERY: Duration = Duration::from_millis(100);
/// Each actor's pace: an action (a call, or a flood of them), then this pause.
const PACE: Duration = Duration::from_millis(250);

/// A small deterministic generator (splitmix64), one per actor.
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

/// A customer or a manager, with the token the api knows them by.
struct Caller {
    name: String,
    store: &'static str,
    token: String,
}

/// What the actors share and what the checks read.
#[derive(Default)]
struct Soak {
    /// Every customer's threads: `(owner, store, thread id)`.
    threads: Mutex<Vec<(String, &'static str, String)>>,
    /// Runs the api accepted (a 200 with a run id), and whether each was delayed.
    accepted: Mutex<Vec<(String, bool)>>,
    /// Approvals managers read, to decide later (stale by then).
    approvals: Mutex<Vec<Value>>,
    /// Calls that crossed tenants: a foreign thread answered other than as a missing one, or a
    /// write that was not the caller's to make went through.
    crossed: Mutex<Vec<String>>,
    /// Calls answered with a 5xx, which no hostile call should cause.
    failed: Mutex<Vec<String>>,
    calls: AtomicU64,
    stop: AtomicBool,
}

impl Soak {
    fn crossed(&self, what: String) {
        self.crossed.lock().expect("log").push(what);
    }

    fn accept(&self, answer: &Value, delayed: bool) {
        if let Some(run_id) = answer["run_id"].as_str() {
            self.accepted
                .lock()
                .expect("log")
                .push((run_id.to_owned(), delayed));
        }
    }

    fn foreign_thread(&self, draw: &mut Draw, caller: &Caller) -> Option<(String, &'static str)> {
        let threads = self.threads.lock().expect("threads");
        let foreign: Vec<_> = threads
            .iter()
            .filter(|(owner, _, _)| *owner != caller.name)
            .collect();
        (!foreign.is_empty()).then(|| {
            let (_, store, id) = foreign[draw.below(foreign.len())];
            (id.clone(), *store)
        })
    }

    fn own_threads(&self, caller: &Caller) -> Vec<String> {
        self.threads
            .lock()
            .expect("threads")
            .iter()
            .filter(|(owner, _, _)| *owner == caller.name)
            .map(|(_, _, id)| id.clone())
            .collect()
    }
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
#[ignore = "a two-minute soak that measures latency: .ci/run runs it alone"]
async fn hostile_tenants_cannot_starve_or_reach_others(pool: PgPool) {
    let soak_for = Duration::from_secs(
        std::env::var("MOSTRADOR_SOAK_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(120),
    );
    let db = Db::new(pool).await;
    mostrador_retail::retail::load_demo_data(&db.pool)
        .await
        .expect("demo data");
    let api = Worker::spawn(
        &db,
        "api",
        "api",
        &[
            "--jwt-secret",
            SECRET,
            "--max-pending-per-caller",
            SHARE,
            "--max-streams-per-caller",
            STREAMS,
            "--slow-client-timeout",
            "5s",
        ],
    );
    let worker = Worker::spawn(
        &db,
        "worker",
        "worker",
        &["--graphs", &format!("{GRAPH},cliente")],
    );
    api.until_ready_is(200).await;
    worker.until_ready_is(200).await;

    let customers: Vec<Caller> = (0..20)
        .map(|i| {
            let store = STORES[i % STORES.len()];
            let name = format!("cliente-{i:02}");
            Caller {
                token: token(SECRET, &name, "customer", store),
                name,
                store,
            }
        })
        .collect();
    let managers: Vec<Caller> = STORES
        .iter()
        .map(|store| {
            let name = format!("encargado-{store}");
            Caller {
                token: token(SECRET, &name, "manager", store),
                name,
                store,
            }
        })
        .collect();
    let soak = Soak::default();
    for (i, customer) in customers.iter().enumerate() {
        place_order_at(&db.pool, customer.store, &order_of(i), &customer.name).await;
        for _ in 0..4 {
            new_thread(&api, customer, &soak).await;
        }
    }
    let steady = Caller {
        name: "constante".into(),
        store: STORES[0],
        token: token(SECRET, "constante", "customer", STORES[0]),
    };

    // The idle system: the steady load alone.
    let idle = steady_load(&api, &steady, Duration::from_secs(45), &soak).await;
    let idle_pickup = Pickup::of(&db.pool, &idle).await;

    // The hostile phase: the same steady load, beside every actor.
    let rss = Mutex::new(Vec::<u64>::new());
    let hostile = async {
        let actors = customers
            .iter()
            .enumerate()
            .map(|(i, customer)| customer_actor(&api, customer, i, &soak));
        let deciders = managers
            .iter()
            .enumerate()
            .map(|(i, manager)| manager_actor(&api, manager, 100 + i as u64, &soak));
        tokio::join!(join_all(actors.collect()), join_all(deciders.collect()));
    };
    let sampler = async {
        while !soak.stop.load(Ordering::Relaxed) {
            rss.lock().expect("rss").push(rss_kib(api.pid));
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    let steady_runs = async {
        let runs = steady_load(&api, &steady, soak_for, &soak).await;
        soak.stop.store(true, Ordering::Relaxed);
        runs
    };
    let (loaded, (), ()) = tokio::join!(steady_runs, hostile, sampler);
    let loaded_pickup = Pickup::of(&db.pool, &loaded).await;
    let overtaken = overtaken(&db.pool, &loaded).await;

    // Everything accepted and due ends; nothing vanished.
    let accepted = soak.accepted.lock().expect("log").clone();
    quiescent(&db.pool).await;
    let ids: Vec<String> = accepted.iter().map(|(id, _)| id.clone()).collect();
    let rows: Vec<(String, String, bool)> = sqlx::query_as(
        "select run_id::text, status::text, available_at > now()
         from mostrador.runs where run_id = any($1::uuid[])",
    )
    .bind(&ids)
    .fetch_all(&db.pool)
    .await
    .expect("runs");
    let found: HashSet<&str> = rows.iter().map(|(id, _, _)| id.as_str()).collect();
    let lost: Vec<&String> = ids
        .iter()
        .filter(|id| !found.contains(id.as_str()))
        .collect();
    let unfinished: Vec<&(String, String, bool)> = rows
        .iter()
        .filter(|(_, status, later)| {
            !*later && !["success", "interrupted"].contains(&status.as_str())
        })
        .collect();

    let rss = rss.lock().expect("rss").clone();
    let (first_rss, peak_rss) = (
        rss.first().copied().unwrap_or_default(),
        rss.iter().copied().max().unwrap_or_default(),
    );
    let steady_ids: HashSet<&str> = idle
        .iter()
        .chain(&loaded)
        .map(|run| run.run_id.as_str())
        .collect();
    let others: Vec<String> = accepted
        .iter()
        .filter(|(id, delayed)| !delayed && !steady_ids.contains(id.as_str()))
        .map(|(id, _)| id.clone())
        .collect();
    let others_p99 = p99_since_creation(&db.pool, &others).await;
    let report = format!(
        "{} calls, {} runs accepted ({} of the steady load); steady pickup p99, idle → under the \
         hostile mix: whole {:?} → {:?}, the enqueue {:?} → {:?}, the wait for a worker {:?} → \
         {:?}; the hostile callers' own runs' pickup p99 {others_p99:?}; api RSS {first_rss} KiB \
         at the start, {peak_rss} KiB at the peak",
        soak.calls.load(Ordering::Relaxed),
        accepted.len(),
        loaded.len(),
        idle_pickup.whole,
        loaded_pickup.whole,
        idle_pickup.enqueue,
        loaded_pickup.enqueue,
        idle_pickup.wait,
        loaded_pickup.wait,
    );
    eprintln!("{report}");
    let crossed = soak.crossed.lock().expect("log").clone();
    assert!(
        crossed.is_empty(),
        "calls crossed tenants: {crossed:?}\n{report}"
    );
    let failed = soak.failed.lock().expect("log").clone();
    assert!(
        failed.is_empty(),
        "server errors: {failed:?}\n{}",
        api.log()
    );
    assert!(lost.is_empty(), "accepted runs lost: {lost:?}");
    assert!(
        unfinished.is_empty(),
        "runs due that did not end: {unfinished:?}\n{}",
        worker.log()
    );
    assert!(
        overtaken.is_empty(),
        "steady runs waited while runs of callers with more waiting started: {overtaken:?}\n{report}"
    );
    assert!(
        loaded_pickup.wait <= idle_pickup.whole * 3,
        "the steady load was starved: {report}"
    );
    assert!(
        peak_rss < 256 * 1024,
        "the api's memory grew past 256 MiB: {report}"
    );
}

fn order_of(customer: usize) -> String {
    format!("PED-9{customer:04}")
}

/// Polls every future to its end, together.
async fn join_all<F: Future<Output = ()>>(futures: Vec<F>) {
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        pinned.retain_mut(|future| future.as_mut().poll(cx).is_pending());
        if pinned.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
}

/// A steady run: its id, and when the api's answer was read (seconds since the epoch, the clock
/// Postgres's timestamps are read from on this machine).
struct Steady {
    run_id: String,
    answered: f64,
}

/// A run every [`STEADY_EVERY`] for `lasting`, each on a new thread of `caller`.
async fn steady_load(api: &Worker, caller: &Caller, lasting: Duration, soak: &Soak) -> Vec<Steady> {
    let mut runs = Vec::new();
    let started = Instant::now();
    let mut tick = tokio::time::interval(STEADY_EVERY);
    while started.elapsed() < lasting {
        tick.tick().await;
        let (status, run) = call(
            api,
            "POST",
            "/runs",
            &caller.token,
            Some(json!({"assistant_id": GRAPH, "input": {"log": []}})),
        )
        .await;
        let answered = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after the epoch")
            .as_secs_f64();
        assert_eq!(status, 200, "the steady load is always served: {run}");
        soak.accept(&run, false);
        runs.push(Steady {
            run_id: run["run_id"].as_str().expect("run id").to_owned(),
            answered,
        });
    }
    runs
}

/// A new thread of `caller`'s, known to the others as a foreign one.
async fn new_thread(api: &Worker, caller: &Caller, soak: &Soak) -> String {
    let (status, thread) = call(api, "POST", "/threads", &caller.token, Some(json!({}))).await;
    assert_eq!(status, 200, "{thread}");
    let id = thread["thread_id"].as_str().expect("id").to_owned();
    soak.threads
        .lock()
        .expect("threads")
        .push((caller.name.clone(), caller.store, id.clone()));
    id
}

/// A customer's mix: their own runs (a flood of them, delayed ones too), reads and writes of
/// others' threads, bodies over the limit, streams they never read, refund requests.
async fn customer_actor(api: &Worker, caller: &Caller, seed: usize, soak: &Soak) {
    let mut draw = Draw(seed as u64);
    let mut unread = Vec::new();
    // Runs queue behind a thread's delayed run: those go on a thread of their own.
    let (later, own) = soak
        .own_threads(caller)
        .split_first()
        .map(|(l, o)| (l.clone(), o.to_vec()))
        .expect("threads");
    let mut asked_refund = false;
    stagger(&mut draw).await;
    while !soak.stop.load(Ordering::Relaxed) {
        soak.calls.fetch_add(1, Ordering::Relaxed);
        let thread = &own[draw.below(own.len())];
        match draw.below(20) {
            // A run of their own.
            0..=2 => {
                let path = format!("/threads/{thread}/runs");
                let body = json!({"assistant_id": GRAPH, "input": {"log": []}, "multitask_strategy": "enqueue"});
                let (status, answer) = call(api, "POST", &path, &caller.token, Some(body)).await;
                record(soak, &path, status, &answer, &[200, 429]);
                soak.accept(&answer, false);
            }
            // A flood: runs as fast as the api answers, each on a thread of its own (so all of
            // them could start at once), accepted until their share is full.
            3 => {
                for _ in 0..25 {
                    let body = json!({"assistant_id": GRAPH, "input": {"log": []}});
                    let (status, answer) =
                        call(api, "POST", "/runs", &caller.token, Some(body)).await;
                    record(soak, "/runs", status, &answer, &[200, 429]);
                    soak.accept(&answer, false);
                }
            }
            // A flood of delayed runs: they count against the same share.
            4 => {
                let path = format!("/threads/{later}/runs");
                for _ in 0..10 {
                    let body = json!({"assistant_id": GRAPH, "after_seconds": 3600, "multitask_strategy": "enqueue"});
                    let (status, answer) =
                        call(api, "POST", &path, &caller.token, Some(body)).await;
                    record(soak, &path, status, &answer, &[200, 429]);
                    soak.accept(&answer, true);
                }
            }
            // Another's thread, read and written: as missing as a thread that does not exist.
            5..=9 => {
                let Some((foreign, _)) = soak.foreign_thread(&mut draw, caller) else {
                    continue;
                };
                let attempts = [
                    ("GET", format!("/threads/{foreign}"), None),
                    ("GET", format!("/threads/{foreign}/state"), None),
                    ("GET", format!("/threads/{foreign}/runs"), None),
                    ("GET", format!("/threads/{foreign}/history"), None),
                    (
                        "PATCH",
                        format!("/threads/{foreign}"),
                        Some(json!({"metadata": {"x": 1}})),
                    ),
                    (
                        "POST",
                        format!("/threads/{foreign}/runs"),
                        Some(json!({"assistant_id": GRAPH})),
                    ),
                    (
                        "POST",
                        format!("/threads/{foreign}/state"),
                        Some(json!({"values": {"log": ["x"]}})),
                    ),
                    ("DELETE", format!("/threads/{foreign}"), None),
                ];
                let (method, path, body) = &attempts[draw.below(attempts.len())];
                let (status, answer) = call(api, method, path, &caller.token, body.clone()).await;
                if status != 404 {
                    soak.crossed(format!(
                        "{} {method} {path}: {status} {answer}",
                        caller.name
                    ));
                }
            }
            // A body over the limit: refused before it is read whole.
            10 => {
                let status = huge_body(api, &caller.token).await;
                if ![Some(413), None].contains(&status) {
                    soak.crossed(format!("{}: an 11 MB body got {status:?}", caller.name));
                }
            }
            // A stream nobody reads (kept open), past their share of streams.
            11 | 12 => {
                if unread.len() < 2 * STREAMS.parse::<usize>().expect("a number") {
                    let body = json!({"assistant_id": GRAPH, "input": {"log": []}, "stream_mode": ["values", "debug"]});
                    if let Some(stream) = unread_stream(api, &caller.token, &body).await {
                        unread.push(stream);
                    }
                }
            }
            // Their refund, once: a manager of their store decides it, sooner or later.
            13 if !asked_refund => {
                asked_refund = true;
                let customer: usize = caller.name["cliente-".len()..].parse().expect("a number");
                let thread = new_thread(api, caller, soak).await;
                let path = format!("/threads/{thread}/runs");
                let body = json!({"assistant_id": "cliente", "multitask_strategy": "enqueue",
                    "input": {"messages": [{"role": "user",
                        "content": format!("Quiero devolver el pedido {}", order_of(customer))}]}});
                let (status, answer) = call(api, "POST", &path, &caller.token, Some(body)).await;
                record(soak, &path, status, &answer, &[200, 429]);
                soak.accept(&answer, false);
            }
            // Their own threads, read: always theirs.
            _ => {
                let path = format!("/threads/{thread}/state");
                let (status, answer) = call(api, "GET", &path, &caller.token, None).await;
                record(soak, &path, status, &answer, &[200]);
            }
        }
        tokio::time::sleep(PACE).await;
    }
}

/// A manager's mix: their store's approvals, decided late (stale, or replaced), others' stores'
/// threads, and writes to their customers' threads, which a manager reads but may not change.
async fn manager_actor(api: &Worker, caller: &Caller, seed: u64, soak: &Soak) {
    let mut draw = Draw(seed);
    stagger(&mut draw).await;
    while !soak.stop.load(Ordering::Relaxed) {
        soak.calls.fetch_add(1, Ordering::Relaxed);
        match draw.below(4) {
            0 => {
                let (status, queue) = call(api, "GET", "/approvals", &caller.token, None).await;
                record(soak, "/approvals", status, &queue, &[200]);
                for approval in queue.as_array().into_iter().flatten() {
                    if approval["store_id"] != caller.store {
                        soak.crossed(format!("{} listed {approval}", caller.name));
                    }
                    soak.approvals.lock().expect("log").push(approval.clone());
                }
            }
            // An approval read earlier: still waiting, replaced, or another store's.
            1 => {
                let approval = {
                    let read = soak.approvals.lock().expect("log");
                    (!read.is_empty()).then(|| read[draw.below(read.len())].clone())
                };
                let Some(approval) = approval else { continue };
                let path = format!(
                    "/threads/{}/runs/wait",
                    approval["thread_id"].as_str().unwrap_or("")
                );
                let body = json!({"assistant_id": "cliente", "command": {"resume": {
                    "decision": "approve", "approval_id": approval["approval_id"]}}});
                let (status, answer) = call(api, "POST", &path, &caller.token, Some(body)).await;
                let theirs = approval["store_id"] == caller.store;
                let allowed: &[u16] = if theirs { &[200, 409, 429] } else { &[404] };
                if !allowed.contains(&status) {
                    soak.crossed(format!(
                        "{} decided {approval}: {status} {answer}",
                        caller.name
                    ));
                }
            }
            // A thread of any store: read (theirs only), and written (never).
            _ => {
                let Some((thread, store)) = soak.foreign_thread(&mut draw, caller) else {
                    continue;
                };
                let theirs = store == caller.store;
                let (status, answer) = call(
                    api,
                    "GET",
                    &format!("/threads/{thread}"),
                    &caller.token,
                    None,
                )
                .await;
                if status != if theirs { 200 } else { 404 } {
                    soak.crossed(format!(
                        "{} read {thread} of {store}: {status} {answer}",
                        caller.name
                    ));
                }
                let (status, answer) = call(
                    api,
                    "PATCH",
                    &format!("/threads/{thread}"),
                    &caller.token,
                    Some(json!({"metadata": {"by": caller.name}})),
                )
                .await;
                if status != if theirs { 403 } else { 404 } {
                    soak.crossed(format!(
                        "{} wrote {thread} of {store}: {status} {answer}",
                        caller.name
                    ));
                }
            }
        }
        tokio::time::sleep(PACE).await;
    }
}

/// Waits a part of [`PACE`] drawn at random: callers that all start at the same instant would be
/// a burst of the test's own making.
async fn stagger(draw: &mut Draw) {
    tokio::time::sleep(PACE.mul_f64(draw.below(1000) as f64 / 1000.0)).await;
}

/// Notes a server error, or an answer the call may not get.
fn record(soak: &Soak, path: &str, status: u16, answer: &Value, expected: &[u16]) {
    if status >= 500 {
        soak.failed
            .lock()
            .expect("log")
            .push(format!("{path}: {status} {answer}"));
    } else if !expected.contains(&status) {
        soak.crossed(format!("{path}: {status} {answer}"));
    }
}

/// An 11 MB body: the status, or `None` when the api closed the connection before reading it all.
async fn huge_body(api: &Worker, token: &str) -> Option<u16> {
    let body = format!(
        r#"{{"metadata": {{"x": "{}"}}}}"#,
        "x".repeat(11 * 1024 * 1024)
    );
    crate::support::http(
        api.addr().1,
        "POST",
        "/threads",
        &[
            ("Authorization", &format!("Bearer {token}")),
            ("Content-Type", "application/json"),
        ],
        &body,
    )
    .await
    .ok()
    .map(|(status, _)| status)
}

/// A streamed run whose answer is never read: the open connection.
async fn unread_stream(api: &Worker, token: &str, body: &Value) -> Option<tokio::net::TcpStream> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", api.addr().1))
        .await
        .ok()?;
    let body = body.to_string();
    let request = format!(
        "POST /runs/stream HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    Some(stream)
}
