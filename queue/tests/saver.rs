//! LangGraph's checkpoints for Python graphs: the states their graphs describe are fenced by the
//! run's lease, and a thread's state is the newest one described while its run is in flight.

use mostrador_queue::Error;
use mostrador_queue::run::ending::{Ending, write};
use mostrador_queue::run::event::NewEvent;
use mostrador_queue::run::lease::sweep;
use mostrador_queue::state::saver::{
    self, Described, NewCheckpoint, Payload, PendingWrite, Saver, Write, describe_many,
};
use mostrador_queue::{ClaimedRun, ThreadId, WorkerLease};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::{claim_one, event_names, expire, make_due, new_run, new_worker};

fn checkpoint(checkpoint_id: Uuid, parent: Option<Uuid>) -> Write {
    Write::Checkpoint(NewCheckpoint {
        checkpoint_ns: String::new(),
        checkpoint_id,
        parent_checkpoint_id: parent,
        saved: json!({"id": checkpoint_id, "channel_versions": {}}),
        metadata: json!({"step": 0}),
        blobs: Vec::new(),
    })
}

async fn put(saver: &Saver, checkpoint_id: Uuid, parent: Option<Uuid>) {
    saver
        .write(&[checkpoint(checkpoint_id, parent)])
        .await
        .expect("put");
}

/// A run of a thread of its own, claimed by a new worker, and its fenced saver.
async fn claimed_saver(pool: &PgPool) -> (WorkerLease, ClaimedRun, Saver) {
    new_run(pool).await;
    let worker = new_worker(pool).await;
    let claimed = claim_one(pool, &worker).await.expect("claimed");
    let saver = Saver::fenced(pool.clone(), &claimed);
    (worker, claimed, saver)
}

/// Ends the run `success`, as a worker does.
async fn succeed(pool: &PgPool, claimed: ClaimedRun) {
    claimed.end(pool, Ending::Success).await.expect("complete");
}

/// The thread's latest state: its checkpoint id and described values (`None`: not described).
async fn latest(pool: &PgPool, thread_id: ThreadId) -> Option<(Uuid, Option<Value>)> {
    saver::snapshots(pool, thread_id.0, None, None, 1, None)
        .await
        .expect("snapshots")
        .pop()
        .map(|s| (s.checkpoint_id, s.snapshot.map(|s| s["values"].clone())))
}

fn described(checkpoint_id: Uuid, n: i64) -> Described {
    Described {
        checkpoint_id,
        snapshot: json!({"values": {"n": n}}),
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_running_threads_state_is_the_newest_its_graph_described(
    pool: PgPool,
) -> anyhow::Result<()> {
    let (_worker, claimed, saver) = claimed_saver(&pool).await;
    let (first, second) = (Uuid::now_v7(), Uuid::now_v7());

    put(&saver, first, None).await;
    assert_eq!(
        latest(&pool, claimed.thread_id).await,
        None,
        "saved, not yet described"
    );
    let lost = describe_many(&pool, &[(claimed.lease(), &[described(first, 1)])]).await?;
    assert!(lost.is_empty());
    assert_eq!(
        latest(&pool, claimed.thread_id).await,
        Some((first, Some(json!({"n": 1}))))
    );

    put(&saver, second, Some(first)).await;
    assert_eq!(
        latest(&pool, claimed.thread_id).await,
        Some((first, Some(json!({"n": 1})))),
        "the newer checkpoint waits for its description"
    );
    // Described twice in one batch: the last description wins.
    let twice = [described(second, 2), described(second, 3)];
    describe_many(&pool, &[(claimed.lease(), &twice)]).await?;
    assert_eq!(
        latest(&pool, claimed.thread_id).await,
        Some((second, Some(json!({"n": 3}))))
    );
    Ok(())
}

/// A run claimed on a thread without checkpoints reads none until it writes one: while it is
/// pending or holds its lease, nothing else writes them.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_saver_of_a_thread_without_checkpoints_reads_nothing_until_it_writes(
    pool: PgPool,
) -> anyhow::Result<()> {
    let (_worker, mut claimed, saver) = claimed_saver(&pool).await;
    assert!(!claimed.checkpointed);
    // Behind its back (nothing does this while a run holds its lease):
    claimed.checkpointed = true;
    let behind = Saver::fenced(pool.clone(), &claimed);
    let (first, second) = (Uuid::now_v7(), Uuid::now_v7());
    put(&behind, first, None).await;
    assert!(behind.get("", None).await?.is_some());
    assert!(saver.get("", None).await?.is_none(), "known from the claim");
    assert!(saver.list("", None, 10).await?.is_empty());

    put(&saver, second, Some(first)).await;
    let latest = saver.get("", None).await?.expect("read after its write");
    assert_eq!(latest.checkpoint_id, second);
    assert_eq!(saver.list("", None, 10).await?.len(), 2);
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_stale_workers_descriptions_are_refused(pool: PgPool) -> anyhow::Result<()> {
    let (stale, claimed, saver) = claimed_saver(&pool).await;
    let checkpoint = Uuid::now_v7();
    put(&saver, checkpoint, None).await;

    expire(&pool, &stale).await;
    sweep(&pool).await?;
    let lost = describe_many(&pool, &[(claimed.lease(), &[described(checkpoint, 1)])]).await?;
    assert_eq!(lost, vec![claimed.lease()]);
    assert_eq!(
        latest(&pool, claimed.thread_id).await,
        None,
        "undescribed while its run waits to be retried"
    );

    // The next attempt describes it; then the run ends.
    make_due(&pool).await;
    let worker = new_worker(&pool).await;
    let retried = claim_one(&pool, &worker).await.expect("claimed again");
    describe_many(&pool, &[(retried.lease(), &[described(checkpoint, 2)])]).await?;
    succeed(&pool, retried).await;
    assert_eq!(
        latest(&pool, claimed.thread_id).await,
        Some((checkpoint, Some(json!({"n": 2}))))
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_checkpoint_never_described_is_served_once_its_run_ended(
    pool: PgPool,
) -> anyhow::Result<()> {
    let (_worker, claimed, saver) = claimed_saver(&pool).await;
    let checkpoint = Uuid::now_v7();
    put(&saver, checkpoint, None).await;
    let thread_id = claimed.thread_id;
    succeed(&pool, claimed).await;
    // The api shows what the row itself says, rather than an older state.
    assert_eq!(latest(&pool, thread_id).await, Some((checkpoint, None)));
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_tasks_writes_and_the_next_checkpoint_are_saved_together_or_not_at_all(
    pool: PgPool,
) -> anyhow::Result<()> {
    let (stale, _claimed, saver) = claimed_saver(&pool).await;
    let first = Uuid::now_v7();
    put(&saver, first, None).await;
    let writes = |task: &str| Write::TaskWrites {
        checkpoint_ns: String::new(),
        checkpoint_id: first,
        writes: vec![PendingWrite {
            task_id: task.to_owned(),
            task_path: String::new(),
            idx: 0,
            channel: "path".to_owned(),
            payload: Payload {
                kind: "json".to_owned(),
                bytes: b"[1]".to_vec(),
            },
        }],
    };
    // A task's writes sent twice before the checkpoint (its process repeated them): kept once.
    saver
        .write(&[
            writes("a"),
            writes("a"),
            checkpoint(Uuid::now_v7(), Some(first)),
        ])
        .await?;
    assert_eq!(saved(&pool).await, (1, 2));

    // Under a lost lease nothing of the transaction is saved.
    expire(&pool, &stale).await;
    sweep(&pool).await?;
    let refused = saver
        .write(&[writes("b"), checkpoint(Uuid::now_v7(), Some(first))])
        .await;
    assert!(
        matches!(refused, Err(Error::LeaseLost { .. })),
        "{refused:?}"
    );
    assert_eq!(saved(&pool).await, (1, 2));
    Ok(())
}

/// Pending writes and checkpoints saved.
async fn saved(pool: &PgPool) -> (i64, i64) {
    sqlx::query_as(
        "select (select count(*) from mostrador.checkpoint_writes), \
                (select count(*) from mostrador.checkpoints)",
    )
    .fetch_one(pool)
    .await
    .expect("count")
}

/// A run's last described state, its last events and its ending are one write: the state is
/// there with the run's end, and a write under the lease once it is over records none of them.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_runs_last_state_events_and_ending_are_written_together_and_fenced_together(
    pool: PgPool,
) -> anyhow::Result<()> {
    let (_worker, claimed, saver) = claimed_saver(&pool).await;
    let checkpoint = Uuid::now_v7();
    put(&saver, checkpoint, None).await;
    let lease = claimed.lease();
    let events = [NewEvent::new("values", json!({"n": 1}))];
    let end = [claimed.ending(Ending::Success)];
    let lost = write(
        &mut *pool.acquire().await?,
        &[(lease, &[described(checkpoint, 1)])],
        &[(lease, &events)],
        &end,
    )
    .await?;
    assert!(lost.is_empty(), "{lost:?}");
    assert_eq!(
        latest(&pool, claimed.thread_id).await,
        Some((checkpoint, Some(json!({"n": 1}))))
    );
    assert_eq!(
        event_names(&pool, claimed.run_id()).await,
        ["values", "end"]
    );

    let lost = write(
        &mut *pool.acquire().await?,
        &[(lease, &[described(checkpoint, 2)])],
        &[(lease, &events)],
        &end,
    )
    .await?;
    assert_eq!(lost, [lease], "reported once");
    assert_eq!(
        latest(&pool, claimed.thread_id).await,
        Some((checkpoint, Some(json!({"n": 1})))),
        "the state described under an ended lease is not recorded"
    );
    assert_eq!(
        event_names(&pool, claimed.run_id()).await,
        ["values", "end"]
    );
    Ok(())
}
