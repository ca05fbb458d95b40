//! The Postgres checkpointer: held to the engine's scenarios (the same the in-memory one passes),
//! fenced by the run's lease, and writing a channel only when it changed.

use mostrador_graph::checkpoint::Checkpointer;
use mostrador_graph::stream::discard;
use mostrador_graph::{
    Command, Error as GraphError, Outcome, Reducer, RunControl, RunInput, RunOptions, RunResult,
    START, StateGraph,
};
use mostrador_queue::run::ending::{Ending, end_many};
use mostrador_queue::state::checkpoint::HeldFinal;
use std::time::Duration;

use mostrador_queue::run::event::{self, NewEvent};
use mostrador_queue::run::lease::sweep;
use mostrador_queue::{Error, NewRun, PgCheckpointer};
use serde_json::json;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::support::{
    GRAPH, another_session_waits_for_a_lock, claim_one, enqueue, expire, new_run, new_thread,
    new_worker,
};

mostrador_graph::conformance_tests!(
    sqlx::test(migrator = "mostrador_queue::MIGRATOR"),
    (pool: PgPool),
    PgCheckpointer::new(pool)
);

fn counter_graph() -> mostrador_graph::Graph {
    StateGraph::new()
        .channel("messages", Reducer::Append)
        .channel("static", Reducer::LastValue)
        .node("talk", |_| async {
            Ok(Command::new().set("messages", json!({"content": "x".repeat(1000)})))
        })
        .edge(START, "talk")
        .edge("talk", "talk")
        .compile()
        .expect("valid graph")
}

/// Runs the counter graph on `thread_id` until its recursion limit of `supersteps` stops it (it
/// loops), checkpoints saved synchronously.
async fn run_counter(
    checkpointer: &impl Checkpointer,
    thread_id: uuid::Uuid,
    input: RunInput,
    supersteps: usize,
) -> Result<RunResult, GraphError> {
    let options = RunOptions {
        recursion_limit: supersteps,
        ..RunOptions::default()
    };
    counter_graph()
        .run(
            checkpointer,
            thread_id,
            input,
            &options,
            &RunControl::new(),
            discard(),
        )
        .await
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn checkpoint_writes_of_a_lost_lease_are_refused(pool: PgPool) -> anyhow::Result<()> {
    let run = new_run(&pool).await;
    let stale = new_worker(&pool).await;
    let claimed = claim_one(&pool, &stale).await.expect("claimed");
    let graph = counter_graph();
    let fenced = PgCheckpointer::fenced(pool.clone(), &claimed);
    let thread_id = run.thread_id.0;
    let res = run_counter(&fenced, thread_id, RunInput::Values(json!({})), 2).await;
    assert!(
        matches!(res, Err(GraphError::RecursionLimit(2))),
        "the holder writes"
    );

    expire(&pool, &stale).await;
    sweep(&pool).await?;
    let fresh = new_worker(&pool).await;
    claim_one(&pool, &fresh).await.expect("claimed again");
    let before = graph
        .get_history(&fenced, thread_id, 100, None)
        .await?
        .len();
    let res = run_counter(&fenced, thread_id, RunInput::Continue, 2).await;
    match res {
        Err(GraphError::Checkpointer(err)) => {
            assert!(
                matches!(
                    err.downcast_ref::<Error>(),
                    Some(Error::LeaseLost { attempt: 1, .. })
                ),
                "{err}"
            );
        }
        other => panic!("expected a lost lease, got {other:?}"),
    }
    assert_eq!(
        graph
            .get_history(&fenced, thread_id, 100, None)
            .await?
            .len(),
        before,
        "nothing written"
    );
    Ok(())
}

/// A run's statements that follow each other share one connection, kept out of the pool (so each
/// costs one round trip, not a ping on the way back in as well), and only for a moment: a pool of
/// one connection, shared by the run and everyone else, still serves the others.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_run_keeps_its_connection_between_writes_and_gives_it_back_when_none_follows(
    pool: PgPool,
) -> anyhow::Result<()> {
    let run = new_run(&pool).await;
    let worker = new_worker(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    let one = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect_lazy_with((*pool.connect_options()).clone());
    let fenced = PgCheckpointer::fenced(one.clone(), &claimed);
    let res = run_counter(&fenced, run.thread_id.0, RunInput::Values(json!({})), 3).await;
    assert!(matches!(res, Err(GraphError::RecursionLimit(3))), "{res:?}");
    assert_eq!(
        (one.size(), one.num_idle()),
        (1, 0),
        "the run's one connection is kept, out of the pool"
    );
    let written: i64 =
        sqlx::query_scalar("select count(*) from mostrador.checkpoints where thread_id = $1")
            .bind(run.thread_id.0)
            .fetch_one(&one)
            .await?;
    assert_eq!(
        written, 4,
        "the input and three supersteps, and the pool serves others"
    );
    Ok(())
}

/// A claimed run's checkpointer reads its thread's latest checkpoint once until it writes (the
/// worker's look at where the run starts and the engine's start share it), and not at all when
/// the claim found the thread without one: while the run is pending or holds its lease, nothing
/// else writes the thread's checkpoints.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_runs_checkpointer_reads_the_latest_once_until_it_writes(
    pool: PgPool,
) -> anyhow::Result<()> {
    let run = new_run(&pool).await;
    let worker = new_worker(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    assert!(!claimed.checkpointed, "a new thread");
    let thread_id = run.thread_id.0;
    let fenced = PgCheckpointer::fenced(pool.clone(), &claimed);
    let unfenced = PgCheckpointer::new(pool.clone());
    // Behind the run's back (nothing does this while a run holds its lease):
    let _ = run_counter(&unfenced, thread_id, RunInput::Values(json!({})), 1).await;
    assert_eq!(
        fenced.get(thread_id, None).await.expect("read"),
        None,
        "that it had none, known from the claim"
    );
    let latest = unfenced
        .get(thread_id, None)
        .await
        .expect("read")
        .expect("saved");
    fenced
        .put_writes(thread_id, latest.checkpoint.checkpoint_id, &[])
        .await
        .expect("written");
    assert_eq!(
        fenced.get(thread_id, None).await.expect("read"),
        Some(latest.clone()),
        "read again after a write"
    );
    sqlx::query("delete from mostrador.checkpoints where thread_id = $1")
        .bind(thread_id)
        .execute(&pool)
        .await?;
    assert_eq!(
        fenced.get(thread_id, None).await.expect("read"),
        Some(latest),
        "read once"
    );
    assert_eq!(
        unfenced.get(thread_id, None).await.expect("read"),
        None,
        "never remembered"
    );

    // The thread's next run, claimed with a checkpoint there, reads it.
    let _ = run_counter(&unfenced, thread_id, RunInput::Values(json!({})), 1).await;
    claimed.end(&pool, Ending::Success).await?;
    let next = enqueue(&pool, NewRun::new(run.thread_id, GRAPH)).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    assert_eq!(claimed.run_id(), next.run_id);
    assert!(claimed.checkpointed);
    let fenced = PgCheckpointer::fenced(pool.clone(), &claimed);
    assert_eq!(
        fenced.get(thread_id, None).await.expect("read"),
        unfenced.get(thread_id, None).await.expect("read"),
    );
    assert!(fenced.get(thread_id, None).await.expect("read").is_some());
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_superstep_writes_only_the_channels_it_changed(pool: PgPool) -> anyhow::Result<()> {
    let checkpointer = PgCheckpointer::new(pool.clone());
    let graph = counter_graph();
    let thread_id = uuid::Uuid::now_v7();
    let input = RunInput::Values(json!({"static": "big".repeat(1000)}));
    let _ = run_counter(&checkpointer, thread_id, input, 10).await;
    let blobs: Vec<(String, i64)> = sqlx::query_as(
        "select channel, count(*) from mostrador.checkpoint_blobs where thread_id = $1 group by channel order by channel",
    )
    .bind(thread_id)
    .fetch_all(&pool)
    .await?;
    assert_eq!(
        blobs,
        vec![("messages".to_owned(), 10), ("static".to_owned(), 1)],
        "the unchanged channel is written once"
    );
    let state = graph.get_state(&checkpointer, thread_id, None).await?;
    assert_eq!(
        state.values["static"].as_str().map(str::len),
        Some(3000),
        "yet every checkpoint sees it"
    );
    assert_eq!(state.values["messages"].as_array().map(Vec::len), Some(10));
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_threads_storage_counts_its_checkpoints_each_value_version_and_its_bytes(
    pool: PgPool,
) -> anyhow::Result<()> {
    let checkpointer = PgCheckpointer::new(pool.clone());
    let thread_id = uuid::Uuid::now_v7();
    let empty = mostrador_queue::state::storage::of_thread(&pool, thread_id).await?;
    assert_eq!(empty.total_bytes(), 0);
    assert!(empty.by_channel.is_empty());
    let input = RunInput::Values(json!({"static": "big".repeat(1000)}));
    let _ = run_counter(&checkpointer, thread_id, input, 10).await;
    let storage = mostrador_queue::state::storage::of_thread(&pool, thread_id).await?;
    let checkpoints: i64 =
        sqlx::query_scalar("select count(*) from mostrador.checkpoints where thread_id = $1")
            .bind(thread_id)
            .fetch_one(&pool)
            .await?;
    assert!(checkpoints > 0);
    assert_eq!(storage.checkpoints.count, checkpoints);
    let versions: Vec<(&str, i64)> = storage
        .by_channel
        .iter()
        .map(|(channel, tally)| (channel.as_str(), tally.count))
        .collect();
    assert_eq!(versions, [("messages", 10), ("static", 1)]);
    assert_eq!(storage.channel_values.count, 11);
    assert!(
        storage.by_channel["static"].bytes >= 3000,
        "a value's bytes: {storage:?}"
    );
    assert_eq!(
        storage.channel_values.bytes,
        storage
            .by_channel
            .values()
            .map(|tally| tally.bytes)
            .sum::<i64>()
    );
    assert_eq!(
        storage.total_bytes(),
        storage.checkpoints.bytes + storage.channel_values.bytes + storage.pending_writes.bytes
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn saving_a_checkpoint_restarts_the_retention_clock(pool: PgPool) -> anyhow::Result<()> {
    let run = new_run(&pool).await;
    sqlx::query("update mostrador.threads set last_activity_at = now() - interval '30 days' where thread_id = $1")
        .bind(run.thread_id.0)
        .execute(&pool)
        .await?;
    let checkpointer = PgCheckpointer::new(pool.clone());
    let _ = run_counter(
        &checkpointer,
        run.thread_id.0,
        RunInput::Values(json!({})),
        1,
    )
    .await;
    let idle_days: f64 = sqlx::query_scalar(
        "select extract(epoch from now() - last_activity_at)::float8 / 86400 from mostrador.threads where thread_id = $1",
    )
    .bind(run.thread_id.0)
    .fetch_one(&pool)
    .await?;
    assert!(idle_days < 0.01, "last activity was {idle_days} days ago");
    Ok(())
}

/// The lock protocol the fence rests on: a checkpoint write holds its run's row `for key share`
/// until it commits. An event append (a plain update) must not wait for it, or checkpoint writes
/// and the worker's event flushes would queue behind each other; a transition out of `running`
/// must wait, or a lost lease could let a stale checkpoint land after the run moved on.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn transitions_wait_for_checkpoint_writes_and_event_appends_do_not(
    pool: PgPool,
) -> anyhow::Result<()> {
    new_run(&pool).await;
    let worker = new_worker(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    let lease = claimed.lease();

    // A checkpoint write in flight, as the fence locks.
    let mut writing = pool.begin().await?;
    sqlx::query("select 1 from mostrador.runs where run_id = $1 for key share")
        .bind(lease.run_id().0)
        .execute(&mut *writing)
        .await?;

    let appended = tokio::time::timeout(
        Duration::from_secs(5),
        event::append(&pool, lease, &[NewEvent::new("custom", json!(1))]),
    )
    .await;
    assert!(
        matches!(appended, Ok(Ok(1))),
        "an append does not wait: {appended:?}"
    );

    let completing = tokio::spawn({
        let pool = pool.clone();
        async move { claimed.end(&pool, Ending::Success).await }
    });
    assert!(
        another_session_waits_for_a_lock(&pool).await,
        "the completion waits for the checkpoint write"
    );
    assert!(!completing.is_finished());

    writing.commit().await?;
    completing.await??;
    Ok(())
}

/// Deleting a thread locks its row, then tells its running run to roll back. A completion or a
/// failure locks the run's thread before the run: in the other order, each would hold what the
/// other waits for, and Postgres would abort one of them.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn deleting_a_thread_while_its_run_ends_does_not_deadlock(
    pool: PgPool,
) -> anyhow::Result<()> {
    for failing in [false, true] {
        new_run(&pool).await;
        let worker = new_worker(&pool).await;
        let claimed = claim_one(&pool, &worker).await.expect("claimed");
        let run_id = claimed.lease().run_id();

        // The first half of a deletion: the thread's row.
        let mut deleting = pool.begin().await?;
        sqlx::query("update mostrador.threads set deleted_at = now() where thread_id = $1")
            .bind(claimed.thread_id.0)
            .execute(&mut *deleting)
            .await?;
        let ending = tokio::spawn({
            let pool = pool.clone();
            async move {
                if failing {
                    claimed
                        .end(
                            &pool,
                            Ending::Failed {
                                error: json!({"error": "boom"}),
                                retryable: false,
                            },
                        )
                        .await
                        .map(drop)
                } else {
                    claimed.end(&pool, Ending::Success).await.map(drop)
                }
            }
        });
        assert!(
            another_session_waits_for_a_lock(&pool).await,
            "the transition waits for the thread"
        );
        // The second half: the run's row. A transition holding it now would deadlock.
        sqlx::query("update mostrador.runs set cancel_action = 'rollback' where run_id = $1")
            .bind(run_id.0)
            .execute(&mut *deleting)
            .await?;
        deleting.commit().await?;
        ending.await??;
    }
    Ok(())
}

/// The lease sweep takes a thread before its run too, skipping a thread another statement holds:
/// a run on its last attempt, whose thread is being deleted, waits for the next sweep instead of
/// locking the run and then waiting for the thread.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn sweeping_a_run_whose_thread_is_being_deleted_does_not_deadlock(
    pool: PgPool,
) -> anyhow::Result<()> {
    let thread = new_thread(&pool).await;
    let run = enqueue(
        &pool,
        NewRun {
            max_attempts: 1,
            ..NewRun::new(thread.thread_id, GRAPH)
        },
    )
    .await;
    let dead = new_worker(&pool).await;
    claim_one(&pool, &dead).await.expect("claimed");
    expire(&pool, &dead).await;

    let mut deleting = pool.begin().await?;
    sqlx::query("update mostrador.threads set deleted_at = now() where thread_id = $1")
        .bind(thread.thread_id.0)
        .execute(&mut *deleting)
        .await?;
    let swept = tokio::time::timeout(Duration::from_secs(5), sweep(&pool)).await??;
    assert_eq!(swept, Default::default(), "the held thread's run waits");
    sqlx::query("update mostrador.runs set cancel_action = 'rollback' where run_id = $1")
        .bind(run.run_id.0)
        .execute(&mut *deleting)
        .await?;
    deleting.commit().await?;

    let swept = sweep(&pool).await?;
    assert_eq!(swept.errored, vec![run.run_id], "the next sweep takes it");
    Ok(())
}

/// Whether a graph's call failed because the thread was busy or changed under the update.
fn refused_as_busy<T: std::fmt::Debug>(result: Result<T, GraphError>) -> bool {
    matches!(
        &result,
        Err(GraphError::Checkpointer(source))
            if matches!(source.downcast_ref::<Error>(), Some(Error::ThreadBusy(_)))
    )
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_state_update_is_written_only_while_its_thread_is_idle_and_unchanged(
    pool: PgPool,
) -> anyhow::Result<()> {
    use mostrador_graph::checkpoint::Checkpointer;
    use mostrador_queue::IdleThreadCheckpointer;
    let graph = StateGraph::new()
        .channel("v", Reducer::LastValue)
        .node("set", |_| async { Ok(Command::new()) })
        .edge(START, "set")
        .compile()?;
    let thread = new_thread(&pool).await;
    let id = thread.thread_id.0;
    let idle = || IdleThreadCheckpointer::new(pool.clone());
    let value = |pool: PgPool| {
        let graph = graph.clone();
        async move {
            graph
                .get_state(&PgCheckpointer::new(pool), id, None)
                .await
                .expect("state")
                .values["v"]
                .clone()
        }
    };
    graph
        .update_state(&idle(), id, json!({"v": 1}), None, None)
        .await?;
    assert_eq!(
        value(pool.clone()).await,
        json!(1),
        "an idle thread is updated"
    );

    // A run in flight: nothing is written.
    let run = enqueue(&pool, NewRun::new(thread.thread_id, GRAPH)).await;
    let refused = graph
        .update_state(&idle(), id, json!({"v": 2}), None, None)
        .await;
    assert!(refused_as_busy(refused));
    assert_eq!(value(pool.clone()).await, json!(1));
    let worker = new_worker(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("the run");
    assert_eq!(claimed.run_id(), run.run_id);
    let refused = graph
        .update_state(&idle(), id, json!({"v": 2}), None, None)
        .await;
    assert!(refused_as_busy(refused), "nor while it runs");
    claimed.end(&pool, Ending::Success).await?;

    // The thread changed between the update's read and its write: nothing is written.
    let update = idle();
    let read = update
        .get(id, None)
        .await
        .expect("read")
        .expect("a checkpoint");
    graph
        .update_state(
            &PgCheckpointer::new(pool.clone()),
            id,
            json!({"v": 3}),
            None,
            None,
        )
        .await?;
    let mut stale = read.checkpoint.clone();
    stale.parent_id = Some(stale.checkpoint_id);
    stale.checkpoint_id = uuid::Uuid::now_v7();
    stale.step += 1;
    let refused = update.put(id, &stale, &read.values, &[]).await;
    assert!(
        refused.is_err_and(|err| matches!(err.downcast_ref::<Error>(), Some(Error::ThreadBusy(_)))),
        "a write over a change it did not read is refused"
    );
    assert_eq!(value(pool.clone()).await, json!(3));
    graph
        .update_state(&idle(), id, json!({"v": 4}), None, None)
        .await?;
    assert_eq!(value(pool).await, json!(4), "idle and unchanged again");
    Ok(())
}

/// A run's final checkpoint, held by its checkpointer, is written by the run's ending, in the
/// ending's transaction and under its lease: not before it, and not at all once the lease is lost,
/// whatever the other runs ending with it.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_held_final_checkpoint_is_written_by_the_ending_under_its_lease(
    pool: PgPool,
) -> anyhow::Result<()> {
    let graph = StateGraph::new()
        .channel("log", Reducer::Append)
        .node("a", |_| async {
            Ok(Command::new().set("log", json!(["a"])))
        })
        .edge(START, "a")
        .compile()?;
    let reader = PgCheckpointer::new(pool.clone());
    let latest_step = async |thread_id| -> anyhow::Result<i64> {
        let latest = reader
            .get(thread_id, None)
            .await
            .map_err(anyhow::Error::from_boxed)?
            .expect("a checkpoint");
        Ok(latest.checkpoint.step)
    };
    let worker = new_worker(&pool).await;
    let (kept, lost) = (new_run(&pool).await, new_run(&pool).await);
    let mut ends = Vec::new();
    for run in [&kept, &lost] {
        let claimed = claim_one(&pool, &worker).await.expect("claimed");
        assert_eq!(claimed.run_id(), run.run_id);
        let held = HeldFinal::default();
        let holding = PgCheckpointer::fenced(pool.clone(), &claimed).holding_final(held.clone());
        let result = graph
            .run(
                &holding,
                run.thread_id.0,
                RunInput::Values(json!({})),
                &RunOptions::default(),
                &RunControl::new(),
                discard(),
            )
            .await?;
        assert_eq!(result.outcome, Outcome::Finished);
        assert_eq!(
            latest_step(run.thread_id.0).await?,
            -1,
            "the final one waits"
        );
        assert!(holding.holds_final() && held.get().is_some());
        ends.push(claimed.ending(Ending::Success).with_checkpoint(held.get()));
    }
    // Another attempt holds the second run now.
    sqlx::query("update mostrador.runs set attempt = attempt + 1 where run_id = $1")
        .bind(lost.run_id.0)
        .execute(&pool)
        .await?;

    let lost_leases = end_many(&mut *pool.acquire().await?, &ends).await?;
    assert_eq!(
        lost_leases.iter().map(|l| l.run_id()).collect::<Vec<_>>(),
        [lost.run_id]
    );
    assert_eq!(
        latest_step(lost.thread_id.0).await?,
        -1,
        "nothing written without the lease"
    );
    let latest = reader
        .get(kept.thread_id.0, None)
        .await
        .map_err(anyhow::Error::from_boxed)?
        .expect("a checkpoint");
    assert_eq!(
        (latest.checkpoint.step, &latest.values["log"]),
        (0, &json!(["a"]))
    );
    let (checkpoint_xmin, end_xmin): (String, String) = sqlx::query_as(
        "select
             (select xmin::text from mostrador.checkpoints
              where thread_id = $1 and step = 0),
             (select xmin::text from mostrador.run_events
              where run_id = $2 and event = 'end')",
    )
    .bind(kept.thread_id.0)
    .bind(kept.run_id.0)
    .fetch_one(&pool)
    .await?;
    assert_eq!(checkpoint_xmin, end_xmin, "one transaction wrote both");
    Ok(())
}

/// A thread search by `values` finds the threads whose latest state holds them, as the official
/// server's `values @> $values`: a Rust graph's channels, a Python graph's described values, never
/// a thread without a state, nor a value its state held before.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn threads_are_found_by_the_values_of_their_latest_state(pool: PgPool) -> anyhow::Result<()> {
    use mostrador_queue::state::saver::{Described, NewCheckpoint, Saver, Write, describe_many};
    use mostrador_queue::thread::{self, ThreadSearch, ThreadSort, Visibility};

    // A Rust graph's thread: its topic set twice, the second time its latest.
    let rust = new_thread(&pool).await.thread_id;
    let topic = |topic: &'static str| {
        StateGraph::new()
            .channel("topic", Reducer::LastValue)
            .channel("tags", Reducer::LastValue)
            .node("set", move |_| async move {
                Ok(Command::new()
                    .set("topic", json!(topic))
                    .set("tags", json!(["a", "b"])))
            })
            .edge(START, "set")
            .compile()
            .expect("valid graph")
    };
    for value in ["shipping", "refund"] {
        topic(value)
            .run(
                &PgCheckpointer::new(pool.clone()),
                rust.0,
                RunInput::Values(json!({})),
                &RunOptions::default(),
                &RunControl::new(),
                discard(),
            )
            .await?;
    }
    // A Python graph's thread, its state as its runner described it.
    let python = new_run(&pool).await.thread_id;
    let worker = new_worker(&pool).await;
    let claimed = claim_one(&pool, &worker).await.expect("claimed");
    let checkpoint_id = uuid::Uuid::now_v7();
    Saver::fenced(pool.clone(), &claimed)
        .write(&[Write::Checkpoint(NewCheckpoint {
            checkpoint_ns: String::new(),
            checkpoint_id,
            parent_checkpoint_id: None,
            saved: json!({"id": checkpoint_id, "channel_versions": {}}),
            metadata: json!({"step": 0}),
            blobs: Vec::new(),
        })])
        .await?;
    let described = [Described {
        checkpoint_id,
        snapshot: json!({"values": {"topic": "refund", "user": {"name": "ana", "age": 30}}}),
    }];
    describe_many(&pool, &[(claimed.lease(), &described)]).await?;
    // A thread that never ran.
    new_thread(&pool).await;

    let found = |values: serde_json::Value| {
        let search = ThreadSearch {
            visible_to: Visibility::owner("ana"),
            metadata: None,
            values: Some(values),
            status: None,
            ids: None,
            limit: 10,
            offset: 0,
            sort: ThreadSort::default(),
        };
        let pool = pool.clone();
        async move {
            let threads = thread::search(&pool, &search).await.expect("search");
            let count = thread::count(&pool, &search).await.expect("count");
            assert_eq!(usize::try_from(count).expect("count"), threads.len());
            threads.into_iter().map(|t| t.thread_id).collect::<Vec<_>>()
        }
    };
    assert_eq!(found(json!({"topic": "refund"})).await, [python, rust]);
    assert_eq!(
        found(json!({"topic": "shipping"})).await,
        [],
        "not its latest"
    );
    assert_eq!(
        found(json!({"tags": ["b"]})).await,
        [rust],
        "a list holds its elements"
    );
    assert_eq!(
        found(json!({"user": {"name": "ana"}})).await,
        [python],
        "nested objects"
    );
    assert_eq!(
        found(json!({"topic": "refund", "user": {"age": 31}})).await,
        []
    );
    assert_eq!(found(json!({})).await.len(), 2, "every thread with a state");

    let not_an_object = ThreadSearch {
        visible_to: Visibility::owner("ana"),
        metadata: None,
        values: Some(json!(["refund"])),
        status: None,
        ids: None,
        limit: 10,
        offset: 0,
        sort: ThreadSort::default(),
    };
    assert!(matches!(
        thread::search(&pool, &not_an_object).await,
        Err(Error::Invalid {
            field: "values",
            ..
        })
    ));
    Ok(())
}
