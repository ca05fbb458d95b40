//! Cancelling a run: pending runs end at once, running runs are signalled to their holder.

use mostrador_queue::listener::{Control, Queued};
use mostrador_queue::run;
use mostrador_queue::run::cancel::{CancelOutcome, cancel};
use mostrador_queue::run::ending::Ending;
use mostrador_queue::{CancelAction, Error, Listener, RunId, RunStatus, ThreadId};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::{self, claim_one, event_names, new_run, new_worker, within};

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn cancel_pending_run(pool: PgPool) -> anyhow::Result<()> {
    let run = new_run(&pool).await;
    let outcome = cancel(&pool, run.thread_id, run.run_id, CancelAction::Interrupt).await?;
    assert_eq!(outcome, CancelOutcome::Interrupted);
    let now = run::get(&pool, run.thread_id, run.run_id).await?;
    assert_eq!(now.status, RunStatus::Interrupted);
    assert!(now.finished_at.is_some());
    assert_eq!(event_names(&pool, run.run_id).await, vec!["end"]);
    let again = cancel(&pool, run.thread_id, run.run_id, CancelAction::Rollback).await?;
    assert_eq!(
        again,
        CancelOutcome::AlreadyFinished(RunStatus::Interrupted),
        "finished runs stay"
    );

    let doomed = new_run(&pool).await;
    let outcome = cancel(
        &pool,
        doomed.thread_id,
        doomed.run_id,
        CancelAction::Rollback,
    )
    .await?;
    assert_eq!(outcome, CancelOutcome::Deleted);
    assert!(matches!(
        run::get(&pool, doomed.thread_id, doomed.run_id).await,
        Err(Error::RunNotFound(_))
    ));

    let worker = new_worker(&pool).await;
    assert!(
        claim_one(&pool, &worker).await.is_none(),
        "cancelled runs are never claimed"
    );

    // Unknown runs, and runs of another thread, are not found.
    let unknown = RunId(Uuid::now_v7());
    let res = cancel(&pool, run.thread_id, unknown, CancelAction::Interrupt).await;
    assert!(matches!(res, Err(Error::RunNotFound(_))));
    let res = cancel(
        &pool,
        ThreadId(Uuid::now_v7()),
        run.run_id,
        CancelAction::Interrupt,
    )
    .await;
    assert!(matches!(res, Err(Error::RunNotFound(_))));
    Ok(())
}

/// A worker's listener hears what a worker acts on, queue wake-ups and cancels, and no run's
/// events (it follows none; every event of every run would be sent to it and parsed).
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_workers_listener_hears_wake_ups_and_cancels_and_follows_no_run(
    pool: PgPool,
) -> anyhow::Result<()> {
    let listener = Listener::start_for_worker(pool.clone(), std::future::pending()).await?;
    let (mut queued, mut control) = (listener.queued(), listener.control());
    let run = new_run(&pool).await;
    assert_eq!(
        within(queued.recv()).await?,
        Queued::Graph(support::GRAPH.into())
    );
    let worker = new_worker(&pool).await;
    claim_one(&pool, &worker).await.expect("claimed");
    cancel(&pool, run.thread_id, run.run_id, CancelAction::Interrupt).await?;
    assert!(matches!(
        within(control.recv()).await?,
        Control::Cancel { run_id, .. } if run_id == run.run_id
    ));
    let following = std::panic::catch_unwind(|| listener.subscribe_run(run.run_id));
    assert!(following.is_err(), "a worker's listener followed a run");
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn cancel_running_run_notifies_the_holder(pool: PgPool) -> anyhow::Result<()> {
    let listener = Listener::start(pool.clone(), std::future::pending()).await?;
    let mut control = listener.control();
    let run = new_run(&pool).await;
    let worker = new_worker(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");

    let outcome = cancel(&pool, run.thread_id, run.run_id, CancelAction::Interrupt).await?;
    assert_eq!(
        outcome,
        CancelOutcome::Signalled {
            holder: Some(worker.worker_id)
        }
    );
    let signal = within(control.recv()).await?;
    assert_eq!(
        signal,
        Control::Cancel {
            run_id: run.run_id,
            action: CancelAction::Interrupt,
            holder: Some(worker.worker_id)
        }
    );

    // The row is the truth: a heartbeat reports the cancel even if the notification was lost.
    let heartbeat = worker.heartbeat(&pool, &[claimed.lease()]).await?;
    assert_eq!(
        heartbeat.cancels,
        vec![(claimed.lease(), CancelAction::Interrupt)]
    );
    assert!(heartbeat.lost.is_empty());

    // Rollback is stronger than interrupt, and not weakened by a later interrupt.
    cancel(&pool, run.thread_id, run.run_id, CancelAction::Rollback).await?;
    cancel(&pool, run.thread_id, run.run_id, CancelAction::Interrupt).await?;
    let heartbeat = worker.heartbeat(&pool, &[claimed.lease()]).await?;
    assert_eq!(
        heartbeat.cancels,
        vec![(claimed.lease(), CancelAction::Rollback)]
    );

    claimed.end(&pool, Ending::Cancelled).await?;
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_rollback_deletes_its_runs_checkpoints_in_its_own_thread_only(
    pool: PgPool,
) -> anyhow::Result<()> {
    use mostrador_graph::checkpoint::{Checkpoint, Checkpointer};
    use mostrador_queue::PgCheckpointer;

    let run = new_run(&pool).await;
    let worker = new_worker(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    let checkpoint = Checkpoint {
        checkpoint_id: Uuid::now_v7(),
        parent_id: None,
        step: -1,
        versions: std::collections::BTreeMap::new(),
        next: Vec::new(),
        metadata: serde_json::json!({}),
        created_at: chrono::Utc::now(),
    };
    PgCheckpointer::fenced(pool.clone(), &claimed)
        .put(run.thread_id.0, &checkpoint, &Default::default(), &[])
        .await
        .map_err(|err| anyhow::anyhow!(err))?;
    // A copy of the thread holds the same checkpoint, made by the same run.
    let copy = support::new_thread(&pool).await;
    let reader = PgCheckpointer::new(pool.clone());
    reader
        .copy_thread(run.thread_id.0, copy.thread_id.0)
        .await
        .map_err(|err| anyhow::anyhow!(err))?;

    claimed.end(&pool, Ending::RolledBack).await?;
    let latest = |thread: ThreadId| {
        let reader = &reader;
        async move {
            reader
                .get(thread.0, None)
                .await
                .map_err(|err| anyhow::anyhow!(err))
        }
    };
    assert!(latest(run.thread_id).await?.is_none(), "gone with its run");
    assert!(
        latest(copy.thread_id).await?.is_some(),
        "the copy's is its own: another thread's rollback leaves it"
    );
    Ok(())
}
