//! The engine's guarantees as scenarios that run against any [`Checkpointer`], so the in-memory
//! and the Postgres checkpointers are held to the same behaviour. Each crate's tests call every
//! scenario through [`conformance_tests!`](crate::conformance_tests).
//!
//! Compiled only with the `conformance` feature (a dev-dependency feature of the crates that test
//! a checkpointer).

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::checkpoint::Checkpointer;
use crate::stream::discard;
use crate::{
    Command, Durability, END, Error, EventSink, Graph, MemoryCheckpointer, NodeError, Outcome,
    Reducer, Resume, RetryPolicy, RunControl, RunInput, RunOptions, START, Send, StateGraph,
    StreamMode,
};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use uuid::Uuid;

/// How many times each node started.
#[derive(Clone, Default)]
struct Starts(Arc<Mutex<HashMap<String, usize>>>);

impl Starts {
    fn record(&self, node: &str) {
        *self
            .0
            .lock()
            .expect("lock")
            .entry(node.to_owned())
            .or_default() += 1;
    }

    fn of(&self, node: &str) -> usize {
        self.0.lock().expect("lock").get(node).copied().unwrap_or(0)
    }
}

/// What a scenario returns.
pub type TestResult = Result<(), crate::checkpoint::BoxError>;

fn thread() -> Uuid {
    Uuid::now_v7()
}

fn input() -> RunInput {
    RunInput::Values(json!({}))
}

async fn run(
    graph: &Graph,
    checkpointer: &impl Checkpointer,
    thread_id: Uuid,
    input: RunInput,
) -> crate::RunResult {
    graph
        .run(
            checkpointer,
            thread_id,
            input,
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await
        .expect("run")
}

/// A linear graph n1 → … → n6; each node appends its name to `log`. Node `n{gate}` waits for
/// `release` after announcing it started.
fn linear(starts: &Starts, gate: usize, started: Arc<Notify>, release: Arc<Notify>) -> Graph {
    let mut graph = StateGraph::new()
        .channel("log", Reducer::Append)
        .edge(START, "n1")
        .edge("n6", END);
    for i in 1..=6 {
        let name = format!("n{i}");
        let (starts, started, release) =
            (starts.clone(), Arc::clone(&started), Arc::clone(&release));
        let node_name = name.clone();
        graph = graph.node(name.clone(), move |_ctx| {
            let (starts, started, release, node_name) = (
                starts.clone(),
                Arc::clone(&started),
                Arc::clone(&release),
                node_name.clone(),
            );
            async move {
                starts.record(&node_name);
                if i == gate {
                    started.notify_one();
                    release.notified().await;
                }
                Ok(Command::new().set("log", json!(node_name)))
            }
        });
        if i < 6 {
            graph = graph.edge(name, format!("n{}", i + 1));
        }
    }
    graph.compile().expect("valid graph")
}

pub async fn drain_mid_run_stops_at_superstep_boundary<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let starts = Starts::default();
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let graph = linear(&starts, 3, Arc::clone(&started), Arc::clone(&release));
    let thread_id = thread();
    let control = RunControl::new();

    let running = {
        let (graph, control) = (graph.clone(), control.clone());
        async move {
            graph
                .run(
                    checkpointer,
                    thread_id,
                    input(),
                    &RunOptions::default(),
                    &control,
                    discard(),
                )
                .await
        }
    };
    let drive = async {
        started.notified().await;
        control.request_drain("sigterm");
        release.notify_one();
    };
    let (result, ()) = tokio::join!(running, drive);
    let result = result?;
    assert_eq!(result.outcome, Outcome::Drained("sigterm".into()));
    assert_eq!(
        result.values["log"],
        json!(["n1", "n2", "n3"]),
        "node 3 finished its superstep"
    );
    let state = graph.get_state(checkpointer, thread_id, None).await?;
    assert_eq!(state.next, vec!["n4"]);

    let resumed = run(&graph, checkpointer, thread_id, RunInput::Continue).await;
    assert_eq!(resumed.outcome, Outcome::Finished);
    assert_eq!(
        resumed.values["log"],
        json!(["n1", "n2", "n3", "n4", "n5", "n6"])
    );
    for i in 1..=6 {
        assert_eq!(starts.of(&format!("n{i}")), 1, "n{i} ran once");
    }
    Ok(())
}

pub async fn drain_in_the_last_superstep_reports_no_drain<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let starts = Starts::default();
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let graph = linear(&starts, 6, Arc::clone(&started), Arc::clone(&release));
    let control = RunControl::new();
    let options = RunOptions::default();
    let running = graph.run(
        checkpointer,
        thread(),
        input(),
        &options,
        &control,
        discard(),
    );
    let drive = async {
        started.notified().await;
        control.request_drain("sigterm");
        release.notify_one();
    };
    let (result, ()) = tokio::join!(running, drive);
    assert_eq!(result?.outcome, Outcome::Finished);
    Ok(())
}

/// Collects events into a channel.
fn collect() -> (EventSink, mpsc::UnboundedReceiver<crate::StreamEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Arc::new(move |event| drop(tx.send(event))), rx)
}

pub async fn finished_tasks_are_not_rerun_after_a_crash<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let starts = Starts::default();
    let hang = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let graph = {
        let (starts_a, starts_b, hang) = (starts.clone(), starts.clone(), Arc::clone(&hang));
        StateGraph::new()
            .channel("done", Reducer::Append)
            .node("a", move |_| {
                let starts = starts_a.clone();
                async move {
                    starts.record("a");
                    Ok(Command::new().set("done", json!("a")))
                }
            })
            .node("b", move |_| {
                let (starts, hang) = (starts_b.clone(), Arc::clone(&hang));
                async move {
                    starts.record("b");
                    if hang.load(Ordering::SeqCst) {
                        std::future::pending::<()>().await;
                    }
                    Ok(Command::new().set("done", json!("b")))
                }
            })
            .edge(START, "a")
            .edge(START, "b")
            .compile()?
    };
    let thread_id = thread();
    let (events, mut received) = collect();
    {
        let (options, control) = (RunOptions::default(), RunControl::new());
        let running = graph.run(checkpointer, thread_id, input(), &options, &control, events);
        tokio::pin!(running);
        // Drive the run until task `a` reported its (already saved) update, then drop it: the
        // process died with `b` in flight.
        loop {
            tokio::select! {
                _ = &mut running => panic!("the run cannot finish while b hangs"),
                event = received.recv() => {
                    let event = event.expect("the run is alive");
                    if event.mode == StreamMode::Updates && event.data.get("a").is_some() {
                        break;
                    }
                }
            }
        }
    }
    hang.store(false, Ordering::SeqCst);
    let resumed = run(&graph, checkpointer, thread_id, RunInput::Continue).await;
    assert_eq!(resumed.outcome, Outcome::Finished);
    assert_eq!(
        resumed.values["done"],
        json!(["a", "b"]),
        "writes applied in task order"
    );
    assert_eq!(starts.of("a"), 1, "the finished task was not run again");
    assert_eq!(starts.of("b"), 2, "the task in flight ran again");
    Ok(())
}

fn approval_graph(starts: &Starts, interrupts: usize) -> Graph {
    let starts = starts.clone();
    StateGraph::new()
        .channel("decisions", Reducer::Append)
        .node("approve", move |ctx| {
            let starts = starts.clone();
            async move {
                starts.record("approve");
                let mut decisions = Vec::new();
                for i in 0..interrupts {
                    decisions.push(ctx.interrupt(json!({"question": i}))?);
                }
                Ok(Command::new().set("decisions", Value::Array(decisions)))
            }
        })
        .edge(START, "approve")
        .compile()
        .expect("valid graph")
}

pub async fn interrupt_reruns_the_node_from_its_start<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let starts = Starts::default();
    let graph = approval_graph(&starts, 1);
    let thread_id = thread();
    let first = run(&graph, checkpointer, thread_id, input()).await;
    let Outcome::Interrupted(interrupts) = first.outcome else {
        panic!("expected an interrupt")
    };
    assert_eq!(interrupts.len(), 1);
    assert_eq!(interrupts[0].value, json!({"question": 0}));
    let state = graph.get_state(checkpointer, thread_id, None).await?;
    assert_eq!(state.next, vec!["approve"]);
    assert_eq!(state.interrupts().count(), 1);

    let resumed = run(
        &graph,
        checkpointer,
        thread_id,
        RunInput::Resume(Resume::Value(json!("yes"))),
    )
    .await;
    assert_eq!(resumed.outcome, Outcome::Finished);
    assert_eq!(
        resumed.values["decisions"],
        json!(["yes"]),
        "the resume value reached interrupt"
    );
    assert_eq!(starts.of("approve"), 2, "the node ran again from its start");

    let res = graph
        .run(
            checkpointer,
            thread_id,
            RunInput::Resume(Resume::Value(json!(1))),
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await;
    assert!(
        matches!(res, Err(Error::NothingToResume)),
        "a finished thread waits for nothing"
    );
    Ok(())
}

pub async fn resume_value_reaches_interrupt_by_id<C: Checkpointer>(checkpointer: &C) -> TestResult {
    let graph = approval_graph(&Starts::default(), 1);
    let thread_id = thread();
    let Outcome::Interrupted(interrupts) =
        run(&graph, checkpointer, thread_id, input()).await.outcome
    else {
        panic!("expected an interrupt")
    };
    let bad = graph
        .run(
            checkpointer,
            thread_id,
            RunInput::Resume(Resume::ById([("nope".to_owned(), json!(1))].into())),
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await;
    assert!(matches!(bad, Err(Error::InvalidInput(_))));
    let by_id = Resume::ById([(interrupts[0].id.clone(), json!({"approved": true}))].into());
    let resumed = run(&graph, checkpointer, thread_id, RunInput::Resume(by_id)).await;
    assert_eq!(resumed.values["decisions"], json!([{"approved": true}]));
    Ok(())
}

pub async fn multiple_interrupts_in_one_node<C: Checkpointer>(checkpointer: &C) -> TestResult {
    let starts = Starts::default();
    let graph = approval_graph(&starts, 2);
    let thread_id = thread();
    let Outcome::Interrupted(first) = run(&graph, checkpointer, thread_id, input()).await.outcome
    else {
        panic!("expected the first interrupt")
    };
    assert_eq!(first[0].value, json!({"question": 0}));
    let Outcome::Interrupted(second) = run(
        &graph,
        checkpointer,
        thread_id,
        RunInput::Resume(Resume::Value(json!("a"))),
    )
    .await
    .outcome
    else {
        panic!("expected the second interrupt")
    };
    assert_eq!(second[0].value, json!({"question": 1}));
    assert_ne!(first[0].id, second[0].id);
    let done = run(
        &graph,
        checkpointer,
        thread_id,
        RunInput::Resume(Resume::Value(json!("b"))),
    )
    .await;
    assert_eq!(done.outcome, Outcome::Finished);
    assert_eq!(
        done.values["decisions"],
        json!(["a", "b"]),
        "matched by order"
    );
    assert_eq!(starts.of("approve"), 3);
    Ok(())
}

pub async fn unknown_thread_has_empty_state<C: Checkpointer>(checkpointer: &C) -> TestResult {
    let graph = approval_graph(&Starts::default(), 1);
    let state = graph.get_state(checkpointer, thread(), None).await?;
    assert!(state.values.is_empty() && state.next.is_empty() && state.checkpoint_id.is_none());
    assert!(
        graph
            .get_history(checkpointer, thread(), 10, None)
            .await?
            .is_empty()
    );
    let nothing = run(&graph, checkpointer, thread(), RunInput::Continue).await;
    assert_eq!(
        (nothing.outcome, nothing.supersteps),
        (Outcome::Finished, 0)
    );
    Ok(())
}

pub async fn fan_out_respects_max_concurrency<C: Checkpointer>(checkpointer: &C) -> TestResult {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let graph = {
        let (in_flight, peak) = (Arc::clone(&in_flight), Arc::clone(&peak));
        StateGraph::new()
            .channel("results", Reducer::Append)
            .node("work", move |ctx| {
                let (in_flight, peak) = (Arc::clone(&in_flight), Arc::clone(&peak));
                async move {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    Ok(Command::new().set("results", ctx.arg().cloned().unwrap_or_default()))
                }
            })
            .conditional_edge(START, |_| {
                (0..50)
                    .map(|i| Send::new("work", json!(i)))
                    .collect::<Vec<_>>()
            })
            .compile()?
    };
    let options = RunOptions {
        max_concurrency: 24,
        ..RunOptions::default()
    };
    let result = graph
        .run(
            checkpointer,
            thread(),
            input(),
            &options,
            &RunControl::new(),
            discard(),
        )
        .await?;
    assert_eq!(
        result.values["results"],
        json!((0..50).collect::<Vec<_>>()),
        "writes in task order"
    );
    assert_eq!(
        peak.load(Ordering::SeqCst),
        24,
        "never more than max_concurrency at once"
    );
    Ok(())
}

pub async fn recursion_limit_stops_a_loop<C: Checkpointer>(checkpointer: &C) -> TestResult {
    let graph = StateGraph::new()
        .channel(
            "n",
            Reducer::custom(|a, b| Ok(json!(a.as_i64().unwrap_or(0) + b.as_i64().unwrap_or(0)))),
        )
        .node("again", |_| async { Ok(Command::new().set("n", json!(1))) })
        .edge(START, "again")
        .edge("again", "again")
        .compile()?;
    let options = RunOptions {
        recursion_limit: 5,
        ..RunOptions::default()
    };
    let thread_id = thread();
    let res = graph
        .run(
            checkpointer,
            thread_id,
            input(),
            &options,
            &RunControl::new(),
            discard(),
        )
        .await;
    assert!(matches!(res, Err(Error::RecursionLimit(5))));
    let state = graph.get_state(checkpointer, thread_id, None).await?;
    assert_eq!(
        state.values["n"],
        json!(5),
        "the supersteps before the limit stand"
    );
    Ok(())
}

pub async fn node_retry_policy<C: Checkpointer>(checkpointer: &C) -> TestResult {
    let attempts = Arc::new(AtomicUsize::new(0));
    let policy = RetryPolicy {
        max_attempts: 3,
        initial_interval: Duration::from_millis(1),
        ..RetryPolicy::default()
    };
    let flaky = {
        let attempts = Arc::clone(&attempts);
        StateGraph::new()
            .channel("ok", Reducer::LastValue)
            .node_with(
                "flaky",
                move |_| {
                    let attempts = Arc::clone(&attempts);
                    async move {
                        if attempts.fetch_add(1, Ordering::SeqCst) < 2 {
                            return Err(NodeError::retryable("model gateway 503"));
                        }
                        Ok(Command::new().set("ok", json!(true)))
                    }
                },
                Some(policy.clone()),
                None,
            )
            .edge(START, "flaky")
            .compile()?
    };
    let result = run(&flaky, checkpointer, thread(), input()).await;
    assert_eq!(
        (result.outcome, &result.values["ok"]),
        (Outcome::Finished, &json!(true))
    );
    assert_eq!(attempts.load(Ordering::SeqCst), 3);

    let fatal_attempts = Arc::new(AtomicUsize::new(0));
    let fatal = {
        let attempts = Arc::clone(&fatal_attempts);
        StateGraph::new()
            .node_with(
                "fatal",
                move |_| {
                    attempts.fetch_add(1, Ordering::SeqCst);
                    async { Err(NodeError::fatal("bad input")) }
                },
                Some(policy),
                None,
            )
            .edge(START, "fatal")
            .compile()?
    };
    let res = fatal
        .run(
            checkpointer,
            thread(),
            input(),
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await;
    assert!(matches!(res, Err(Error::NodeFailed { ref node, .. }) if node == "fatal"));
    assert_eq!(
        fatal_attempts.load(Ordering::SeqCst),
        1,
        "fatal failures are not retried"
    );
    Ok(())
}

pub async fn node_timeout<C: Checkpointer>(checkpointer: &C) -> TestResult {
    let attempts = Arc::new(AtomicUsize::new(0));
    let graph = {
        let attempts = Arc::clone(&attempts);
        StateGraph::new()
            .node_with(
                "slow",
                move |_| {
                    attempts.fetch_add(1, Ordering::SeqCst);
                    async {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        Ok(Command::new())
                    }
                },
                Some(RetryPolicy {
                    max_attempts: 2,
                    initial_interval: Duration::from_millis(1),
                    ..RetryPolicy::default()
                }),
                Some(Duration::from_millis(30)),
            )
            .edge(START, "slow")
            .compile()?
    };
    let res = graph
        .run(
            checkpointer,
            thread(),
            input(),
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await;
    match res {
        Err(Error::NodeFailed { node, message }) => {
            assert_eq!(node, "slow");
            assert!(message.contains("timed out"), "{message}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        2,
        "a timeout is retried under the policy"
    );
    Ok(())
}

pub async fn cancel_aborts_in_flight_task_and_keeps_last_checkpoint<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let finished = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(Notify::new());
    let graph = {
        let (finished, started) = (Arc::clone(&finished), Arc::clone(&started));
        StateGraph::new()
            .channel("log", Reducer::Append)
            .node("a", |_| async { Ok(Command::new().set("log", json!("a"))) })
            .node("b", move |_| {
                let (finished, started) = (Arc::clone(&finished), Arc::clone(&started));
                async move {
                    started.notify_one();
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    finished.fetch_add(1, Ordering::SeqCst);
                    Ok(Command::new().set("log", json!("b")))
                }
            })
            .edge(START, "a")
            .edge("a", "b")
            .compile()?
    };
    let thread_id = thread();
    let control = RunControl::new();
    let options = RunOptions::default();
    let running = graph.run(
        checkpointer,
        thread_id,
        input(),
        &options,
        &control,
        discard(),
    );
    let drive = async {
        started.notified().await;
        control.cancel();
    };
    let (result, ()) = tokio::join!(running, drive);
    let result = result?;
    assert_eq!(result.outcome, Outcome::Cancelled);
    assert_eq!(
        finished.load(Ordering::SeqCst),
        0,
        "the task in flight was aborted"
    );
    let state = graph.get_state(checkpointer, thread_id, None).await?;
    assert_eq!(
        state.values["log"],
        json!(["a"]),
        "the last checkpoint stands"
    );
    assert_eq!(state.next, vec!["b"]);
    Ok(())
}

/// A graph that appends to `log` three times, one node per superstep.
fn three_steps() -> Graph {
    StateGraph::new()
        .channel("log", Reducer::Append)
        .channel("last", Reducer::LastValue)
        .node("a", |_| async {
            Ok(Command::new()
                .set("log", json!("a"))
                .set("last", json!("a")))
        })
        .node("b", |_| async { Ok(Command::new().set("log", json!("b"))) })
        .node("c", |_| async { Ok(Command::new().set("log", json!("c"))) })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", "c")
        .compile()
        .expect("valid graph")
}

pub async fn history_is_newest_first_and_pages_with_before<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let graph = three_steps();
    let thread_id = thread();
    run(&graph, checkpointer, thread_id, input()).await;
    let history = graph.get_history(checkpointer, thread_id, 10, None).await?;
    let steps: Vec<Option<i64>> = history.iter().map(|s| s.step).collect();
    assert_eq!(steps, vec![Some(2), Some(1), Some(0), Some(-1)]);
    assert_eq!(history[0].metadata["source"], "loop");
    assert_eq!(history[3].metadata["source"], "input");
    let older = graph
        .get_history(checkpointer, thread_id, 2, history[1].checkpoint_id)
        .await?;
    assert_eq!(
        older.iter().map(|s| s.step).collect::<Vec<_>>(),
        vec![Some(0), Some(-1)]
    );
    let at = graph
        .get_state(checkpointer, thread_id, history[2].checkpoint_id)
        .await?;
    assert_eq!(at.values["log"], json!(["a"]));
    assert_eq!(at.next, vec!["b"]);
    Ok(())
}

pub async fn update_state_as_a_node_routes_from_it<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let graph = three_steps();
    let thread_id = thread();
    graph
        .update_state(
            checkpointer,
            thread_id,
            json!({"log": ["manual"]}),
            Some("a"),
        )
        .await?;
    let state = graph.get_state(checkpointer, thread_id, None).await?;
    assert_eq!(state.next, vec!["b"], "as if a had run");
    let result = run(&graph, checkpointer, thread_id, RunInput::Continue).await;
    assert_eq!(result.values["log"], json!(["manual", "b", "c"]));
    let res = graph
        .update_state(checkpointer, thread_id, json!({"nope": 1}), None)
        .await;
    assert!(matches!(res, Err(Error::InvalidUpdate { .. })));
    let res = graph
        .update_state(checkpointer, thread_id, json!({"log": 1}), Some("zz"))
        .await;
    assert!(matches!(res, Err(Error::UnknownNode(_))));
    Ok(())
}

pub async fn prune_keep_latest_preserves_state<C: Checkpointer>(checkpointer: &C) -> TestResult {
    let graph = three_steps();
    let thread_id = thread();
    run(&graph, checkpointer, thread_id, input()).await;
    let before = graph.get_state(checkpointer, thread_id, None).await?;
    checkpointer.prune(thread_id, 1).await?;
    let after = graph.get_state(checkpointer, thread_id, None).await?;
    assert_eq!(
        after.values, before.values,
        "`last` was written three checkpoints ago and survives"
    );
    assert_eq!(after.values["last"], json!("a"));
    assert_eq!(
        graph
            .get_history(checkpointer, thread_id, 10, None)
            .await?
            .len(),
        1
    );
    Ok(())
}

pub async fn copy_thread_is_independent<C: Checkpointer>(checkpointer: &C) -> TestResult {
    let graph = three_steps();
    let (original, copy) = (thread(), thread());
    run(&graph, checkpointer, original, input()).await;
    checkpointer.copy_thread(original, copy).await?;
    run(
        &graph,
        checkpointer,
        copy,
        RunInput::Values(json!({"log": ["again"]})),
    )
    .await;
    let original_state = graph.get_state(checkpointer, original, None).await?;
    let copy_state = graph.get_state(checkpointer, copy, None).await?;
    assert_eq!(original_state.values["log"], json!(["a", "b", "c"]));
    assert_eq!(
        copy_state.values["log"],
        json!(["a", "b", "c", "again", "a", "b", "c"])
    );
    Ok(())
}

pub async fn invalid_graphs_and_writes_are_errors<C: Checkpointer>(checkpointer: &C) -> TestResult {
    assert!(matches!(
        StateGraph::new()
            .node("a", |_| async { Ok(Command::new()) })
            .compile(),
        Err(Error::InvalidGraph(_))
    ));
    assert!(matches!(
        StateGraph::new().edge(START, "ghost").compile(),
        Err(Error::InvalidGraph(_))
    ));
    let graph = StateGraph::new()
        .channel("x", Reducer::LastValue)
        .node("a", |_| async { Ok(Command::new().set("y", json!(1))) })
        .node("b", |_| async { Ok(Command::new().set("x", json!(1))) })
        .node("c", |_| async { Ok(Command::new().set("x", json!(2))) })
        .edge(START, "a")
        .compile()?;
    let res = graph
        .run(
            checkpointer,
            thread(),
            input(),
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await;
    assert!(matches!(res, Err(Error::InvalidUpdate { ref channel, .. }) if channel == "y"));
    let two_writers = StateGraph::new()
        .channel("x", Reducer::LastValue)
        .node("b", |_| async { Ok(Command::new().set("x", json!(1))) })
        .node("c", |_| async { Ok(Command::new().set("x", json!(2))) })
        .edge(START, "b")
        .edge(START, "c")
        .compile()?;
    let res = two_writers
        .run(
            checkpointer,
            thread(),
            input(),
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await;
    assert!(matches!(res, Err(Error::InvalidUpdate { ref channel, .. }) if channel == "x"));
    let res = two_writers
        .run(
            checkpointer,
            thread(),
            RunInput::Values(json!([1])),
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await;
    assert!(matches!(res, Err(Error::InvalidInput(_))));
    Ok(())
}

/// Defines one test per scenario, each with a checkpointer from `$make` (an async expression
/// evaluated inside the test, with `$($arg)*` in scope).
#[macro_export]
macro_rules! conformance_tests {
    ($attr:meta, ($($arg:tt)*), $make:expr) => {
        #[$attr]
        async fn drain_mid_run_stops_at_superstep_boundary($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::drain_mid_run_stops_at_superstep_boundary(&$make).await
        }
        #[$attr]
        async fn drain_in_the_last_superstep_reports_no_drain($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::drain_in_the_last_superstep_reports_no_drain(&$make).await
        }
        #[$attr]
        async fn finished_tasks_are_not_rerun_after_a_crash($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::finished_tasks_are_not_rerun_after_a_crash(&$make).await
        }
        #[$attr]
        async fn interrupt_reruns_the_node_from_its_start($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::interrupt_reruns_the_node_from_its_start(&$make).await
        }
        #[$attr]
        async fn resume_value_reaches_interrupt_by_id($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::resume_value_reaches_interrupt_by_id(&$make).await
        }
        #[$attr]
        async fn multiple_interrupts_in_one_node($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::multiple_interrupts_in_one_node(&$make).await
        }
        #[$attr]
        async fn unknown_thread_has_empty_state($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::unknown_thread_has_empty_state(&$make).await
        }
        #[$attr]
        async fn fan_out_respects_max_concurrency($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::fan_out_respects_max_concurrency(&$make).await
        }
        #[$attr]
        async fn recursion_limit_stops_a_loop($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::recursion_limit_stops_a_loop(&$make).await
        }
        #[$attr]
        async fn node_retry_policy($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::node_retry_policy(&$make).await
        }
        #[$attr]
        async fn node_timeout($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::node_timeout(&$make).await
        }
        #[$attr]
        async fn cancel_aborts_in_flight_task_and_keeps_last_checkpoint($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::cancel_aborts_in_flight_task_and_keeps_last_checkpoint(&$make).await
        }
        #[$attr]
        async fn history_is_newest_first_and_pages_with_before($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::history_is_newest_first_and_pages_with_before(&$make).await
        }
        #[$attr]
        async fn update_state_as_a_node_routes_from_it($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::update_state_as_a_node_routes_from_it(&$make).await
        }
        #[$attr]
        async fn prune_keep_latest_preserves_state($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::prune_keep_latest_preserves_state(&$make).await
        }
        #[$attr]
        async fn copy_thread_is_independent($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::copy_thread_is_independent(&$make).await
        }
        #[$attr]
        async fn invalid_graphs_and_writes_are_errors($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::invalid_graphs_and_writes_are_errors(&$make).await
        }
        #[$attr]
        async fn resume_works_under_every_durability($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::resume_works_under_every_durability(&$make).await
        }
        #[$attr]
        async fn run_emits_every_stream_mode($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::run_emits_every_stream_mode(&$make).await
        }
        #[$attr]
        async fn durability_modes_save_what_they_promise($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::durability_modes_save_what_they_promise(&$make).await
        }
        #[$attr]
        async fn drained_and_resumed_random_graphs_match_uninterrupted_runs($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::drained_and_resumed_random_graphs_match_uninterrupted_runs(&$make).await
        }
    };
}

/// A small deterministic generator (xorshift64*), so a failing seed can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// Which node ran with which argument, in the order tasks started.
type Executions = Arc<Mutex<Vec<String>>>;

/// A random graph of 2 to 6 nodes: static edges only go forward (so it ends), some nodes fan out
/// with `Send`s to a later node, and every node writes three channels with different reducers
/// (append, a custom sum, messages by id).
fn random_graph(seed: u64, executions: &Executions) -> Graph {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let n = 2 + rng.below(5) as usize;
    let mut graph = StateGraph::new()
        .channel("log", Reducer::Append)
        .channel(
            "sum",
            Reducer::custom(|a, b| Ok(json!(a.as_i64().unwrap_or(0) + b.as_i64().unwrap_or(0)))),
        )
        .channel("messages", Reducer::Messages)
        .edge(START, "n0");
    for i in 0..n {
        let name = format!("n{i}");
        let executions = Arc::clone(executions);
        let weight = 1 + rng.below(9) as i64;
        graph = graph.node(name.clone(), move |ctx| {
            let executions = Arc::clone(&executions);
            let label = format!(
                "{}:{}",
                ctx.node(),
                ctx.arg().cloned().unwrap_or(Value::Null)
            );
            async move {
                executions.lock().expect("lock").push(label.clone());
                tokio::task::yield_now().await;
                Ok(Command::new()
                    .set("log", json!(label))
                    .set("sum", json!(weight))
                    .set("messages", json!({"id": label, "content": label})))
            }
        });
        for j in i + 1..n {
            if rng.below(3) == 0 {
                graph = graph.edge(name.clone(), format!("n{j}"));
            }
        }
        if i + 1 < n && rng.below(3) == 0 {
            let target = format!("n{}", i + 1 + rng.below((n - i - 1) as u64) as usize);
            let fan = rng.below(5) + 1;
            graph = graph.conditional_edge(name.clone(), move |_state| {
                (0..fan)
                    .map(|k| Send::new(target.clone(), json!(k)))
                    .collect::<Vec<_>>()
            });
        }
    }
    graph.compile().expect("random graphs are valid")
}

/// For random graphs: a run drained at a random superstep and resumed ends in the same state,
/// after the same node executions, as an uninterrupted run on the in-memory checkpointer.
pub async fn drained_and_resumed_random_graphs_match_uninterrupted_runs<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let mut drains = 0;
    for seed in 0..40u64 {
        let uninterrupted: Executions = Arc::default();
        let graph = random_graph(seed, &uninterrupted);
        let reference = MemoryCheckpointer::new();
        let expected = run(&graph, &reference, thread(), input()).await;
        assert_eq!(expected.outcome, Outcome::Finished, "seed {seed}");

        let drained: Executions = Arc::default();
        let graph = random_graph(seed, &drained);
        let thread_id = thread();
        let drain_after = Rng(seed + 7).below(expected.supersteps as u64 + 1) as i64 - 1;
        let control = RunControl::new();
        let events: EventSink = {
            let control = control.clone();
            Arc::new(move |event| {
                if event.mode == StreamMode::Checkpoints
                    && event.data["step"].as_i64() == Some(drain_after)
                {
                    control.request_drain("test");
                }
            })
        };
        let first = graph
            .run(
                checkpointer,
                thread_id,
                input(),
                &RunOptions::default(),
                &control,
                events,
            )
            .await?;
        let last = if matches!(first.outcome, Outcome::Drained(_)) {
            drains += 1;
            run(&graph, checkpointer, thread_id, RunInput::Continue).await
        } else {
            first
        };
        assert_eq!(last.outcome, Outcome::Finished, "seed {seed}");
        assert_eq!(
            last.values, expected.values,
            "seed {seed}: same final state"
        );
        let mut seen = drained.lock().expect("lock").clone();
        let mut wanted = uninterrupted.lock().expect("lock").clone();
        seen.sort();
        wanted.sort();
        assert_eq!(
            seen, wanted,
            "seed {seed}: every node execution happened once, none twice"
        );
    }
    assert!(
        drains >= 20,
        "only {drains} of 40 runs were drained: the property was barely exercised"
    );
    Ok(())
}

/// `sync` saves every checkpoint, `async` too (each while the next superstep runs), `exit` only
/// the last one; all three end in the same state.
pub async fn durability_modes_save_what_they_promise<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let graph = three_steps();
    let mut finals = Vec::new();
    for (durability, checkpoints) in [
        (Durability::Sync, 4),
        (Durability::Async, 4),
        (Durability::Exit, 1),
    ] {
        let thread_id = thread();
        let options = RunOptions {
            durability,
            ..RunOptions::default()
        };
        let result = graph
            .run(
                checkpointer,
                thread_id,
                input(),
                &options,
                &RunControl::new(),
                discard(),
            )
            .await?;
        assert_eq!(result.outcome, Outcome::Finished);
        let history = graph.get_history(checkpointer, thread_id, 10, None).await?;
        assert_eq!(history.len(), checkpoints, "{durability:?}");
        let state = graph.get_state(checkpointer, thread_id, None).await?;
        assert_eq!(
            state.values, result.values,
            "{durability:?}: the last checkpoint is saved"
        );
        finals.push(state.values);
    }
    assert!(finals.windows(2).all(|pair| pair[0] == pair[1]));
    Ok(())
}

/// A run emits, in order: the input's `values`, then for each superstep its tasks' `tasks` and
/// `updates` (after their writes are saved), the nodes' own `messages` and `custom` events, and the
/// superstep's `values` and `checkpoints`; `debug` wraps tasks and checkpoints.
pub async fn run_emits_every_stream_mode<C: Checkpointer>(checkpointer: &C) -> TestResult {
    let graph = StateGraph::new()
        .channel("answer", Reducer::LastValue)
        .node("model", |ctx| async move {
            for token in ["ho", "la"] {
                ctx.emit_message(json!({"content": token}));
            }
            ctx.emit_custom(json!({"progress": 1.0}));
            Ok(Command::new().set("answer", json!("hola")))
        })
        .edge(START, "model")
        .compile()?;
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink: EventSink = {
        let events = Arc::clone(&events);
        Arc::new(move |event| events.lock().expect("lock").push(event))
    };
    let options = RunOptions::default();
    graph
        .run(
            checkpointer,
            thread(),
            input(),
            &options,
            &RunControl::new(),
            sink,
        )
        .await?;
    let events = events.lock().expect("lock").clone();
    let modes: Vec<&str> = events
        .iter()
        .filter(|e| e.mode != StreamMode::Debug)
        .map(|e| e.mode.as_str())
        .collect();
    assert_eq!(
        modes,
        [
            "values",
            "checkpoints",
            "tasks",
            "messages",
            "messages",
            "custom",
            "updates",
            "tasks",
            "values",
            "checkpoints"
        ]
    );
    let messages: Vec<&Value> = events
        .iter()
        .filter(|e| e.mode == StreamMode::Messages)
        .map(|e| &e.data["content"])
        .collect();
    assert_eq!(
        messages,
        [&json!("ho"), &json!("la")],
        "tokens in the order the node emitted them"
    );
    assert!(
        events
            .iter()
            .filter(|e| e.mode == StreamMode::Messages)
            .all(|e| e.node.as_deref() == Some("model"))
    );
    let updates = events
        .iter()
        .find(|e| e.mode == StreamMode::Updates)
        .expect("an update");
    assert_eq!(updates.data, json!({"model": {"answer": "hola"}}));
    let last_values = events
        .iter()
        .rev()
        .find(|e| e.mode == StreamMode::Values)
        .expect("values");
    assert_eq!(last_values.data, json!({"answer": "hola"}));
    let debug: Vec<&str> = events
        .iter()
        .filter(|e| e.mode == StreamMode::Debug)
        .filter_map(|e| e.data["type"].as_str())
        .collect();
    assert_eq!(debug, ["checkpoint", "task", "task_result", "checkpoint"]);
    Ok(())
}

/// An interrupted run resumes under every durability, the resume value reaching the node.
pub async fn resume_works_under_every_durability<C: Checkpointer>(checkpointer: &C) -> TestResult {
    for durability in [Durability::Sync, Durability::Async, Durability::Exit] {
        let graph = approval_graph(&Starts::default(), 1);
        let thread_id = thread();
        let options = RunOptions {
            durability,
            ..RunOptions::default()
        };
        let first = graph
            .run(
                checkpointer,
                thread_id,
                input(),
                &options,
                &RunControl::new(),
                discard(),
            )
            .await?;
        assert!(
            matches!(first.outcome, Outcome::Interrupted(_)),
            "{durability:?}"
        );
        let resume = RunInput::Resume(Resume::Value(json!("yes")));
        let done = graph
            .run(
                checkpointer,
                thread_id,
                resume,
                &options,
                &RunControl::new(),
                discard(),
            )
            .await?;
        assert_eq!(done.outcome, Outcome::Finished, "{durability:?}");
        assert_eq!(done.values["decisions"], json!(["yes"]), "{durability:?}");
    }
    Ok(())
}
