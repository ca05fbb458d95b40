//! Run events: appended in order, notified, and followed exactly once across listener outages.

use mostrador_queue::event::{self, EventFollower, NewEvent};
use mostrador_queue::listener::Queued;
use mostrador_queue::{Listener, RunEvent};
use serde_json::json;
use sqlx::PgPool;
use tokio::task::JoinSet;

use crate::support::{claim_one, new_run, new_worker, within};

/// Follows a run until `last` and returns the `seq`s received.
fn follow_until(
    follower: EventFollower,
    last: i64,
) -> impl Future<Output = anyhow::Result<Vec<i64>>> {
    let mut follower = follower;
    async move {
        let mut seqs = Vec::new();
        while let Some(RunEvent { seq, .. }) = follower.next().await? {
            seqs.push(seq);
            if seq == last {
                break;
            }
        }
        Ok(seqs)
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn listener_reconnect_loses_no_event(pool: PgPool) -> anyhow::Result<()> {
    const EVENTS: i64 = 300;
    let listener = Listener::start(pool.clone(), std::future::pending()).await?;
    let run = new_run(&pool).await;
    let worker = new_worker(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");

    let mut followers = JoinSet::new();
    for _ in 0..3 {
        let follower = EventFollower::start(pool.clone(), &listener, run.run_id, 0).await?;
        followers.spawn(follow_until(follower, EVENTS));
    }
    let mut reconnects = listener.queued();
    for seq in 1..=EVENTS {
        let appended = event::append(
            &pool,
            claimed.lease(),
            &[NewEvent::new("custom", json!({"n": seq}))],
        )
        .await?;
        assert_eq!(appended, seq);
        if seq % 100 == 50 {
            // Kill the listening backend while events keep coming.
            let pid = listener.backend_pid();
            let killed: bool = sqlx::query_scalar("select pg_terminate_backend($1)")
                .bind(pid)
                .fetch_one(&pool)
                .await?;
            assert!(killed);
        }
        if seq % 100 == 75 {
            // Appends go on during the outage; wait for the reconnect before the next kill.
            while within(reconnects.recv()).await? != Queued::Reconnected {}
        }
    }

    while let Some(res) = within(followers.join_next()).await {
        let seqs = res??;
        assert_eq!(
            seqs,
            (1..=EVENTS).collect::<Vec<_>>(),
            "every event once, in order"
        );
    }
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn follower_replays_after_last_event_id_then_streams_live(
    pool: PgPool,
) -> anyhow::Result<()> {
    let listener = Listener::start(pool.clone(), std::future::pending()).await?;
    let run = new_run(&pool).await;
    let worker = new_worker(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    // More than one read page of history, then an event too large to ride in its notification.
    let history: Vec<NewEvent> = (1..=1200)
        .map(|n| NewEvent::new("updates", json!({"n": n})))
        .collect();
    event::append(&pool, claimed.lease(), &history).await?;

    let follower = EventFollower::start(pool.clone(), &listener, run.run_id, 10).await?;
    let following = tokio::spawn(follow_until(follower, 1202));
    let big = NewEvent::new("values", json!({"text": "x".repeat(20_000)}));
    let (_, last_seqs) = event::append_many(
        &pool,
        &[(claimed.lease(), &[big, NewEvent::new("end", json!(null))])],
    )
    .await?;
    assert_eq!(last_seqs, vec![(run.run_id, 1202)]);

    let seqs = within(following).await??;
    assert_eq!(seqs, (11..=1202).collect::<Vec<_>>());
    let mut stored = EventFollower::start(pool.clone(), &listener, run.run_id, 1200).await?;
    let big = stored.next().await?.expect("stored");
    assert_eq!(big.seq, 1201);
    assert_eq!(big.data["text"].as_str().map(str::len), Some(20_000));
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn follower_of_a_rolled_back_run_ends_with_not_found(pool: PgPool) -> anyhow::Result<()> {
    let listener = Listener::start(pool.clone(), std::future::pending()).await?;
    let run = new_run(&pool).await;
    let mut follower = EventFollower::start(pool.clone(), &listener, run.run_id, 0).await?;
    let outcome = mostrador_queue::cancel(
        &pool,
        run.thread_id,
        run.run_id,
        mostrador_queue::CancelAction::Rollback,
    )
    .await?;
    assert_eq!(outcome, mostrador_queue::CancelOutcome::Deleted);
    let res = within(follower.next()).await;
    assert!(matches!(res, Err(mostrador_queue::Error::RunNotFound(id)) if id == run.run_id));
    Ok(())
}
