//! Run events: appended in order, notified, and followed exactly once across listener outages.

use mostrador_queue::listener::Queued;
use mostrador_queue::run::RunId;
use mostrador_queue::run::event::{self, EventFollower, NewEvent};
use mostrador_queue::{Listener, NewRun, RunEvent};
use serde_json::json;
use sqlx::PgPool;
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::support::{GRAPH, claim_one, enqueue, new_run, new_thread, new_worker, within};

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

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_follower_subscribed_before_its_run_existed_reads_no_log_and_misses_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let listener = Listener::start(pool.clone(), std::future::pending()).await?;
    let thread = new_thread(&pool).await;
    let run_id = RunId(Uuid::now_v7());
    // Subscribed before the run exists; its follower's pool is closed, so a read would fail.
    let subscription = listener.subscribe_run(run_id);
    let closed = PgPool::connect_lazy_with((*pool.connect_options()).clone());
    closed.close().await;
    let mut unread = EventFollower::of_new_run(closed, subscription);
    let run = enqueue(
        &pool,
        NewRun {
            run_id: Some(run_id),
            ..NewRun::new(thread.thread_id, GRAPH)
        },
    )
    .await;
    assert_eq!(run.run_id, run_id, "the run has the id its caller chose");
    // A second follower of the same kind, with a pool that reads: it is made to re-read by an
    // event too large for its notification and by a listener reconnect, and still gets each once.
    let rereading = EventFollower::of_new_run(pool.clone(), listener.subscribe_run(run_id));
    let following = tokio::spawn(follow_until(rereading, 4));
    let worker = new_worker(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    for n in 1..=2 {
        event::append(
            &pool,
            claimed.lease(),
            &[NewEvent::new("custom", json!({"n": n}))],
        )
        .await?;
        let event = within(unread.next()).await?.expect("an event");
        assert_eq!((event.seq, event.data["n"].as_i64()), (n, Some(n)));
    }
    let big = NewEvent::new("values", json!({"text": "x".repeat(20_000)}));
    event::append(&pool, claimed.lease(), &[big]).await?;
    let mut reconnects = listener.queued();
    let killed: bool = sqlx::query_scalar("select pg_terminate_backend($1)")
        .bind(listener.backend_pid())
        .fetch_one(&pool)
        .await?;
    assert!(killed);
    event::append(&pool, claimed.lease(), &[NewEvent::new("end", json!(null))]).await?;
    while within(reconnects.recv()).await? != Queued::Reconnected {}
    assert_eq!(within(following).await??, vec![1, 2, 3, 4]);
    Ok(())
}
