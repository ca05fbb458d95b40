//! Drain and cancel: a run stops at a superstep boundary, or at once, and goes on from there.

use super::*;

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

/// A drain during a wide fan-out lets the tasks in flight finish and starts no other; the resumed
/// run executes only the tasks that never ran, and the result is the uninterrupted one.
pub async fn drain_mid_fan_out_starts_no_waiting_task<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let starts = Starts::default();
    // Every task waits at the gate, so the first two hold both slots when the drain comes.
    let (started, gate) = (
        Arc::new(Notify::new()),
        Arc::new(tokio::sync::Semaphore::new(0)),
    );
    let graph = {
        let (starts, started, gate) = (starts.clone(), Arc::clone(&started), Arc::clone(&gate));
        StateGraph::new()
            .channel("results", Reducer::Append)
            .node("work", move |ctx| {
                let (starts, started, gate) =
                    (starts.clone(), Arc::clone(&started), Arc::clone(&gate));
                async move {
                    let i = ctx.arg().and_then(Value::as_u64).unwrap_or(0);
                    starts.record(&format!("work{i}"));
                    if i == 1 {
                        started.notify_one();
                    }
                    drop(gate.acquire().await.expect("the gate is never closed"));
                    Ok(Command::new().set("results", json!(i)))
                }
            })
            .conditional_edge(START, |_| {
                (0..8)
                    .map(|i| Send::new("work", json!(i)))
                    .collect::<Vec<_>>()
            })
            .compile()?
    };
    let options = RunOptions {
        max_concurrency: 2,
        ..RunOptions::default()
    };
    let thread_id = thread();
    let control = RunControl::new();
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
        control.request_drain("sigterm");
        gate.add_permits(8);
    };
    let (result, ()) = tokio::join!(running, drive);
    assert_eq!(result?.outcome, Outcome::Drained("sigterm".into()));
    let ran: usize = (0..8).map(|i| starts.of(&format!("work{i}"))).sum();
    assert_eq!(
        ran, 2,
        "only the tasks in flight ran; those waiting for a slot did not start"
    );

    let resumed = graph
        .run(
            checkpointer,
            thread_id,
            RunInput::Continue,
            &options,
            &RunControl::new(),
            discard(),
        )
        .await?;
    assert_eq!(resumed.outcome, Outcome::Finished);
    assert_eq!(resumed.values["results"], json!((0..8).collect::<Vec<_>>()));
    for i in 0..8 {
        assert_eq!(starts.of(&format!("work{i}")), 1, "work{i} ran once");
    }
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
