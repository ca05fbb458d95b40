//! The supervisor, in process: claiming, draining to another worker, cancels by NOTIFY, leases
//! kept alive by heartbeats. (Process-level scenarios with SIGTERM and SIGKILL come with
//! `mostrador worker`.)

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mostrador_graph::{Command, Graph, START, StateGraph};
use mostrador_queue::run::event::EventFollower;
use mostrador_queue::run::{self, NewRun};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{CancelAction, Listener, Run, RunStatus};
use mostrador_worker::{Registry, WorkerConfig};
use sqlx::PgPool;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use crate::support::{GRAPH, Starts, abc};

fn config(name: &str) -> WorkerConfig {
    WorkerConfig {
        poll_interval: Duration::from_millis(200),
        drain_timeout: Duration::from_secs(10),
        ..WorkerConfig::new(name, vec![GRAPH.to_owned()])
    }
}

/// Starts a worker; send on the returned sender to shut it down (SIGTERM).
fn spawn_worker(
    pool: &PgPool,
    graph: Graph,
    config: WorkerConfig,
) -> (
    oneshot::Sender<()>,
    JoinHandle<Result<(), mostrador_worker::Error>>,
) {
    let registry: Arc<Registry> = Arc::new(HashMap::from([(GRAPH.to_owned(), graph)]));
    let (stop, stopped) = oneshot::channel::<()>();
    let pool = pool.clone();
    let task = tokio::spawn(async move {
        mostrador_worker::run(pool, config, registry, Arc::default(), async {
            stopped.await.unwrap_or(())
        })
        .await
    });
    (stop, task)
}

async fn enqueue(pool: &PgPool) -> Run {
    let thread = thread::create(pool, &NewThread::new(GRAPH, "ana"))
        .await
        .expect("thread");
    run::enqueue(pool, &NewRun::new(thread.thread_id, GRAPH), None)
        .await
        .expect("enqueue")
        .run
}

/// Waits, without polling, for the run's `end` event.
async fn until_end(pool: &PgPool, listener: &Listener, run: &Run) -> Run {
    let mut follower = EventFollower::start(pool.clone(), listener, run.run_id, 0)
        .await
        .expect("follow");
    let wait = async {
        while let Some(event) = follower.next().await.expect("events") {
            if event.event == "end" {
                break;
            }
        }
    };
    let ended = tokio::time::timeout(Duration::from_secs(30), wait).await;
    let now = run::get(pool, run.thread_id, run.run_id)
        .await
        .expect("run");
    let events: Vec<(i64, String)> = sqlx::query_as(
        "select seq, event from mostrador.run_events where run_id = $1 order by seq",
    )
    .bind(run.run_id.0)
    .fetch_all(pool)
    .await
    .expect("events");
    assert!(
        ended.is_ok(),
        "run did not end in time: {now:?}\nevents: {events:?}"
    );
    now
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn worker_runs_queued_runs_to_success(pool: PgPool) -> anyhow::Result<()> {
    let listener = Listener::start(pool.clone(), std::future::pending()).await?;
    let (stop, worker) = spawn_worker(
        &pool,
        abc(&Starts::default(), Arc::new(Notify::new()), None),
        config("w"),
    );
    let mut runs = Vec::new();
    for _ in 0..10 {
        runs.push(enqueue(&pool).await);
    }
    for run in &runs {
        assert_eq!(
            until_end(&pool, &listener, run).await.status,
            RunStatus::Success
        );
    }
    stop.send(()).expect("worker alive");
    worker.await??;
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn drained_run_resumes_on_another_worker_without_repeating_supersteps(
    pool: PgPool,
) -> anyhow::Result<()> {
    let listener = Listener::start(pool.clone(), std::future::pending()).await?;
    let starts = Starts::default();
    let (started, held) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let (stop_a, worker_a) = spawn_worker(
        &pool,
        abc(&starts, Arc::clone(&started), Some(held)),
        config("a"),
    );
    let run = enqueue(&pool).await;
    started.notified().await;
    let (stop_b, worker_b) = spawn_worker(
        &pool,
        abc(&starts, Arc::new(Notify::new()), None),
        config("b"),
    );

    // SIGTERM to A while b runs (b holds its superstep for a second): b finishes, A releases the
    // run at the boundary and exits.
    stop_a.send(()).expect("worker alive");
    tokio::time::timeout(Duration::from_secs(10), worker_a).await???;

    let ended = until_end(&pool, &listener, &run).await;
    assert_eq!(ended.status, RunStatus::Success);
    assert_eq!(
        (ended.drain_count, ended.attempt - ended.drain_count),
        (1, 1),
        "the drain used no attempt"
    );
    for node in ["a", "b", "c"] {
        assert_eq!(starts.of(node), 1, "{node} executed exactly once");
    }
    stop_b.send(()).expect("worker alive");
    worker_b.await??;
    Ok(())
}

/// A run whose ending waits for its commit has left its slot: the next run executes meanwhile. Runs
/// waiting so hold a slot's worth at most: a publisher that cannot commit stops the claims.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_run_waiting_for_its_ending_leaves_its_slot_to_the_next(
    pool: PgPool,
) -> anyhow::Result<()> {
    let listener = Listener::start(pool.clone(), std::future::pending()).await?;
    let starts = Starts::default();
    let started = Arc::new(Notify::new());
    let first = enqueue(&pool).await;
    // An ending locks its run's thread first: held here, the first run's ending waits.
    let mut holder = pool.begin().await?;
    sqlx::query("select 1 from mostrador.threads where thread_id = $1 for update")
        .bind(first.thread_id.0)
        .execute(&mut *holder)
        .await?;
    let config = WorkerConfig {
        max_runs: 1,
        ..config("w")
    };
    let (stop, worker) = spawn_worker(&pool, abc(&starts, Arc::clone(&started), None), config);
    started.notified().await;
    let second = enqueue(&pool).await;
    let third = enqueue(&pool).await;

    tokio::time::timeout(Duration::from_secs(10), started.notified())
        .await
        .expect("the second run executes while the first one's ending waits");
    let now = run::get(&pool, first.thread_id, first.run_id).await?;
    assert_eq!(
        now.status,
        RunStatus::Running,
        "the first run's ending waits"
    );
    // The second run's ending waits behind the first's: two runs wait, a slot's worth more than
    // the one slot. Nothing signals a claim that does not happen: give it ten polls.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = run::get(&pool, third.thread_id, third.run_id).await?;
    assert_eq!(now.status, RunStatus::Pending, "the third run waits");
    assert_eq!(starts.of("a"), 2, "two runs executed");

    holder.rollback().await?;
    for run in [&first, &second, &third] {
        assert_eq!(
            until_end(&pool, &listener, run).await.status,
            RunStatus::Success
        );
    }
    stop.send(()).expect("worker alive");
    worker.await??;
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn cancel_reaches_the_running_run_through_notify(pool: PgPool) -> anyhow::Result<()> {
    let listener = Listener::start(pool.clone(), std::future::pending()).await?;
    let started = Arc::new(Notify::new());
    let never = Arc::new(Notify::new());
    let config = WorkerConfig {
        lease: Duration::from_secs(300),
        heartbeat: Duration::from_secs(100),
        ..config("w")
    };
    let starts = Starts::default();
    let (stop, worker) = spawn_worker(
        &pool,
        abc(&starts, Arc::clone(&started), Some(never)),
        config,
    );
    let run = enqueue(&pool).await;
    started.notified().await;
    // Heartbeats are 100 s apart: only the control notification can deliver this cancel in time.
    mostrador_queue::cancel(&pool, run.thread_id, run.run_id, CancelAction::Interrupt).await?;
    assert_eq!(
        until_end(&pool, &listener, &run).await.status,
        RunStatus::Interrupted
    );
    assert_eq!(starts.of("c"), 0, "b was aborted before the graph went on");
    stop.send(()).expect("worker alive");
    worker.await??;
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn long_node_keeps_its_lease(pool: PgPool) -> anyhow::Result<()> {
    let listener = Listener::start(pool.clone(), std::future::pending()).await?;
    let starts = Arc::new(AtomicUsize::new(0));
    let slow = {
        let starts = Arc::clone(&starts);
        StateGraph::new()
            .node("tool", move |_| {
                starts.fetch_add(1, Ordering::SeqCst);
                async {
                    tokio::time::sleep(Duration::from_millis(3_500)).await;
                    Ok(Command::new())
                }
            })
            .edge(START, "tool")
            .compile()?
    };
    let short_lease = WorkerConfig {
        lease: Duration::from_secs(1),
        heartbeat: Duration::from_millis(250),
        sweep_interval: Duration::from_millis(100),
        ..config("w")
    };
    let (stop, worker) = spawn_worker(&pool, slow.clone(), short_lease.clone());
    // A second worker sweeps every 100 ms, ready to take the run the moment its lease lapses.
    let (stop_other, other) = spawn_worker(
        &pool,
        slow,
        WorkerConfig {
            name: "other".into(),
            ..short_lease
        },
    );
    let run = enqueue(&pool).await;
    let ended = until_end(&pool, &listener, &run).await;
    assert_eq!(
        (ended.status, ended.attempt),
        (RunStatus::Success, 1),
        "a node 3.5 leases long kept its lease"
    );
    assert_eq!(
        starts.load(Ordering::SeqCst),
        1,
        "and was never dispatched again"
    );
    stop.send(()).expect("worker alive");
    stop_other.send(()).expect("worker alive");
    worker.await??;
    other.await??;
    Ok(())
}

#[tokio::test]
async fn config_lease_must_cover_three_heartbeats_and_drain_fit_the_grace_period() {
    let registry: Registry = HashMap::from([(
        GRAPH.to_owned(),
        abc(&Starts::default(), Arc::new(Notify::new()), None),
    )]);
    let bad = WorkerConfig {
        lease: Duration::from_secs(2),
        heartbeat: Duration::from_secs(1),
        ..config("w")
    };
    assert!(
        bad.validate(&registry)
            .is_err_and(|message| message.contains("three heartbeats"))
    );
    let late = WorkerConfig {
        drain_timeout: Duration::from_secs(30),
        grace_period: Duration::from_secs(30),
        ..config("w")
    };
    assert!(
        late.validate(&registry)
            .is_err_and(|message| message.contains("grace period"))
    );
    let unknown = WorkerConfig {
        graphs: vec!["nope".into()],
        ..config("w")
    };
    assert!(unknown.validate(&registry).is_err());
    assert!(config("w").validate(&registry).is_ok());
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn run_whose_end_cannot_be_recorded_is_retried_not_stranded(
    pool: PgPool,
) -> anyhow::Result<()> {
    // The database refuses the first three attempts to record a success: as many as the
    // publisher tries before it gives up on a transaction.
    sqlx::raw_sql(
        "create sequence refusals;
         create function refuse_success() returns trigger language plpgsql as $$
         begin
             -- A sequence counts across the rolled-back transactions.
             if new.status = 'success' and nextval('refusals') <= 3 then
                 raise exception 'refused';
             end if;
             return new;
         end $$;
         create trigger refuse_success before update on mostrador.runs
             for each row execute function refuse_success();",
    )
    .execute(&pool)
    .await?;
    let listener = Listener::start(pool.clone(), std::future::pending()).await?;
    let starts = Starts::default();
    let config = WorkerConfig {
        lease: Duration::from_secs(3),
        heartbeat: Duration::from_secs(1),
        ..config("w")
    };
    let (stop, worker) = spawn_worker(&pool, abc(&starts, Arc::new(Notify::new()), None), config);
    let run = enqueue(&pool).await;

    // A heartbeat fails the stranded attempt (retryably); the second attempt resumes from the
    // last checkpoint and records its success.
    let ended = until_end(&pool, &listener, &run).await;
    assert_eq!(
        (ended.status, ended.attempt),
        (RunStatus::Success, 2),
        "{:?}",
        ended.error
    );
    for node in ["a", "b", "c"] {
        assert_eq!(
            starts.of(node),
            1,
            "{node} ran once: the retry resumed at the end"
        );
    }
    stop.send(()).expect("worker alive");
    worker.await??;
    Ok(())
}
