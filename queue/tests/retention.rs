//! Retention deletes whole threads idle longer than their graph's policy, and nothing else; a
//! thread's retention clock, and the exact date of its state beside it.

use mostrador_queue::data::retention::{self, Report, Sweep};
use mostrador_queue::run::ending::{Ending, end_many};
use mostrador_queue::run::event::{self, NewEvent};
use mostrador_queue::run::{self, NewRun};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{ThreadId, ThreadStatus, claim};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::{claim_one, enqueue, new_run, new_worker};

/// A thread of `graph` with a finished run, its three events (with `end`) and a checkpoint, last active `days_idle`
/// days ago.
async fn history(pool: &PgPool, graph: &str, days_idle: i32) -> Uuid {
    history_ending(pool, graph, days_idle, Ending::Success).await
}

/// As [`history`], its run ending with `ending`.
async fn history_ending(pool: &PgPool, graph: &str, days_idle: i32, ending: Ending) -> Uuid {
    let thread = thread::create(pool, &NewThread::new(graph, "ana"))
        .await
        .expect("thread");
    enqueue(pool, NewRun::new(thread.thread_id, graph)).await;
    let worker = new_worker(pool).await;
    let held = claim(pool, worker.worker_id, &[graph.to_owned()], 1)
        .await
        .expect("claim")
        .pop()
        .expect("the run");
    event::append(
        pool,
        held.lease(),
        &[
            NewEvent::new("values", json!({})),
            NewEvent::new("updates", json!({})),
        ],
    )
    .await
    .expect("events");
    held.end(pool, ending).await.expect("complete");
    let id = thread.thread_id.0;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "insert into mostrador.checkpoints (thread_id, checkpoint_id, step) values ('{id}', gen_random_uuid(), 1);
         insert into mostrador.checkpoint_blobs (thread_id, channel, version, value) values ('{id}', 'messages', 1, '[]'), ('{id}', 'store', 1, '\"x\"');
         insert into mostrador.checkpoint_writes (thread_id, checkpoint_id, task_id, idx, channel, value) values ('{id}', gen_random_uuid(), '0:agent', 0, 'messages', '[]');
         update mostrador.threads set last_activity_at = now() - interval '{days_idle} days' where thread_id = '{id}';"
    )))
    .execute(pool)
    .await
    .expect("checkpoint rows");
    id
}

/// Rows a thread has in each table: runs, events, checkpoints, blobs, writes.
async fn rows(pool: &PgPool, thread_id: Uuid) -> [i64; 5] {
    let counts: (i64, i64, i64, i64, i64) = sqlx::query_as(
        "select
            (select count(*) from mostrador.runs where thread_id = $1),
            (select count(*) from mostrador.run_events e join mostrador.runs r using (run_id) where r.thread_id = $1),
            (select count(*) from mostrador.checkpoints where thread_id = $1),
            (select count(*) from mostrador.checkpoint_blobs where thread_id = $1),
            (select count(*) from mostrador.checkpoint_writes where thread_id = $1)",
    )
    .bind(thread_id)
    .fetch_one(pool)
    .await
    .expect("counts");
    [counts.0, counts.1, counts.2, counts.3, counts.4]
}

fn all() -> Sweep {
    Sweep {
        graph: None,
        batch: 2,
        dry_run: false,
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn retention_deletes_whole_idle_threads_only(pool: PgPool) {
    // tienda keeps 7 days, cliente 90.
    let idle = [
        history(&pool, "tienda", 8).await,
        history(&pool, "tienda", 30).await,
        history(&pool, "tienda", 9).await,
    ];
    let recent = history(&pool, "tienda", 6).await;
    let long_kept = history(&pool, "cliente", 60).await;
    let busy = history(&pool, "tienda", 20).await;
    for thread in idle.iter().chain([&recent, &long_kept, &busy]) {
        assert_eq!(rows(&pool, *thread).await, [1, 3, 1, 2, 1], "before");
    }
    enqueue(&pool, NewRun::new(ThreadId(busy), "tienda")).await;

    let dry = retention::sweep(
        &pool,
        &Sweep {
            dry_run: true,
            ..all()
        },
        |_| {},
    )
    .await
    .expect("dry run");
    assert_eq!(
        dry.deleted, 4,
        "the three idle ones and the busy one are listed"
    );
    assert_eq!(
        rows(&pool, idle[0]).await,
        [1, 3, 1, 2, 1],
        "a dry run changes nothing"
    );

    let report = retention::sweep(&pool, &all(), |_| {})
        .await
        .expect("sweep");
    assert_eq!(report.deleted, 3);
    assert_eq!(report.skipped, 1, "the thread with a pending run");
    assert_eq!(
        (
            report.rows.runs,
            report.rows.events,
            report.rows.checkpoints,
            report.rows.blobs,
            report.rows.writes
        ),
        (3, 9, 3, 6, 3)
    );
    for thread in idle {
        assert_eq!(rows(&pool, thread).await, [0; 5], "{thread} deleted whole");
        let (deleted, purged): (bool, bool) = sqlx::query_as(
            "select deleted_at is not null, purged_at is not null from mostrador.threads where thread_id = $1",
        )
        .bind(thread)
        .fetch_one(&pool)
        .await
        .expect("thread row");
        assert!(deleted && purged, "the row stays, marked");
    }
    assert_eq!(
        rows(&pool, recent).await,
        [1, 3, 1, 2, 1],
        "recent: untouched"
    );
    assert_eq!(
        rows(&pool, long_kept).await,
        [1, 3, 1, 2, 1],
        "within cliente's 90 days"
    );
    assert_eq!(rows(&pool, busy).await, [2, 3, 1, 2, 1], "busy: skipped");
    assert!(thread::get(&pool, ThreadId(busy)).await.is_ok());

    let again = retention::sweep(&pool, &all(), |_| {})
        .await
        .expect("sweep");
    assert_eq!(
        again,
        Report {
            skipped: 1,
            ..Report::default()
        },
        "nothing left but the busy one"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn retention_purges_threads_the_api_deleted_and_unbound_idle_ones(pool: PgPool) {
    let deleted = history(&pool, "cliente", 1).await;
    thread::delete(&pool, ThreadId(deleted))
        .await
        .expect("delete");
    let unbound = thread::create(
        &pool,
        &NewThread {
            graph_id: None,
            ..NewThread::new("x", "ana")
        },
    )
    .await
    .expect("thread")
    .thread_id
    .0;
    sqlx::query("update mostrador.threads set last_activity_at = now() - interval '8 days' where thread_id = $1")
        .bind(unbound)
        .execute(&pool)
        .await
        .expect("idle");
    let only_tienda = retention::sweep(
        &pool,
        &Sweep {
            graph: Some("tienda".into()),
            ..all()
        },
        |_| {},
    )
    .await
    .expect("sweep");
    assert_eq!(only_tienda.deleted, 0);

    let report = retention::sweep(&pool, &all(), |_| {})
        .await
        .expect("sweep");
    assert_eq!(report.deleted, 2, "{report:?}");
    assert_eq!(rows(&pool, deleted).await, [0; 5]);
    let purged: i64 =
        sqlx::query_scalar("select count(*) from mostrador.threads where purged_at is not null")
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(purged, 2);

    // A graph without a policy of its own follows `_default`'s; without that one either, a
    // graph named is an error.
    sqlx::query("delete from mostrador.retention_policies where graph_id = '_default'")
        .execute(&pool)
        .await
        .expect("no default");
    let unknown = retention::sweep(
        &pool,
        &Sweep {
            graph: Some("nope".into()),
            ..all()
        },
        |_| {},
    )
    .await;
    assert!(unknown.is_err(), "a graph without a policy is an error");
}

/// A run's end tells when the thread's state changed to the instant, and leaves the thread's
/// indexes alone: its retention clock (the one indexed time) moves only when a minute old, so the
/// thread's new version stays on its page (a HOT update, no index entry written).
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_runs_end_dates_the_state_exactly_and_writes_no_index_entry_of_its_thread(
    pool: PgPool,
) -> anyhow::Result<()> {
    let clock = |thread_id: ThreadId| {
        sqlx::query_scalar::<_, chrono::DateTime<chrono::Utc>>(
            "select last_activity_at from mostrador.threads where thread_id = $1",
        )
        .bind(thread_id.0)
        .fetch_one(&pool)
    };
    let worker = new_worker(&pool).await;

    let run = new_run(&pool).await;
    let before = clock(run.thread_id).await?;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    let mut tx = pool.begin().await?;
    assert!(
        end_many(&mut tx, &[claimed.ending(Ending::Success)])
            .await?
            .is_empty()
    );
    let (updated, hot): (i64, i64) = sqlx::query_as(
        "select pg_stat_get_xact_tuples_updated('mostrador.threads'::regclass),
                pg_stat_get_xact_tuples_hot_updated('mostrador.threads'::regclass)",
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    assert_eq!(
        (updated, hot),
        (1, 1),
        "the thread's update wrote index entries"
    );
    let ended = run::get(&pool, run.thread_id, run.run_id).await?;
    let thread = thread::get(&pool, run.thread_id).await?;
    assert_eq!(thread.status, ThreadStatus::Idle);
    assert!(thread.state_updated_at >= ended.finished_at.expect("finished"));
    assert_eq!(clock(run.thread_id).await?, before, "a fresh clock moved");

    // A clock more than a minute old is restarted by the end.
    let run = new_run(&pool).await;
    sqlx::query(
        "update mostrador.threads set last_activity_at = now() - interval '30 days'
         where thread_id = $1",
    )
    .bind(run.thread_id.0)
    .execute(&pool)
    .await?;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    assert!(
        end_many(
            &mut *pool.acquire().await?,
            &[claimed.ending(Ending::Success)]
        )
        .await?
        .is_empty()
    );
    let ended = run::get(&pool, run.thread_id, run.run_id).await?;
    assert!(clock(run.thread_id).await? >= ended.finished_at.expect("finished"));
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn graphs_without_a_policy_of_their_own_follow_the_default_one(pool: PgPool) {
    // `_default` keeps 90 days: a Python graph's threads, unknown to the migrations.
    let old = history(&pool, "agent", 91).await;
    let other_old = history(&pool, "memory", 120).await;
    let recent = history(&pool, "agent", 30).await;
    let kept_by_its_own = history(&pool, "cliente", 89).await;
    let report = retention::sweep(&pool, &all(), |_| {})
        .await
        .expect("sweep");
    assert_eq!(report.deleted, 2);
    for thread in [old, other_old] {
        assert_eq!(rows(&pool, thread).await, [0; 5], "{thread} deleted whole");
    }
    for thread in [recent, kept_by_its_own] {
        assert_eq!(rows(&pool, thread).await, [1, 3, 1, 2, 1]);
    }
    // One graph by name, though it has no row of its own.
    let older = history(&pool, "agent", 100).await;
    let report = retention::sweep(
        &pool,
        &Sweep {
            graph: Some("agent".into()),
            ..all()
        },
        |_| {},
    )
    .await
    .expect("a graph without a policy of its own has the default one");
    assert_eq!(report.deleted, 1);
    assert_eq!(rows(&pool, older).await, [0; 5]);
    // The operator changes the default as any policy.
    sqlx::query("update mostrador.retention_policies set days = 10 where graph_id = '_default'")
        .execute(&pool)
        .await
        .expect("policy");
    let report = retention::sweep(&pool, &all(), |_| {})
        .await
        .expect("sweep");
    assert_eq!(report.deleted, 1, "the 30-day-old one now");
    assert_eq!(rows(&pool, recent).await, [0; 5]);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_temporary_threads_run_deletes_it_when_it_ends_and_retention_purges_it(pool: PgPool) {
    let kept = thread::create(&pool, &NewThread::new("tienda", "ana"))
        .await
        .expect("thread");
    let temporary = thread::create(
        &pool,
        &NewThread {
            temporary: true,
            ..NewThread::new("tienda", "ana")
        },
    )
    .await
    .expect("thread");
    let worker = new_worker(&pool).await;
    for thread in [&kept, &temporary] {
        enqueue(&pool, NewRun::new(thread.thread_id, "tienda")).await;
        let held = claim_one(&pool, &worker).await.expect("the run");
        held.end(&pool, Ending::Success).await.expect("complete");
    }
    assert!(thread::get(&pool, kept.thread_id).await.is_ok());
    assert!(
        thread::get(&pool, temporary.thread_id).await.is_err(),
        "gone with its run's end"
    );
    let report = retention::sweep(&pool, &all(), |_| {})
        .await
        .expect("sweep");
    assert_eq!(report.deleted, 1, "purged by the next pass");
    assert_eq!(rows(&pool, temporary.thread_id.0).await[0], 0);
    assert!(rows(&pool, kept.thread_id.0).await[0] == 1);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_threads_time_to_live_deletes_it_or_keeps_its_latest_checkpoint_once_idle(pool: PgPool) {
    use mostrador_queue::thread::Ttl;

    let with_ttl = |keep_latest: bool| {
        let pool = pool.clone();
        async move {
            let thread = thread::create(
                &pool,
                &NewThread {
                    ttl: Some(Ttl {
                        minutes: 60.0,
                        keep_latest,
                    }),
                    ..NewThread::new("tienda", "ana")
                },
            )
            .await
            .expect("thread");
            thread.thread_id.0
        }
    };
    // Two finished histories given a time to live, idle two hours; one within its hour.
    let deleted = history(&pool, "tienda", 0).await;
    let pruned = history(&pool, "tienda", 0).await;
    let fresh = history(&pool, "tienda", 0).await;
    for (thread, strategy, idle) in [
        (deleted, "delete", "2 hours"),
        (pruned, "keep_latest", "2 hours"),
        (fresh, "delete", "10 minutes"),
    ] {
        sqlx::query(
            "update mostrador.threads set ttl_minutes = 60, ttl_strategy = $2,
                 last_activity_at = now() - $3::interval
             where thread_id = $1",
        )
        .bind(thread)
        .bind(strategy)
        .bind(idle)
        .execute(&pool)
        .await
        .expect("ttl");
    }
    // A second checkpoint for the pruned one, so that it has one to lose.
    sqlx::query(
        "insert into mostrador.checkpoints (thread_id, checkpoint_id, step) values ($1, gen_random_uuid(), 2)",
    )
    .bind(pruned)
    .execute(&pool)
    .await
    .expect("checkpoint");
    let untouched = with_ttl(false).await;
    let expired = retention::expire(&pool, 100).await.expect("expire");
    assert_eq!(
        expired,
        retention::Expired {
            deleted: 1,
            pruned: 1
        }
    );
    assert_eq!(rows(&pool, deleted).await, [0; 5], "deleted whole");
    assert_eq!(
        rows(&pool, pruned).await[2],
        1,
        "only its latest checkpoint"
    );
    assert!(
        thread::get(&pool, ThreadId(pruned)).await.is_ok(),
        "and kept"
    );
    assert_eq!(rows(&pool, fresh).await, [1, 3, 1, 2, 1]);
    assert!(thread::get(&pool, ThreadId(untouched)).await.is_ok());
    // Pruned once until its next activity.
    assert_eq!(
        retention::expire(&pool, 100).await.expect("expire"),
        retention::Expired::default()
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_thread_waiting_on_an_approval_outlives_retention(pool: PgPool) {
    // tienda keeps 7 days; both threads idle 30, one of them paused on an interrupt.
    let waiting = history_ending(&pool, "tienda", 30, Ending::Paused).await;
    let finished = history(&pool, "tienda", 30).await;
    let status = |thread: Uuid| {
        let pool = pool.clone();
        async move {
            thread::get(&pool, ThreadId(thread))
                .await
                .expect("thread")
                .status
        }
    };
    assert_eq!(status(waiting).await, ThreadStatus::Interrupted);

    let mut listed = Vec::new();
    retention::sweep(
        &pool,
        &Sweep {
            dry_run: true,
            ..all()
        },
        |candidate| listed.push(candidate.thread_id),
    )
    .await
    .expect("dry run");
    assert_eq!(
        listed,
        [finished],
        "a dry run does not list the waiting one"
    );

    let report = retention::sweep(&pool, &all(), |_| {})
        .await
        .expect("sweep");
    assert_eq!(report.deleted, 1);
    assert_eq!(rows(&pool, finished).await, [0; 5]);
    assert_eq!(rows(&pool, waiting).await, [1, 3, 1, 2, 1], "kept whole");
    assert_eq!(
        status(waiting).await,
        ThreadStatus::Interrupted,
        "still waiting"
    );

    // Listed before it paused, it is still spared when its turn comes.
    let at = chrono::Utc::now();
    assert_eq!(
        retention::delete_thread(&pool, waiting, retention::Because::Idle(at))
            .await
            .expect("delete"),
        None
    );
    // Its own time to live is the client's rule: it holds.
    assert!(
        retention::delete_thread(&pool, waiting, retention::Because::Expired(at))
            .await
            .expect("delete")
            .is_some()
    );
    assert_eq!(rows(&pool, waiting).await, [0; 5]);
}
