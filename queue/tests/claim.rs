//! Claiming: exactly once, by priority and due time, one running run per thread, woken by NOTIFY.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mostrador_queue::listener::{Queued, RUNS_CHANNEL};
use mostrador_queue::run::ending::{End, Ending, end_many};
use mostrador_queue::run::{self, MultitaskStrategy, NewRun};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{Listener, RunId, claim};
use sqlx::PgPool;
use tokio::task::JoinSet;

use crate::support::{self, GRAPH, claim_one, enqueue, graphs, new_thread, new_worker, within};

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn concurrent_claims_never_double_claim(pool: PgPool) -> anyhow::Result<()> {
    const RUNS: usize = 5_000;
    const CLAIMERS: usize = 8;
    let enqueued = support::new_runs(&pool, RUNS).await;
    assert_eq!(enqueued.len(), RUNS);

    let wide = support::wide_pool(&pool, CLAIMERS as u32 + 1).await;
    let mut claimers = JoinSet::new();
    for _ in 0..CLAIMERS {
        let worker = new_worker(&wide).await;
        let wide = wide.clone();
        claimers.spawn(async move {
            let mut mine = Vec::new();
            loop {
                let claimed = claim(&wide, worker.worker_id, &graphs(), 25).await?;
                if claimed.is_empty() {
                    return anyhow::Ok(mine);
                }
                mine.extend(claimed.into_iter().map(|run| (run.run_id(), run.attempt())));
            }
        });
    }
    let mut all = Vec::new();
    while let Some(res) = claimers.join_next().await {
        all.extend(res??);
    }

    let distinct: HashSet<RunId> = all.iter().map(|(run_id, _)| *run_id).collect();
    assert_eq!(all.len(), RUNS, "every run claimed exactly once in total");
    assert_eq!(distinct.len(), RUNS, "no run claimed twice");
    assert!(all.iter().all(|(_, attempt)| *attempt == 1));
    let running: i64 = sqlx::query_scalar(
        "select count(*) from mostrador.runs where status = 'running' and attempt = 1",
    )
    .fetch_one(&pool)
    .await?;
    assert_eq!(running, RUNS as i64);
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn one_running_run_per_thread(pool: PgPool) -> anyhow::Result<()> {
    // In order: only the oldest run of a thread is claimable while it is unfinished.
    let thread = new_thread(&pool).await;
    let mut run_ids = Vec::new();
    for _ in 0..3 {
        let new = NewRun {
            multitask_strategy: MultitaskStrategy::Enqueue,
            ..NewRun::new(thread.thread_id, GRAPH)
        };
        run_ids.push(enqueue(&pool, new).await.run_id);
    }
    let worker = new_worker(&pool).await;
    for expected in &run_ids {
        let claimed = claim(&pool, worker.worker_id, &graphs(), 10).await?;
        assert_eq!(claimed.len(), 1, "one run of the thread at a time");
        assert_eq!(
            claimed[0].run_id(),
            *expected,
            "runs of a thread go in enqueue order"
        );
        assert!(
            claim(&pool, worker.worker_id, &graphs(), 10)
                .await?
                .is_empty()
        );
        let claimed = claimed.into_iter().next().expect("claimed");
        claimed.end(&pool, Ending::Success).await?;
    }

    // Under concurrent claimers: 40 threads with 5 runs each.
    const THREADS: usize = 40;
    const RUNS_PER_THREAD: usize = 5;
    let threads = thread::create_many(&pool, &vec![NewThread::new(GRAPH, "ana"); THREADS]).await?;
    let mut news = Vec::new();
    for _ in 0..RUNS_PER_THREAD {
        news.extend(threads.iter().map(|t| NewRun::new(t.thread_id, GRAPH)));
    }
    run::enqueue_batch(&pool, &news, None).await?;

    let wide = support::wide_pool(&pool, 9).await;
    let running = Arc::new(Mutex::new(HashSet::new()));
    let mut claimers = JoinSet::new();
    for _ in 0..8 {
        let worker = new_worker(&wide).await;
        let (wide, running) = (wide.clone(), Arc::clone(&running));
        claimers.spawn(async move {
            let mut done = 0;
            let mut idle_rounds = 0;
            while idle_rounds < 50 {
                let claimed = claim(&wide, worker.worker_id, &graphs(), 4).await?;
                if claimed.is_empty() {
                    idle_rounds += 1;
                    tokio::task::yield_now().await;
                    continue;
                }
                idle_rounds = 0;
                for run in &claimed {
                    let fresh = running.lock().expect("lock").insert(run.thread_id);
                    assert!(fresh, "thread {} has two running runs", run.thread_id);
                }
                let ends: Vec<End> = claimed
                    .iter()
                    .map(|run| run.ending(Ending::Success))
                    .collect();
                // Leave the set before the completion commits: another claimer can only take
                // the thread's next run after that commit.
                for run in &claimed {
                    running.lock().expect("lock").remove(&run.thread_id);
                }
                let mut tx = wide.begin().await?;
                assert!(end_many(&mut tx, &ends).await?.is_empty());
                tx.commit().await?;
                done += claimed.len();
            }
            anyhow::Ok(done)
        });
    }
    let mut done = 0;
    while let Some(res) = claimers.join_next().await {
        done += res??;
    }
    assert_eq!(done, THREADS * RUNS_PER_THREAD);
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn claim_respects_priority_and_due_time(pool: PgPool) -> anyhow::Result<()> {
    let later = enqueue(
        &pool,
        NewRun {
            after: Duration::from_secs(3600),
            ..NewRun::new(new_thread(&pool).await.thread_id, GRAPH)
        },
    )
    .await;
    let normal = enqueue(&pool, NewRun::new(new_thread(&pool).await.thread_id, GRAPH)).await;
    let urgent = enqueue(
        &pool,
        NewRun {
            priority: -1,
            ..NewRun::new(new_thread(&pool).await.thread_id, GRAPH)
        },
    )
    .await;
    let other_graph = {
        let thread = thread::create(&pool, &NewThread::new("fichas", "bot")).await?;
        enqueue(&pool, NewRun::new(thread.thread_id, "fichas")).await
    };
    let worker = new_worker(&pool).await;

    let claimed = claim(&pool, worker.worker_id, &graphs(), 10).await?;
    let order: Vec<RunId> = claimed.iter().map(|run| run.run_id()).collect();
    assert_eq!(
        order,
        vec![urgent.run_id, normal.run_id],
        "due runs of the claimer's graphs, by priority"
    );
    assert!(!order.contains(&later.run_id) && !order.contains(&other_graph.run_id));
    Ok(())
}

/// On a `runs` table never analyzed, a claim on the claimer's connection walks `runs_claim_idx`
/// in queue order and stops at its limit; with the planner's defaults it reads every pending run's
/// entry (and sorts them all), which is what the claimer is for.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_claim_reads_the_queue_in_order_whatever_the_statistics(
    pool: PgPool,
) -> anyhow::Result<()> {
    const PENDING: usize = 5_000;
    const TAKE: i64 = 16;
    sqlx::query("alter table mostrador.runs set (autovacuum_enabled = off)")
        .execute(&pool)
        .await?;
    support::new_runs(&pool, PENDING).await;
    let analyzed: bool = sqlx::query_scalar(
        "select coalesce(last_analyze, last_autoanalyze) is not null
         from pg_stat_user_tables where schemaname = 'mostrador' and relname = 'runs'",
    )
    .fetch_one(&pool)
    .await?;
    assert!(!analyzed, "the premise: runs was never analyzed");
    let worker = new_worker(&pool).await;

    // The claim in a transaction rolled back, with the index entries it read in that transaction.
    let entries_read = |pool: PgPool| async move {
        let mut tx = pool.begin().await?;
        let claimed = claim(&mut *tx, worker.worker_id, &graphs(), TAKE).await?;
        let (read, scanned): (i64, i64) = sqlx::query_as(
            "select pg_stat_get_xact_tuples_returned('mostrador.runs_claim_idx'::regclass),
                    pg_stat_get_xact_tuples_returned('mostrador.runs'::regclass)",
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.rollback().await?;
        anyhow::Ok((claimed.len(), read, scanned))
    };
    let (claimed, read, scanned) = entries_read(mostrador_queue::db::claimer(&pool)).await?;
    assert_eq!(claimed, TAKE as usize);
    assert!(
        read <= 2 * TAKE,
        "the claimer read {read} entries of runs_claim_idx to claim {TAKE}"
    );
    assert_eq!(scanned, 0, "no run read by a scan of the whole table");
    let (_, read, _) = entries_read(pool.clone()).await?;
    assert_eq!(
        read, PENDING as i64,
        "with the planner's defaults the claim reads every pending run's entry"
    );
    Ok(())
}

/// The claimer finds the runs it takes by their primary key even where the planner would rather
/// read the whole table (a few pages of runs: a new deployment's first seconds, when the plan it
/// keeps until the next `analyze` is made).
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_claim_reads_no_table_whole_however_small(pool: PgPool) -> anyhow::Result<()> {
    const PENDING: usize = 150;
    support::new_runs(&pool, PENDING).await;
    sqlx::query("analyze mostrador.runs").execute(&pool).await?;
    let worker = new_worker(&pool).await;
    // The claim in a transaction rolled back, with the runs read by scans of the whole table.
    let scanned = |pool: PgPool| async move {
        let mut tx = pool.begin().await?;
        let claimed = claim(&mut *tx, worker.worker_id, &graphs(), 1).await?;
        let scanned: i64 = sqlx::query_scalar(
            "select pg_stat_get_xact_tuples_returned('mostrador.runs'::regclass)",
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.rollback().await?;
        anyhow::Ok((claimed.len(), scanned))
    };
    // At least every run: a plan may read one twice (seen once as 151 of 150 under load).
    let premise = scanned(pool.clone()).await?.1;
    assert!(
        premise >= PENDING as i64,
        "the premise: the planner's defaults scan every run ({premise} read)"
    );
    assert_eq!(scanned(mostrador_queue::db::claimer(&pool)).await?, (1, 0));
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn unregistered_worker_claims_nothing(pool: PgPool) -> anyhow::Result<()> {
    support::new_run(&pool).await;
    let worker = mostrador_queue::WorkerLease::new("ghost", graphs(), Duration::from_secs(30));
    assert!(
        claim(&pool, worker.worker_id, &graphs(), 10)
            .await?
            .is_empty()
    );
    assert_eq!(support::count_runs(&pool).await, 1);
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn notify_wakes_a_waiting_claimer(pool: PgPool) -> anyhow::Result<()> {
    let listener = Listener::start(pool.clone(), std::future::pending()).await?;
    let worker = new_worker(&pool).await;
    // Subscribed before the claimer looks, so a wake-up sent in between is not lost.
    let mut queued = listener.queued();
    let (parked_tx, parked) = tokio::sync::oneshot::channel();
    let claimer = {
        let pool = pool.clone();
        tokio::spawn(async move {
            assert!(
                claim_one(&pool, &worker).await.is_none(),
                "nothing to claim yet"
            );
            parked_tx.send(()).expect("test is waiting");
            let mut wake_ups = 0;
            loop {
                // No poll interval: only a notification can wake this claimer.
                match queued.recv().await? {
                    Queued::Graph(graph_id) if graph_id == GRAPH => wake_ups += 1,
                    _ => continue,
                }
                if let Some(run) = claim_one(&pool, &worker).await {
                    return anyhow::Ok((run, wake_ups));
                }
            }
        })
    };
    within(parked).await?;
    let thread = new_thread(&pool).await;
    let enqueued = enqueue(&pool, NewRun::new(thread.thread_id, GRAPH)).await;

    let (claimed, wake_ups) = within(claimer).await??;
    assert_eq!(claimed.run_id(), enqueued.run_id);
    assert_eq!(wake_ups, 1, "one enqueue, one wake-up");
    Ok(())
}

/// Whatever way a run ends, the run queued behind it on its thread is claimable at once, and a
/// waiting claimer is told so (a drain's release wakes it for the released run itself): no run
/// waits for the poll because the one before it failed or was rolled back.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn every_ending_wakes_the_claimers_for_the_run_queued_behind(
    pool: PgPool,
) -> anyhow::Result<()> {
    let listener = Listener::start(pool.clone(), std::future::pending()).await?;
    let mut queued = listener.queued();
    let worker = new_worker(&pool).await;
    let endings = [
        Ending::Success,
        Ending::Paused,
        Ending::Cancelled,
        Ending::TimedOut,
        Ending::Failed {
            error: serde_json::json!({"error": "Fatal"}),
            retryable: false,
        },
        Ending::RolledBack,
        Ending::Released {
            reason: "shutdown".into(),
        },
    ];
    for ending in endings {
        let thread = new_thread(&pool).await;
        let mut run_ids = Vec::new();
        for _ in 0..2 {
            let new = NewRun {
                multitask_strategy: MultitaskStrategy::Enqueue,
                ..NewRun::new(thread.thread_id, GRAPH)
            };
            run_ids.push(enqueue(&pool, new).await.run_id);
        }
        let head = claim_one(&pool, &worker).await.expect("the thread's head");
        assert_eq!(head.run_id(), run_ids[0]);
        assert!(claim_one(&pool, &worker).await.is_none(), "the next waits");
        // Notifications arrive in order: once this marker is in, the enqueues' are behind.
        sqlx::query("select pg_notify($1, 'marker')")
            .bind(RUNS_CHANNEL)
            .execute(&pool)
            .await?;
        woken(&mut queued, "marker").await;

        let released = matches!(ending, Ending::Released { .. });
        head.end(&pool, ending.clone()).await?;
        woken(&mut queued, GRAPH).await;
        let next = claim_one(&pool, &worker).await.expect("claimable at once");
        let expected = if released { run_ids[0] } else { run_ids[1] };
        assert_eq!(next.run_id(), expected, "after {ending:?}");
        // Out of the way of the next thread's runs.
        next.end(&pool, Ending::RolledBack).await?;
        if released {
            let behind = claim_one(&pool, &worker).await.expect("the run behind");
            behind.end(&pool, Ending::RolledBack).await?;
        }
    }
    Ok(())
}

/// Resolves when claimers of `graph` are woken.
async fn woken(queued: &mut tokio::sync::broadcast::Receiver<Queued>, graph: &str) {
    within(async {
        loop {
            match queued.recv().await.expect("listening") {
                Queued::Graph(graph_id) if graph_id == graph => return,
                Queued::Graph(_) => {}
                Queued::Reconnected => panic!("the listener reconnected: wake-ups may be lost"),
            }
        }
    })
    .await;
}
