//! Enqueue: multitask strategies (what a new run does to the runs in flight on its thread),
//! batches and backpressure.

use mostrador_queue::run::ending::Ending;
use std::time::Duration;

use mostrador_graph::StreamMode;
use mostrador_queue::CancelOutcome;
use mostrador_queue::run::{self, MultitaskStrategy, NewRun, QueueLimit, RunConfig};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{CancelAction, Error, RunStatus, Thread};
use sqlx::PgPool;

use crate::support::{GRAPH, claim_one, count_runs, enqueue, event_names, new_thread, new_worker};

fn with(strategy: MultitaskStrategy, thread: &Thread) -> NewRun {
    NewRun {
        multitask_strategy: strategy,
        ..NewRun::new(thread.thread_id, GRAPH)
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn reject_strategy_conflicts_with_a_run_in_flight(pool: PgPool) -> anyhow::Result<()> {
    let thread = new_thread(&pool).await;
    let first = enqueue(&pool, with(MultitaskStrategy::Reject, &thread)).await;
    let res = run::enqueue(&pool, &with(MultitaskStrategy::Reject, &thread), None).await;
    assert!(matches!(res, Err(Error::Conflict { run_id, .. }) if run_id == first.run_id));
    assert_eq!(
        count_runs(&pool).await,
        1,
        "the rejected run was not inserted"
    );

    // Once the first run is running, still a conflict; once it has finished, no conflict.
    let worker = new_worker(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    let res = run::enqueue(&pool, &with(MultitaskStrategy::Reject, &thread), None).await;
    assert!(matches!(res, Err(Error::Conflict { .. })));
    claimed.end(&pool, Ending::Success).await?;
    enqueue(&pool, with(MultitaskStrategy::Reject, &thread)).await;
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn enqueue_strategy_queues_behind_the_run_in_flight(pool: PgPool) -> anyhow::Result<()> {
    let thread = new_thread(&pool).await;
    let first = enqueue(&pool, with(MultitaskStrategy::Reject, &thread)).await;
    let worker = new_worker(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    let second = run::enqueue(&pool, &with(MultitaskStrategy::Enqueue, &thread), None).await?;
    assert!(second.cancelled.is_empty());
    assert_eq!(second.run.status, RunStatus::Pending);
    assert!(
        claim_one(&pool, &worker).await.is_none(),
        "waits while the first runs"
    );

    claimed.end(&pool, Ending::Success).await?;
    let next = claim_one(&pool, &worker)
        .await
        .expect("the queued run follows");
    assert_eq!(next.run_id(), second.run.run_id);
    assert_eq!(
        run::get(&pool, thread.thread_id, first.run_id)
            .await?
            .status,
        RunStatus::Success
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn interrupt_strategy_cancels_the_run_in_flight(pool: PgPool) -> anyhow::Result<()> {
    let thread = new_thread(&pool).await;
    let worker = new_worker(&pool).await;
    let running = enqueue(&pool, with(MultitaskStrategy::Reject, &thread)).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    let queued = enqueue(&pool, with(MultitaskStrategy::Enqueue, &thread)).await;

    let new = run::enqueue(&pool, &with(MultitaskStrategy::Interrupt, &thread), None).await?;
    assert_eq!(
        new.cancelled,
        vec![
            (queued.run_id, CancelOutcome::Interrupted),
            (
                running.run_id,
                CancelOutcome::Signalled {
                    holder: Some(worker.worker_id)
                }
            ),
        ]
    );
    let queued_now = run::get(&pool, thread.thread_id, queued.run_id).await?;
    assert_eq!(
        queued_now.status,
        RunStatus::Interrupted,
        "a pending run ends at once"
    );
    assert_eq!(event_names(&pool, queued.run_id).await, vec!["end"]);
    let running_now = run::get(&pool, thread.thread_id, running.run_id).await?;
    assert_eq!(
        running_now.status,
        RunStatus::Running,
        "the holder ends a running run"
    );
    assert_eq!(running_now.cancel_action, Some(CancelAction::Interrupt));

    assert!(
        claim_one(&pool, &worker).await.is_none(),
        "the new run waits for the holder"
    );
    claimed.end(&pool, Ending::Cancelled).await?;
    assert_eq!(
        claim_one(&pool, &worker).await.expect("then runs").run_id(),
        new.run.run_id
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn rollback_strategy_cancels_the_run_in_flight(pool: PgPool) -> anyhow::Result<()> {
    let thread = new_thread(&pool).await;
    let worker = new_worker(&pool).await;
    let running = enqueue(&pool, with(MultitaskStrategy::Reject, &thread)).await;
    claim_one(&pool, &worker).await.expect("claimed");
    let queued = enqueue(&pool, with(MultitaskStrategy::Enqueue, &thread)).await;

    let new = run::enqueue(&pool, &with(MultitaskStrategy::Rollback, &thread), None).await?;
    assert_eq!(
        new.cancelled,
        vec![
            (queued.run_id, CancelOutcome::Deleted),
            (
                running.run_id,
                CancelOutcome::Signalled {
                    holder: Some(worker.worker_id)
                }
            ),
        ]
    );
    assert!(matches!(
        run::get(&pool, thread.thread_id, queued.run_id).await,
        Err(Error::RunNotFound(_))
    ));
    let running_now = run::get(&pool, thread.thread_id, running.run_id).await?;
    assert_eq!(running_now.cancel_action, Some(CancelAction::Rollback));
    assert_eq!(count_runs(&pool).await, 2);
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn backpressure_rejects_over_limit_and_inserts_nothing(pool: PgPool) -> anyhow::Result<()> {
    let limit = QueueLimit {
        retry_after: Duration::from_secs(5),
        ..QueueLimit::new(3)
    };
    let mut threads = Vec::new();
    for _ in 0..5 {
        threads.push(new_thread(&pool).await);
    }
    for thread in &threads[..2] {
        run::enqueue(&pool, &NewRun::new(thread.thread_id, GRAPH), Some(limit)).await?;
    }
    // A batch of two would make four: all of it is refused.
    let batch: Vec<NewRun> = threads[2..4]
        .iter()
        .map(|t| NewRun::new(t.thread_id, GRAPH))
        .collect();
    let res = run::enqueue_batch(&pool, &batch, Some(limit)).await;
    assert!(matches!(
        res,
        Err(Error::Backpressure {
            pending: 2,
            limit: 3,
            ..
        })
    ));
    assert_eq!(count_runs(&pool).await, 2);

    run::enqueue(
        &pool,
        &NewRun::new(threads[2].thread_id, GRAPH),
        Some(limit),
    )
    .await?;
    let res = run::enqueue(
        &pool,
        &NewRun::new(threads[3].thread_id, GRAPH),
        Some(limit),
    )
    .await;
    match res {
        Err(Error::Backpressure {
            graph_id,
            pending,
            limit,
            retry_after,
        }) => {
            assert_eq!((graph_id.as_str(), pending, limit), (GRAPH, 3, 3));
            assert_eq!(retry_after, Duration::from_secs(5));
        }
        other => panic!("expected backpressure, got {other:?}"),
    }
    assert_eq!(
        count_runs(&pool).await,
        3,
        "the refused run was not inserted"
    );

    // Other graphs have queues of their own, and claiming makes room.
    let other = thread::create(&pool, &NewThread::new("fichas", "bot")).await?;
    run::enqueue(&pool, &NewRun::new(other.thread_id, "fichas"), Some(limit)).await?;
    let worker = new_worker(&pool).await;
    claim_one(&pool, &worker).await.expect("claimed");
    run::enqueue(
        &pool,
        &NewRun::new(threads[3].thread_id, GRAPH),
        Some(limit),
    )
    .await?;
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn batch_enqueue_keeps_order_within_a_thread(pool: PgPool) -> anyhow::Result<()> {
    let thread = new_thread(&pool).await;
    let batch: Vec<NewRun> = (0..4)
        .map(|i| NewRun {
            input: Some(serde_json::json!({"i": i})),
            ..NewRun::new(thread.thread_id, GRAPH)
        })
        .collect();
    let run_ids = run::enqueue_batch(&pool, &batch, None).await?;
    let worker = new_worker(&pool).await;
    for (i, run_id) in run_ids.iter().enumerate() {
        let claimed = claim_one(&pool, &worker).await.expect("claimed");
        assert_eq!(claimed.run_id(), *run_id);
        assert_eq!(
            claimed.spec.as_ref().map(|spec| spec.input.clone()),
            Ok(Some(serde_json::json!({"i": i})))
        );
        claimed.end(&pool, Ending::Success).await?;
    }
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_batched_run_keeps_what_its_caller_gave_it(pool: PgPool) -> anyhow::Result<()> {
    let (first, second) = (new_thread(&pool).await, new_thread(&pool).await);
    let given = NewRun {
        config: RunConfig::from_value(serde_json::json!({"configurable": {"model": "m"}}))?,
        metadata: serde_json::json!({"source": "nightly"}),
        stream_mode: vec![StreamMode::Values, StreamMode::Updates],
        trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".into()),
        ..NewRun::new(first.thread_id, GRAPH)
    };
    let defaults = NewRun::new(second.thread_id, GRAPH);
    let run_ids = run::enqueue_batch(&pool, &[given, defaults], None).await?;

    let given = run::get(&pool, first.thread_id, run_ids[0]).await?;
    assert_eq!(
        given.config,
        serde_json::json!({"configurable": {"model": "m"}, "context": {}})
    );
    assert_eq!(given.metadata, serde_json::json!({"source": "nightly"}));
    assert_eq!(given.stream_mode, ["values", "updates"]);
    assert_eq!(
        given.trace_id.as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );

    // Empty objects stay objects; a run nobody traced has a trace of its own, its id's digits.
    let defaults = run::get(&pool, second.thread_id, run_ids[1]).await?;
    assert_eq!(defaults.config, serde_json::json!({"context": {}}));
    assert_eq!(defaults.metadata, serde_json::json!({}));
    assert_eq!(defaults.stream_mode, ["values"]);
    assert_eq!(defaults.trace_id, Some(run_ids[1].0.simple().to_string()));
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn unbound_thread_is_bound_by_its_first_run(pool: PgPool) -> anyhow::Result<()> {
    let thread = thread::create(&pool, &NewThread::unbound("ana")).await?;
    assert_eq!(thread.graph_id, None);

    // A batch cannot bind (two of its runs could name two graphs): refused, nothing written.
    let res = run::enqueue_batch(&pool, &[NewRun::new(thread.thread_id, GRAPH)], None).await;
    assert!(matches!(res, Err(Error::Invalid { .. })), "{res:?}");
    assert_eq!(count_runs(&pool).await, 0);

    let listener = mostrador_queue::Listener::start(pool.clone(), std::future::pending()).await?;
    let mut queued = listener.queued();
    // A run refused by the queue's limit binds nothing and wakes nobody.
    let refused = NewRun {
        multitask_strategy: MultitaskStrategy::Enqueue,
        ..NewRun::new(thread.thread_id, "fichas")
    };
    let res = run::enqueue(&pool, &refused, Some(QueueLimit::new(0))).await;
    assert!(matches!(res, Err(Error::Backpressure { .. })), "{res:?}");
    assert_eq!(thread::get(&pool, thread.thread_id).await?.graph_id, None);

    let first = NewRun {
        multitask_strategy: MultitaskStrategy::Enqueue,
        ..NewRun::new(thread.thread_id, GRAPH)
    };
    run::enqueue(&pool, &first, None).await?;
    let bound = thread::get(&pool, thread.thread_id).await?;
    assert_eq!(bound.graph_id.as_deref(), Some(GRAPH));
    assert_eq!(bound.metadata["graph_id"], GRAPH, "{bound:?}");
    let woken = tokio::time::timeout(Duration::from_secs(5), queued.recv()).await?;
    assert_eq!(
        woken?,
        mostrador_queue::listener::Queued::Graph(GRAPH.into()),
        "claimers are woken for the first run too, and not for the refused one before it"
    );

    let other = NewRun {
        multitask_strategy: MultitaskStrategy::Enqueue,
        ..NewRun::new(thread.thread_id, "another-graph")
    };
    let res = run::enqueue(&pool, &other, None).await;
    assert!(
        matches!(&res, Err(Error::GraphMismatch { thread_graph_id, .. }) if thread_graph_id == GRAPH),
        "{res:?}"
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn delayed_runs_do_not_take_the_budget_of_runs_due_now(pool: PgPool) -> anyhow::Result<()> {
    let limit = QueueLimit {
        retry_after: Duration::from_secs(5),
        ..QueueLimit::new(2)
    };
    let later = |thread: &Thread| NewRun {
        after: Duration::from_secs(3600),
        ..NewRun::new(thread.thread_id, GRAPH)
    };
    let mut threads = Vec::new();
    for _ in 0..5 {
        threads.push(new_thread(&pool).await);
    }
    // A flood of delayed runs fills the delayed budget ...
    run::enqueue(&pool, &later(&threads[0]), Some(limit)).await?;
    run::enqueue_batch(&pool, &[later(&threads[1])], Some(limit)).await?;
    let refused = run::enqueue(&pool, &later(&threads[2]), Some(limit)).await;
    assert!(
        matches!(refused, Err(Error::Backpressure { pending: 2, .. })),
        "{refused:?}"
    );
    // ... and runs due now are still taken, up to their own.
    run::enqueue(
        &pool,
        &NewRun::new(threads[3].thread_id, GRAPH),
        Some(limit),
    )
    .await?;
    run::enqueue_batch(
        &pool,
        &[NewRun::new(threads[4].thread_id, GRAPH)],
        Some(limit),
    )
    .await?;
    let refused = run::enqueue(
        &pool,
        &NewRun::new(threads[2].thread_id, GRAPH),
        Some(limit),
    )
    .await;
    assert!(
        matches!(refused, Err(Error::Backpressure { pending: 2, .. })),
        "{refused:?}"
    );
    assert_eq!(count_runs(&pool).await, 4);
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn one_caller_holds_no_more_than_their_share_of_pending_runs(
    pool: PgPool,
) -> anyhow::Result<()> {
    let limit = QueueLimit {
        max_pending_per_caller: 2,
        ..QueueLimit::new(100)
    };
    let of = |owner: &str| NewThread::new(GRAPH, owner);
    let mut ana = Vec::new();
    for _ in 0..3 {
        ana.push(thread::create(&pool, &of("ana")).await?);
    }
    let luis = thread::create(&pool, &of("luis")).await?;
    // Ana's share holds her runs due now and delayed, on any of her threads ...
    run::enqueue(&pool, &NewRun::new(ana[0].thread_id, GRAPH), Some(limit)).await?;
    let later = NewRun {
        after: Duration::from_secs(3600),
        ..NewRun::new(ana[1].thread_id, GRAPH)
    };
    run::enqueue(&pool, &later, Some(limit)).await?;
    let refused = run::enqueue(&pool, &NewRun::new(ana[2].thread_id, GRAPH), Some(limit)).await;
    match refused {
        Err(Error::CallerShare {
            owner,
            pending: 2,
            limit: 2,
            ..
        }) => assert_eq!(owner, "ana"),
        other => panic!("{other:?}"),
    }
    assert!(refused_is_transient(&pool, &ana[2], limit).await);
    // ... and others' runs are still taken.
    run::enqueue(&pool, &NewRun::new(luis.thread_id, GRAPH), Some(limit)).await?;
    assert_eq!(count_runs(&pool).await, 3);
    // Once one of hers started, she may queue another.
    claim_one(&pool, &new_worker(&pool).await).await;
    run::enqueue(&pool, &NewRun::new(ana[2].thread_id, GRAPH), Some(limit)).await?;
    Ok(())
}

async fn refused_is_transient(pool: &PgPool, thread: &Thread, limit: QueueLimit) -> bool {
    run::enqueue(pool, &NewRun::new(thread.thread_id, GRAPH), Some(limit))
        .await
        .is_err_and(|err| err.is_transient())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_run_delayed_past_the_horizon_is_refused(pool: PgPool) -> anyhow::Result<()> {
    let limit = QueueLimit {
        horizon: Duration::from_secs(3600),
        ..QueueLimit::new(100)
    };
    let thread = new_thread(&pool).await;
    let delayed = |seconds| NewRun {
        after: Duration::from_secs(seconds),
        ..NewRun::new(thread.thread_id, GRAPH)
    };
    for refused in [
        run::enqueue(&pool, &delayed(3601), Some(limit)).await.err(),
        run::enqueue_batch(&pool, &[delayed(3601)], Some(limit))
            .await
            .err(),
    ] {
        assert!(
            matches!(
                refused,
                Some(Error::Invalid {
                    field: "after_seconds",
                    ..
                })
            ),
            "{refused:?}"
        );
    }
    assert_eq!(count_runs(&pool).await, 0);
    run::enqueue(&pool, &delayed(3600), Some(limit)).await?;
    run::enqueue_batch(&pool, &[delayed(3600)], Some(limit)).await?;
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_callers_backlog_never_stands_before_another_callers_next_run(
    pool: PgPool,
) -> anyhow::Result<()> {
    let limit = QueueLimit::new(100);
    let mut ana = Vec::new();
    for _ in 0..5 {
        let thread = thread::create(&pool, &NewThread::new(GRAPH, "ana")).await?;
        ana.push(run::enqueue(&pool, &NewRun::new(thread.thread_id, GRAPH), Some(limit)).await?);
    }
    let luis = thread::create(&pool, &NewThread::new(GRAPH, "luis")).await?;
    let luis = run::enqueue(&pool, &NewRun::new(luis.thread_id, GRAPH), Some(limit)).await?;
    let worker = new_worker(&pool).await;
    let mut order = Vec::new();
    while let Some(claimed) = claim_one(&pool, &worker).await {
        order.push(claimed.run_id());
    }
    let ana: Vec<_> = ana.iter().map(|e| e.run.run_id).collect();
    assert_eq!(
        order,
        [ana[0], luis.run.run_id, ana[1], ana[2], ana[3], ana[4]],
        "luis's run comes after ana's first, not after her five"
    );
    Ok(())
}
