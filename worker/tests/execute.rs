//! One claimed run executed against a real Postgres: events, terminal transitions, interrupts and
//! resume, drain and release, failures, lost leases.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use mostrador_graph::{Command, NodeError, Reducer, START, StateGraph, StreamMode};
use mostrador_queue::run::lease::sweep;
use mostrador_queue::run::{self, NewRun, RunCommand, RunConfig};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{
    CancelAction, Error as QueueError, RunId, RunStatus, ThreadStatus, WorkerLease, claim,
};
use mostrador_worker::{Finish, RunHandle};
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::sync::Notify;

use crate::support::{GRAPH, Starts, abc, claim_next, enqueue, executor};

async fn events(pool: &PgPool, run_id: RunId) -> Vec<(String, Value)> {
    sqlx::query_as("select event, data from mostrador.run_events where run_id = $1 order by seq")
        .bind(run_id.0)
        .fetch_all(pool)
        .await
        .expect("events")
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn executed_run_streams_its_events_then_completes(pool: PgPool) -> anyhow::Result<()> {
    let starts = Starts::default();
    enqueue(&pool, None, |new| NewRun {
        input: Some(json!({"log": ["start"]})),
        stream_mode: vec![StreamMode::Values, StreamMode::Updates],
        ..new
    })
    .await;
    let claimed = claim_next(&pool).await;
    let (run_id, thread_id) = (claimed.run_id(), claimed.thread_id);
    let finish = executor(&pool)
        .execute(
            claimed,
            &abc(&starts, Arc::new(Notify::new()), None),
            &RunHandle::new(),
            None,
        )
        .await?;
    assert_eq!(finish, Finish::Ended(RunStatus::Success));

    let events = events(&pool, run_id).await;
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.last(), Some(&"end"), "end comes last");
    assert!(
        names.contains(&"updates") && names.contains(&"values"),
        "the modes asked for: {names:?}"
    );
    assert!(
        !names.contains(&"checkpoints") && !names.contains(&"debug"),
        "and no other: {names:?}"
    );
    let last_values = events
        .iter()
        .rev()
        .find(|(name, _)| name == "values")
        .expect("values");
    assert_eq!(last_values.1, json!({"log": ["start", "a", "b", "c"]}));
    let thread = thread::get(&pool, thread_id).await?;
    assert_eq!(thread.status, ThreadStatus::Idle);
    Ok(())
}

/// A run no release writes (its config or command stored by hand, or by a release that read it
/// otherwise) cannot stop the queue: the claim takes the run with the others, and the run alone
/// fails, saying why.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_run_whose_stored_spec_cannot_be_read_fails_alone(pool: PgPool) -> anyhow::Result<()> {
    let starts = Starts::default();
    let mut unreadable = Vec::new();
    for statement in [
        r#"update mostrador.runs set config = '{"recursion_limit": 0}' where thread_id = $1"#,
        r#"update mostrador.runs set command = '{"resume": "yes", "later": true}' where thread_id = $1"#,
        r#"update mostrador.runs set stream_mode = '{values,sparkles}' where thread_id = $1"#,
    ] {
        let run = enqueue(&pool, None, |new| new).await;
        sqlx::query(statement)
            .bind(run.thread_id.0)
            .execute(&pool)
            .await?;
        unreadable.push(run.thread_id);
    }
    enqueue(&pool, None, |new| new).await;
    let worker = WorkerLease::new("test", vec![GRAPH.to_owned()], Duration::from_secs(30));
    worker.register(&pool).await?;
    let claimed = claim(&pool, worker.worker_id, &worker.graphs, 4).await?;
    assert_eq!(claimed.len(), 4, "every run is claimed");
    for claimed in claimed {
        let (run_id, thread_id) = (claimed.run_id(), claimed.thread_id);
        let finish = executor(&pool)
            .execute(
                claimed,
                &abc(&starts, Arc::new(Notify::new()), None),
                &RunHandle::new(),
                None,
            )
            .await?;
        let run = run::get(&pool, thread_id, run_id).await?;
        if unreadable.contains(&thread_id) {
            assert_eq!(finish, Finish::Ended(RunStatus::Error));
            let error = run.error.expect("an error");
            assert_eq!(error["error"], "InvalidRun");
            let message = error["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("nonzero")
                    || message.contains("unknown field `later`")
                    || message.contains("\"sparkles\" is not one this release streams"),
                "{error}"
            );
        } else {
            assert_eq!(finish, Finish::Ended(RunStatus::Success));
        }
    }
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn interrupted_run_rests_the_thread_and_a_resume_run_continues(
    pool: PgPool,
) -> anyhow::Result<()> {
    let starts = Starts::default();
    let graph = {
        let starts = starts.clone();
        StateGraph::new()
            .channel("decision", Reducer::LastValue)
            .node("approve", move |ctx| {
                let starts = starts.clone();
                async move {
                    starts.record("approve");
                    let decision = ctx.interrupt(json!({"refund": 40}))?;
                    Ok(Command::new().set("decision", decision))
                }
            })
            .edge(START, "approve")
            .compile()?
    };
    let first = enqueue(&pool, None, |new| new).await;
    let claimed = claim_next(&pool).await;
    let run_id = claimed.run_id();
    assert_eq!(
        executor(&pool)
            .execute(claimed, &graph, &RunHandle::new(), None)
            .await?,
        Finish::Ended(RunStatus::Success)
    );
    assert_eq!(
        thread::get(&pool, first.thread_id).await?.status,
        ThreadStatus::Interrupted
    );
    let interrupt = events(&pool, run_id)
        .await
        .into_iter()
        .rev()
        .find(|(name, _)| name == "values")
        .expect("the interrupt in values");
    assert_eq!(
        interrupt.1["__interrupt__"][0]["value"],
        json!({"refund": 40})
    );

    enqueue(&pool, Some(first.thread_id), |new| NewRun {
        command: Some(RunCommand {
            resume: Some(json!("approved")),
            ..RunCommand::default()
        }),
        ..new
    })
    .await;
    let resumed = claim_next(&pool).await;
    let resumed_id = resumed.run_id();
    assert_eq!(
        executor(&pool)
            .execute(resumed, &graph, &RunHandle::new(), None)
            .await?,
        Finish::Ended(RunStatus::Success)
    );
    assert_eq!(
        thread::get(&pool, first.thread_id).await?.status,
        ThreadStatus::Idle
    );
    let values = events(&pool, resumed_id)
        .await
        .into_iter()
        .rev()
        .find(|(name, _)| name == "values")
        .expect("values");
    assert_eq!(values.1, json!({"decision": "approved"}));
    assert_eq!(starts.of("approve"), 2, "the node ran again from its start");
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn drained_run_is_released_and_resumes_without_repeating_supersteps(
    pool: PgPool,
) -> anyhow::Result<()> {
    let starts = Starts::default();
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let gated = abc(&starts, Arc::clone(&started), Some(Arc::clone(&release)));
    enqueue(&pool, None, |new| new).await;
    let claimed = claim_next(&pool).await;
    let run_id = claimed.run_id();
    let handle = RunHandle::new();
    let executor = executor(&pool);
    let drive = async {
        started.notified().await;
        handle.control.request_drain("sigterm");
        release.notify_one();
    };
    let (finish, ()) = tokio::join!(executor.execute(claimed, &gated, &handle, None), drive);
    assert_eq!(finish?, Finish::Released);
    let names: Vec<String> = events(&pool, run_id)
        .await
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(names.last().map(String::as_str), Some("drained"));

    let again = claim_next(&pool).await;
    let again_id = again.run_id();
    assert_eq!(
        (again_id, again.attempts_used()),
        (run_id, 1),
        "no attempt used up by the drain"
    );
    let finish = executor
        .execute(
            again,
            &abc(&starts, Arc::new(Notify::new()), None),
            &RunHandle::new(),
            None,
        )
        .await?;
    assert_eq!(finish, Finish::Ended(RunStatus::Success));
    for node in ["a", "b", "c"] {
        assert_eq!(starts.of(node), 1, "{node} ran once");
    }
    let values = events(&pool, again_id)
        .await
        .into_iter()
        .rev()
        .find(|(name, _)| name == "values")
        .expect("values");
    assert_eq!(values.1, json!({"log": ["a", "b", "c"]}));
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn cancel_interrupt_and_rollback_end_a_running_run(pool: PgPool) -> anyhow::Result<()> {
    for action in [CancelAction::Interrupt, CancelAction::Rollback] {
        let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let gated = abc(
            &Starts::default(),
            Arc::clone(&started),
            Some(Arc::clone(&release)),
        );
        enqueue(&pool, None, |new| new).await;
        let claimed = claim_next(&pool).await;
        let (run_id, thread_id) = (claimed.run_id(), claimed.thread_id);
        let handle = RunHandle::new();
        let executor = executor(&pool);
        let drive = async {
            started.notified().await;
            handle.cancel(action);
        };
        let (finish, ()) = tokio::join!(executor.execute(claimed, &gated, &handle, None), drive);
        let run = run::get(&pool, thread_id, run_id).await;
        match action {
            CancelAction::Interrupt => {
                assert_eq!(finish?, Finish::Ended(RunStatus::Interrupted));
                assert_eq!(run?.status, RunStatus::Interrupted);
                let checkpoints: i64 = sqlx::query_scalar(
                    "select count(*) from mostrador.checkpoints where run_id = $1",
                )
                .bind(run_id.0)
                .fetch_one(&pool)
                .await?;
                assert!(checkpoints > 0, "the last checkpoint stands");
            }
            CancelAction::Rollback => {
                assert_eq!(finish?, Finish::RolledBack);
                assert!(matches!(run, Err(QueueError::RunNotFound(_))));
                let checkpoints: i64 = sqlx::query_scalar(
                    "select count(*) from mostrador.checkpoints where thread_id = $1",
                )
                .bind(thread_id.0)
                .fetch_one(&pool)
                .await?;
                assert_eq!(checkpoints, 0, "the run's checkpoints are gone");
            }
        }
    }
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn retryable_node_error_is_recorded_and_retried_within_max_attempts(
    pool: PgPool,
) -> anyhow::Result<()> {
    let graph = StateGraph::new()
        .node("broken", |_| async {
            Err(NodeError::retryable("the model returned nonsense"))
        })
        .edge(START, "broken")
        .compile()?;
    enqueue(&pool, None, |new| NewRun {
        max_attempts: 2,
        ..new
    })
    .await;
    let claimed = claim_next(&pool).await;
    let thread_id = claimed.thread_id;
    assert_eq!(
        executor(&pool)
            .execute(claimed, &graph, &RunHandle::new(), None)
            .await?,
        Finish::Retrying
    );
    sqlx::query("update mostrador.runs set available_at = now()")
        .execute(&pool)
        .await?;
    let again = claim_next(&pool).await;
    let again_id = again.run_id();
    assert_eq!(
        executor(&pool)
            .execute(again, &graph, &RunHandle::new(), None)
            .await?,
        Finish::Ended(RunStatus::Error)
    );
    let run = run::get(&pool, thread_id, again_id).await?;
    assert_eq!(
        run.error.as_ref().and_then(|e| e["error"].as_str()),
        Some("NodeError")
    );
    assert!(
        run.error
            .as_ref()
            .and_then(|e| e["message"].as_str())
            .is_some_and(|m| m.contains("nonsense"))
    );
    let names: Vec<String> = events(&pool, again_id)
        .await
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(names[names.len() - 2..], ["error", "end"]);
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn fatal_node_error_ends_the_run_at_once(pool: PgPool) -> anyhow::Result<()> {
    let graph = StateGraph::new()
        .node("broken", |_| async {
            Err(NodeError::fatal("the answer broke off"))
        })
        .edge(START, "broken")
        .compile()?;
    enqueue(&pool, None, |new| NewRun {
        max_attempts: 3,
        ..new
    })
    .await;
    let claimed = claim_next(&pool).await;
    assert_eq!(
        executor(&pool)
            .execute(claimed, &graph, &RunHandle::new(), None)
            .await?,
        Finish::Ended(RunStatus::Error),
        "another attempt would fail the same way"
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn run_timeout_ends_run_as_timeout(pool: PgPool) -> anyhow::Result<()> {
    let graph = StateGraph::new()
        .node("slow", |_| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(Command::new())
        })
        .edge(START, "slow")
        .compile()?;
    enqueue(&pool, None, |new| new).await;
    let claimed = claim_next(&pool).await;
    let thread_id = claimed.thread_id;
    let finish = executor(&pool)
        .execute(
            claimed,
            &graph,
            &RunHandle::new(),
            Some(Duration::from_millis(50)),
        )
        .await?;
    assert_eq!(finish, Finish::Ended(RunStatus::Timeout));
    assert_eq!(
        thread::get(&pool, thread_id).await?.status,
        ThreadStatus::Error
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn lost_lease_stops_the_run_without_writing(pool: PgPool) -> anyhow::Result<()> {
    enqueue(&pool, None, |new| new).await;
    let stale = claim_next(&pool).await;
    let stale_id = stale.run_id();
    sqlx::query("update mostrador.workers set expires_at = now() - interval '1 hour'")
        .execute(&pool)
        .await?;
    sweep(&pool).await?;
    let fresh = claim_next(&pool).await;
    assert_eq!(fresh.attempt(), 2);
    let finish = executor(&pool)
        .execute(
            stale,
            &abc(&Starts::default(), Arc::new(Notify::new()), None),
            &RunHandle::new(),
            None,
        )
        .await?;
    assert_eq!(finish, Finish::LeaseLost);
    assert!(
        events(&pool, stale_id).await.is_empty(),
        "the stale worker wrote no event"
    );
    let checkpoints: i64 =
        sqlx::query_scalar("select count(*) from mostrador.checkpoints where thread_id = $1")
            .bind(fresh.thread_id.0)
            .fetch_one(&pool)
            .await?;
    assert_eq!(checkpoints, 0, "nor any checkpoint");
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn the_workers_max_concurrency_bounds_runs_that_set_none_and_those_asking_more(
    pool: PgPool,
) -> anyhow::Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (in_flight, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // The tasks leave three by three: the bound is reached whatever the machine's load (a task
    // waits for two others rather than sleeping and hoping they overlap), and a fourth task
    // running beside them would show in the peak.
    let together = Arc::new(tokio::sync::Barrier::new(3));
    let graph = {
        let (in_flight, peak) = (Arc::clone(&in_flight), Arc::clone(&peak));
        StateGraph::new()
            .channel("done", Reducer::Append)
            .node("work", move |_| {
                let (in_flight, peak) = (Arc::clone(&in_flight), Arc::clone(&peak));
                let together = Arc::clone(&together);
                async move {
                    peak.fetch_max(
                        in_flight.fetch_add(1, Ordering::SeqCst) + 1,
                        Ordering::SeqCst,
                    );
                    together.wait().await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    Ok(Command::new().set("done", json!(1)))
                }
            })
            .conditional_edge(START, |_| {
                (0..12)
                    .map(|i| mostrador_graph::Send::new("work", json!(i)))
                    .collect::<Vec<_>>()
            })
            .compile()?
    };
    // Bounded below three, the tasks would wait for each other for ever: a timeout says so.
    let within = Duration::from_secs(30);
    let (bounded, handle) = (executor(&pool).max_concurrency(Some(3)), RunHandle::new());
    enqueue(&pool, None, |new| new).await;
    let claimed = claim_next(&pool).await;
    let run = bounded.execute(claimed, &graph, &handle, None);
    let finish = tokio::time::timeout(within, run).await??;
    assert_eq!(finish, Finish::Ended(RunStatus::Success));
    assert_eq!(peak.load(Ordering::SeqCst), 3);

    // A caller's own max_concurrency is a request within the operator's bound, not above it.
    peak.store(0, Ordering::SeqCst);
    enqueue(&pool, None, |new| NewRun {
        config: RunConfig {
            max_concurrency: NonZeroU32::new(10),
            ..RunConfig::default()
        },
        ..new
    })
    .await;
    let claimed = claim_next(&pool).await;
    let run = bounded.execute(claimed, &graph, &handle, None);
    let finish = tokio::time::timeout(within, run).await??;
    assert_eq!(finish, Finish::Ended(RunStatus::Success));
    assert_eq!(peak.load(Ordering::SeqCst), 3, "10 asked, 3 allowed");
    Ok(())
}

/// A graph whose node remembers `note` for the thread's owner and reads back what they noted.
fn remembering() -> anyhow::Result<mostrador_graph::Graph> {
    Ok(StateGraph::new()
        .channel("note", Reducer::LastValue)
        .channel("known", Reducer::LastValue)
        .node("remember", |ctx| async move {
            let store = ctx.store()?;
            if let Some(note) = ctx.get("note").and_then(Value::as_str) {
                store.put(&["notes"], note, json!({"note": note})).await?;
            }
            let mut known: Vec<String> = store
                .search(&["notes"], None, 10)
                .await?
                .into_iter()
                .map(|item| item.key)
                .collect();
            known.sort();
            let tea = store.get(&["notes"], "tea").await?;
            Ok(Command::new()
                .set("known", json!(known))
                .set("note", json!(tea.map(|item| item.value))))
        })
        .edge(START, "remember")
        .compile()?)
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_rust_nodes_store_is_its_threads_owners_across_threads(
    pool: PgPool,
) -> anyhow::Result<()> {
    let graph = remembering()?;
    let run_on = async |owner: &str, note: &str| -> anyhow::Result<Value> {
        let thread = thread::create(&pool, &NewThread::new(GRAPH, owner)).await?;
        enqueue(&pool, Some(thread.thread_id), |new| NewRun {
            input: Some(json!({"note": note})),
            ..new
        })
        .await;
        let claimed = claim_next(&pool).await;
        let run_id = claimed.run_id();
        let finish = executor(&pool)
            .execute(claimed, &graph, &RunHandle::new(), None)
            .await?;
        assert_eq!(finish, Finish::Ended(RunStatus::Success));
        let events = events(&pool, run_id).await;
        Ok(events
            .iter()
            .rev()
            .find(|(event, _)| event == "values")
            .map(|(_, data)| data.clone())
            .expect("values"))
    };
    run_on("ana", "tea").await?;
    let second = run_on("ana", "coffee").await?;
    assert_eq!(
        second["known"],
        json!(["coffee", "tea"]),
        "ana's, across threads"
    );
    assert_eq!(second["note"], json!({"note": "tea"}));
    let luis = run_on("luis", "water").await?;
    assert_eq!(luis["known"], json!(["water"]), "not ana's");
    assert_eq!(luis["note"], Value::Null);
    Ok(())
}
