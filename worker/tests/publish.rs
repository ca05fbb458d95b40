//! The publisher: when a run's events are written (a streamed run's first at once, another's
//! with its end or the next flush), and runs told when the publisher is gone.

use std::sync::Arc;
use std::time::Duration;

use mostrador_graph::{RunControl, StreamMode};
use mostrador_queue::run::NewRun;
use mostrador_queue::run::ending::Ending;
use mostrador_queue::{NewEvent, RunId, RunStatus};
use mostrador_worker::publish::Publisher;
use mostrador_worker::{Executor, Finish, RunHandle};
use serde_json::json;
use sqlx::PgPool;
use tokio::sync::Notify;

use crate::support::{Starts, abc, claim_next, enqueue, executor};

/// The transactions that wrote the run's events, in the order of its events.
async fn commits_of_events(pool: &PgPool, run_id: RunId) -> Vec<(String, String)> {
    sqlx::query_as(
        "select xmin::text, event from mostrador.run_events where run_id = $1 order by seq",
    )
    .bind(run_id.0)
    .fetch_all(pool)
    .await
    .expect("events")
}

/// An executor whose publisher writes only what cannot wait: within a test, nothing is written
/// for having waited its flush interval.
fn executor_without_ticks(pool: &PgPool) -> Executor {
    executor(pool).flush_interval(Duration::from_secs(3600))
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_run_nobody_streams_has_its_events_written_with_its_end_in_one_commit(
    pool: PgPool,
) -> anyhow::Result<()> {
    enqueue(&pool, None, |new| NewRun {
        stream_mode: vec![StreamMode::Values, StreamMode::Updates],
        ..new
    })
    .await;
    let claimed = claim_next(&pool).await;
    assert!(!claimed.streamed);
    let run_id = claimed.run_id();
    let finish = executor_without_ticks(&pool)
        .execute(
            claimed,
            &abc(&Starts::default(), Arc::new(Notify::new()), None),
            &RunHandle::new(),
            None,
        )
        .await?;
    assert_eq!(finish, Finish::Ended(RunStatus::Success));
    let commits = commits_of_events(&pool, run_id).await;
    assert!(commits.len() > 4, "every superstep's events: {commits:?}");
    assert_eq!(commits.last().map(|(_, event)| event.as_str()), Some("end"));
    assert!(
        commits.iter().all(|(xmin, _)| *xmin == commits[0].0),
        "one transaction wrote them all: {commits:?}"
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_streamed_runs_first_event_is_written_at_once_while_it_runs(
    pool: PgPool,
) -> anyhow::Result<()> {
    enqueue(&pool, None, |new| NewRun {
        streamed: true,
        ..new
    })
    .await;
    let claimed = claim_next(&pool).await;
    assert!(claimed.streamed);
    let run_id = claimed.run_id();
    let mut listener = sqlx::postgres::PgListener::connect_with(&pool).await?;
    listener
        .listen(mostrador_queue::listener::EVENTS_CHANNEL)
        .await?;
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let graph = abc(
        &Starts::default(),
        Arc::clone(&started),
        Some(Arc::clone(&release)),
    );
    let executor = executor_without_ticks(&pool);
    let run = tokio::spawn(async move {
        executor
            .execute(claimed, &graph, &RunHandle::new(), None)
            .await
    });
    started.notified().await;
    // `b` holds the run (for at most a second): its first events are announced meanwhile.
    loop {
        let notification = listener.recv().await?;
        if notification.payload().contains(&run_id.0.to_string()) {
            break;
        }
    }
    let written = commits_of_events(&pool, run_id).await;
    assert!(
        !written.is_empty() && written.iter().all(|(_, event)| event != "end"),
        "written before the run ended: {written:?}"
    );
    release.notify_one();
    assert_eq!(run.await??, Finish::Ended(RunStatus::Success));
    let commits = commits_of_events(&pool, run_id).await;
    assert_ne!(
        commits.first().map(|(xmin, _)| xmin),
        commits.last().map(|(xmin, _)| xmin),
        "the end came in a later commit: {commits:?}"
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn runs_are_told_when_the_publisher_is_gone_and_the_worker_can_tell(
    pool: PgPool,
) -> anyhow::Result<()> {
    enqueue(&pool, None, |new| new).await;
    let claimed = claim_next(&pool).await;
    let publisher = Publisher::start(pool.clone());
    let events = publisher.register(claimed.lease(), RunControl::new(), false);
    publisher.abort();
    tokio::time::timeout(Duration::from_secs(5), publisher.stopped())
        .await
        .expect("the supervisor learns it");
    assert!(matches!(
        events.flush().await,
        Err(mostrador_worker::Error::Publish { .. })
    ));
    Ok(())
}

/// Once a run holds its final checkpoint for its ending, what it sends is written with the
/// ending, never before it: no client sees an event ahead of the checkpoint it follows.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn events_sent_after_a_held_final_checkpoint_wait_for_the_ending(
    pool: PgPool,
) -> anyhow::Result<()> {
    enqueue(&pool, None, |new| new).await;
    let claimed = claim_next(&pool).await;
    let run_id = claimed.run_id();
    let publisher = Publisher::start(pool.clone());
    let events = publisher.register(claimed.lease(), RunControl::new(), true);
    events.push(NewEvent::new("values", json!({"step": 0})));
    assert!(events.flush().await?);
    assert_eq!(commits_of_events(&pool, run_id).await.len(), 1);

    events.hold_for_end();
    events.push(NewEvent::new("values", json!({"step": 1})));
    // A flush writes every run's buffer it may: not this one.
    assert!(events.flush().await?);
    assert_eq!(commits_of_events(&pool, run_id).await.len(), 1);

    assert!(events.end(claimed.ending(Ending::Success)).await?);
    let commits = commits_of_events(&pool, run_id).await;
    let events: Vec<&str> = commits.iter().map(|(_, event)| event.as_str()).collect();
    assert_eq!(events, ["values", "values", "end"]);
    assert_ne!(commits[0].0, commits[1].0);
    assert_eq!(commits[1].0, commits[2].0, "written with the ending");
    Ok(())
}
