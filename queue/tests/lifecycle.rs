//! A claimed run's transitions: fencing, drain release, lease expiry, retries, bad input.

use std::time::Duration;

use mostrador_queue::run::ending::{After, Ending, end_many, retry_backoff, write};
use mostrador_queue::run::event::{self, NewEvent};
use mostrador_queue::run::lease::sweep;
use mostrador_queue::run::{self, NewRun};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{Error, RunId, RunStatus, ThreadId, ThreadStatus};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::{
    GRAPH, claim_one, count_runs, enqueue, event_names, expire, make_due, new_run, new_thread,
    new_worker,
};

fn lost<T>(res: Result<T, Error>) -> bool {
    matches!(res, Err(Error::LeaseLost { attempt: 1, .. }))
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn stale_worker_cannot_complete_reclaimed_run(pool: PgPool) -> anyhow::Result<()> {
    let run = new_run(&pool).await;
    let stale = new_worker(&pool).await;
    let fresh = new_worker(&pool).await;
    let first = claim_one(&pool, &stale).await.expect("claimed");
    expire(&pool, &stale).await;
    assert_eq!(sweep(&pool).await?.requeued, vec![run.run_id]);
    let second = claim_one(&pool, &fresh).await.expect("claimed again");
    assert_eq!((second.run_id(), second.attempt()), (run.run_id, 2));

    let lease = first.lease();
    let endings = [
        Ending::Success,
        Ending::Failed {
            error: json!({"error": "x"}),
            retryable: true,
        },
        Ending::Released {
            reason: "drain".into(),
        },
    ];
    for ending in endings {
        let mut tx = pool.begin().await?;
        assert_eq!(
            end_many(&mut tx, &[first.ending(ending)]).await?,
            vec![lease]
        );
        tx.commit().await?;
    }
    assert!(lost(
        event::append(&pool, lease, &[NewEvent::new("values", json!({}))]).await
    ));
    let heartbeat = stale.heartbeat(&pool, &[lease]).await?;
    assert_eq!(heartbeat.lost, vec![lease]);
    assert!(lost(first.end(&pool, Ending::RolledBack).await));

    let now = run::get(&pool, run.thread_id, run.run_id).await?;
    assert_eq!(now.status, RunStatus::Running);
    assert_eq!(now.attempt, 2);
    assert_eq!(now.lease_owner, Some(fresh.worker_id));
    assert!(
        event_names(&pool, run.run_id).await.is_empty(),
        "the stale worker wrote nothing"
    );
    // The holder of the newer attempt is unaffected.
    assert!(
        fresh
            .heartbeat(&pool, &[second.lease()])
            .await?
            .lost
            .is_empty()
    );
    second.end(&pool, Ending::Success).await?;
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn drain_release_does_not_consume_attempt(pool: PgPool) -> anyhow::Result<()> {
    let thread = new_thread(&pool).await;
    let run = enqueue(
        &pool,
        NewRun {
            max_attempts: 2,
            ..NewRun::new(thread.thread_id, GRAPH)
        },
    )
    .await;
    let worker = new_worker(&pool).await;
    for drains in 1..=3 {
        let claimed = claim_one(&pool, &worker)
            .await
            .expect("released runs are claimable at once");
        claimed
            .end(
                &pool,
                Ending::Released {
                    reason: "sigterm".into(),
                },
            )
            .await?;
        let now = run::get(&pool, run.thread_id, run.run_id).await?;
        assert_eq!(now.status, RunStatus::Pending);
        assert_eq!(now.drain_count, drains);
        assert_eq!(now.attempt - now.drain_count, 0, "no attempt used up");
    }
    assert_eq!(event_names(&pool, run.run_id).await, vec!["drained"; 3]);

    // Had the drains used attempts, this retryable failure would end the run.
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    assert_eq!(claimed.attempts_used(), 1);
    assert_eq!(
        claimed
            .end(
                &pool,
                Ending::Failed {
                    error: json!({"error": "Flaky"}),
                    retryable: true
                }
            )
            .await?,
        After::Retrying
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn expired_lease_is_swept_and_counts_attempt(pool: PgPool) -> anyhow::Result<()> {
    let thread = new_thread(&pool).await;
    let run = enqueue(
        &pool,
        NewRun {
            max_attempts: 2,
            ..NewRun::new(thread.thread_id, GRAPH)
        },
    )
    .await;
    let live = new_worker(&pool).await;
    let live_run = new_run(&pool).await;

    let dead = new_worker(&pool).await;
    claim_one(&pool, &dead).await.expect("claimed");
    claim_one(&pool, &live)
        .await
        .expect("claimed the other run");
    assert_eq!(
        sweep(&pool).await?,
        Default::default(),
        "live leases are not swept"
    );

    expire(&pool, &dead).await;
    let swept = sweep(&pool).await?;
    assert_eq!((swept.requeued, swept.errored), (vec![run.run_id], vec![]));
    let now = run::get(&pool, run.thread_id, run.run_id).await?;
    assert_eq!(
        (now.status, now.attempt, now.lease_owner),
        (RunStatus::Pending, 1, None)
    );

    let dead_again = new_worker(&pool).await;
    let claimed = claim_one(&pool, &dead_again).await.expect("claimed again");
    assert_eq!(claimed.attempts_used(), 2);
    expire(&pool, &dead_again).await;
    let swept = sweep(&pool).await?;
    assert_eq!(
        (swept.requeued, swept.errored),
        (vec![], vec![run.run_id]),
        "last attempt ends in error"
    );
    let now = run::get(&pool, run.thread_id, run.run_id).await?;
    assert_eq!(now.status, RunStatus::Error);
    assert_eq!(
        now.error.as_ref().and_then(|e| e["error"].as_str()),
        Some("LeaseExpired")
    );
    assert!(now.finished_at.is_some());
    assert_eq!(event_names(&pool, run.run_id).await, vec!["error", "end"]);
    assert_eq!(
        thread::get(&pool, thread.thread_id).await?.status,
        ThreadStatus::Error
    );

    let other = run::get(&pool, live_run.thread_id, live_run.run_id).await?;
    assert_eq!(
        other.status,
        RunStatus::Running,
        "the live worker's run was never touched"
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn retry_schedules_backoff_then_errors_at_max_attempts(pool: PgPool) -> anyhow::Result<()> {
    let thread = new_thread(&pool).await;
    let run = enqueue(
        &pool,
        NewRun {
            max_attempts: 3,
            ..NewRun::new(thread.thread_id, GRAPH)
        },
    )
    .await;
    let worker = new_worker(&pool).await;
    let error = json!({"error": "ModelTimeout", "message": "no first token in 30s"});

    for attempt in 1..=2 {
        let claimed = claim_one(&pool, &worker).await.expect("due run is claimed");
        assert_eq!(claimed.attempt(), attempt);
        assert_eq!(
            claimed
                .end(
                    &pool,
                    Ending::Failed {
                        error: error.clone(),
                        retryable: true
                    }
                )
                .await?,
            After::Retrying
        );
        let delay: f64 = sqlx::query_scalar(
            "select extract(epoch from available_at - now())::float8 from mostrador.runs where run_id = $1",
        )
        .bind(run.run_id.0)
        .fetch_one(&pool)
        .await?;
        let expected = retry_backoff(attempt).as_secs_f64();
        assert!(
            (expected - 1.0..=expected).contains(&delay),
            "backoff {delay}s, expected about {expected}s"
        );
        assert!(
            claim_one(&pool, &worker).await.is_none(),
            "not claimable before its backoff"
        );
        make_due(&pool).await;
    }
    assert_eq!(retry_backoff(1), Duration::from_secs(2));
    assert_eq!(retry_backoff(2), Duration::from_secs(4));

    let last = claim_one(&pool, &worker).await.expect("claimed");
    assert_eq!(
        last.end(
            &pool,
            Ending::Failed {
                error: error.clone(),
                retryable: true
            }
        )
        .await?,
        After::Ended(RunStatus::Error),
        "no attempts left"
    );
    let now = run::get(&pool, run.thread_id, run.run_id).await?;
    assert_eq!(
        (now.status, now.error),
        (RunStatus::Error, Some(error.clone()))
    );
    assert_eq!(event_names(&pool, run.run_id).await, vec!["error", "end"]);
    assert_eq!(
        thread::get(&pool, thread.thread_id).await?.status,
        ThreadStatus::Error
    );

    // A failure that is not retryable ends the run at its first attempt.
    let fatal = new_run(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    assert_eq!(claimed.run_id(), fatal.run_id);
    assert_eq!(
        claimed
            .end(
                &pool,
                Ending::Failed {
                    error: error.clone(),
                    retryable: false
                }
            )
            .await?,
        After::Ended(RunStatus::Error)
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn complete_ends_run_and_rests_thread_together(pool: PgPool) -> anyhow::Result<()> {
    let run = new_run(&pool).await;
    assert_eq!(
        thread::get(&pool, run.thread_id).await?.status,
        ThreadStatus::Busy
    );
    let worker = new_worker(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    event::append(
        &pool,
        claimed.lease(),
        &[NewEvent::new("values", json!({"messages": []}))],
    )
    .await?;
    claimed.end(&pool, Ending::Paused).await?;

    let now = run::get(&pool, run.thread_id, run.run_id).await?;
    assert_eq!(now.status, RunStatus::Success);
    assert!(now.finished_at.is_some());
    assert_eq!(event_names(&pool, run.run_id).await, vec!["values", "end"]);
    let thread = thread::get(&pool, run.thread_id).await?;
    assert_eq!(thread.status, ThreadStatus::Interrupted);
    assert!(thread.state_updated_at >= now.started_at.expect("started"));
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn bad_input_is_a_typed_error_and_writes_nothing(pool: PgPool) -> anyhow::Result<()> {
    let nobody = ThreadId(Uuid::now_v7());
    let res = run::enqueue(&pool, &NewRun::new(nobody, GRAPH), None).await;
    assert!(matches!(res, Err(Error::ThreadNotFound(id)) if id == nobody));

    let thread = new_thread(&pool).await;
    let res = run::enqueue(&pool, &NewRun::new(thread.thread_id, "compras"), None).await;
    assert!(matches!(res, Err(Error::GraphMismatch { .. })));
    let res = run::enqueue(
        &pool,
        &NewRun {
            max_attempts: 0,
            ..NewRun::new(thread.thread_id, GRAPH)
        },
        None,
    )
    .await;
    assert!(matches!(
        res,
        Err(Error::Invalid {
            field: "max_attempts",
            ..
        })
    ));

    // One bad thread spoils the whole batch.
    let batch = vec![
        NewRun::new(thread.thread_id, GRAPH),
        NewRun::new(nobody, GRAPH),
    ];
    assert!(
        matches!(run::enqueue_batch(&pool, &batch, None).await, Err(Error::ThreadNotFound(id)) if id == nobody)
    );
    let batch = vec![
        NewRun::new(thread.thread_id, GRAPH),
        NewRun::new(thread.thread_id, "fichas"),
    ];
    assert!(matches!(
        run::enqueue_batch(&pool, &batch, None).await,
        Err(Error::GraphMismatch { .. })
    ));
    assert_eq!(count_runs(&pool).await, 0);

    let unknown = RunId(Uuid::now_v7());
    assert!(
        matches!(run::get(&pool, thread.thread_id, unknown).await, Err(Error::RunNotFound(id)) if id == unknown)
    );
    assert!(matches!(
        thread::get(&pool, nobody).await,
        Err(Error::ThreadNotFound(_))
    ));
    assert!(matches!(
        thread::touch(&pool, nobody).await,
        Err(Error::ThreadNotFound(_))
    ));
    let res = thread::create(
        &pool,
        &NewThread {
            metadata: json!("x"),
            ..NewThread::new(GRAPH, "ana")
        },
    )
    .await;
    assert!(matches!(
        res,
        Err(Error::Invalid {
            field: "metadata",
            ..
        })
    ));

    // What a claim writes once it is over is refused: here its run was rolled back, and a run
    // never claimed is left as it was.
    new_run(&pool).await;
    let worker = new_worker(&pool).await;
    let over = claim_one(&pool, &worker).await.expect("claimed");
    let ghost = over.lease();
    over.end(&pool, Ending::RolledBack).await?;
    let run = new_run(&pool).await;
    assert!(matches!(
        event::append(&pool, ghost, &[NewEvent::new("values", json!(1))]).await,
        Err(Error::LeaseLost { .. })
    ));
    let now = run::get(&pool, run.thread_id, run.run_id).await?;
    assert_eq!((now.status, now.attempt), (RunStatus::Pending, 0));
    assert!(event_names(&pool, run.run_id).await.is_empty());
    Ok(())
}

/// A failover to a standby that was behind can leave a run `running` under a worker that saw
/// its end written: the worker is alive and heartbeats, but does not hold it. It disowns such a
/// run once it has been untouched for a whole lease, and the sweep gives it back; a run just
/// claimed, not yet among what the worker says it holds, stays its own.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_run_its_live_worker_does_not_hold_is_given_back(pool: PgPool) -> anyhow::Result<()> {
    let forgotten_run = new_run(&pool).await;
    let worker = new_worker(&pool).await;
    let forgotten = claim_one(&pool, &worker).await.expect("claimed");
    let held_run = new_run(&pool).await;
    let held = claim_one(&pool, &worker).await.expect("claimed");
    let fresh_run = new_run(&pool).await;
    let fresh = claim_one(&pool, &worker).await.expect("claimed");
    // The end of `forgotten` is lost with the old primary; `held` the worker still runs; both
    // were claimed long ago.
    sqlx::query(
        "update mostrador.runs set updated_at = now() - interval '1 hour' where run_id = any($1)",
    )
    .bind(vec![forgotten.run_id().0, held.run_id().0])
    .execute(&pool)
    .await?;

    let heartbeat = worker.heartbeat(&pool, &[held.lease()]).await?;
    assert!(heartbeat.lost.is_empty(), "{heartbeat:?}");
    assert_eq!(sweep(&pool).await?.requeued, vec![forgotten.run_id()]);
    let now = |run: &mostrador_queue::Run| run::get(&pool, run.thread_id, run.run_id);
    assert_eq!(now(&forgotten_run).await?.status, RunStatus::Pending);
    for (run, lease) in [(&held_run, &held), (&fresh_run, &fresh)] {
        let now = now(run).await?;
        assert_eq!(
            (now.status, now.lease_owner, now.attempt),
            (RunStatus::Running, Some(worker.worker_id), lease.attempt())
        );
    }
    // Given back, it runs again: its attempt used up, as a lost worker's.
    let again = claim_one(&pool, &worker).await.expect("claimed again");
    assert_eq!((again.run_id(), again.attempt()), (forgotten.run_id(), 2));
    Ok(())
}

/// What a worker's publisher writes at once, in one statement: each run's events numbered on from
/// its log, then what its ending logs; a run given events only goes on running; a lost lease gets
/// neither its events nor its ending, and is reported once.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn events_and_endings_written_together_are_numbered_in_order_and_fenced_together(
    pool: PgPool,
) -> anyhow::Result<()> {
    for _ in 0..4 {
        new_run(&pool).await;
    }
    let worker = new_worker(&pool).await;
    let mut claimed =
        mostrador_queue::claim(&pool, worker.worker_id, &crate::support::graphs(), 4).await?;
    assert_eq!(claimed.len(), 4);
    let stale = claimed.pop().expect("four");
    let failing = claimed.pop().expect("three");
    let streaming = claimed.pop().expect("two");
    let ending = claimed.pop().expect("one");
    let value = |n: i64| NewEvent::new("values", json!({"n": n}));
    event::append(&pool, ending.lease(), &[value(1)]).await?;
    assert!(
        end_many(
            &mut *pool.acquire().await?,
            &[stale.ending(Ending::Success)]
        )
        .await?
        .is_empty()
    );

    let (first, stale_events) = ([value(2), value(3)], [value(9)]);
    let more = [value(4)];
    let appends = [
        (ending.lease(), &first[..]),
        (streaming.lease(), &more[..]),
        (stale.lease(), &stale_events[..]),
    ];
    let ends = [
        ending.ending(Ending::Success),
        failing.ending(Ending::Failed {
            error: json!({"error": "boom"}),
            retryable: false,
        }),
        stale.ending(Ending::Success),
    ];
    let lost = write(&mut *pool.acquire().await?, &[], &appends, &ends).await?;
    assert_eq!(lost, vec![stale.lease()], "the stale lease, once");

    let log = |run_id: RunId| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, (i64, String, serde_json::Value)>(
                "select seq, event, data from mostrador.run_events where run_id = $1 order by seq",
            )
            .bind(run_id.0)
            .fetch_all(&pool)
            .await
            .expect("log")
        }
    };
    assert_eq!(
        log(ending.run_id()).await,
        [
            (1, "values".into(), json!({"n": 1})),
            (2, "values".into(), json!({"n": 2})),
            (3, "values".into(), json!({"n": 3})),
            (4, "end".into(), json!({"status": "success"})),
        ]
    );
    assert_eq!(
        log(streaming.run_id()).await,
        [(1, "values".into(), json!({"n": 4}))]
    );
    assert_eq!(
        log(failing.run_id()).await,
        [
            (1, "error".into(), json!({"error": "boom"})),
            (2, "end".into(), json!({"status": "error"})),
        ]
    );
    assert_eq!(
        log(stale.run_id()).await,
        [(1, "end".into(), json!({"status": "success"}))],
        "nothing after the ending"
    );

    let status = |run_id: RunId| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, (RunStatus, i64, ThreadStatus)>(
                "select r.status, r.event_seq, t.status from mostrador.runs r
                 join mostrador.threads t using (thread_id) where r.run_id = $1",
            )
            .bind(run_id.0)
            .fetch_one(&pool)
            .await
            .expect("status")
        }
    };
    assert_eq!(
        status(ending.run_id()).await,
        (RunStatus::Success, 4, ThreadStatus::Idle)
    );
    let (run_status, event_seq, _) = status(streaming.run_id()).await;
    assert_eq!((run_status, event_seq), (RunStatus::Running, 1));
    assert_eq!(
        status(failing.run_id()).await,
        (RunStatus::Error, 2, ThreadStatus::Error)
    );
    Ok(())
}
