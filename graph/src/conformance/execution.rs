//! Supersteps, pending writes, drain and cancel, concurrency and limits, retries and timeouts,
//! durability.

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

pub async fn fan_out_respects_max_concurrency<C: Checkpointer>(checkpointer: &C) -> TestResult {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    // The tasks leave 24 by 24: the bound is reached whatever the machine's load (a task waits for
    // the others rather than sleeping and hoping they overlap), and a 25th task running beside
    // them would show in the peak. Bounded below 24, they would wait for ever: a timeout says so.
    let together = Arc::new(tokio::sync::Barrier::new(24));
    let graph = {
        let (in_flight, peak) = (Arc::clone(&in_flight), Arc::clone(&peak));
        StateGraph::new()
            .channel("results", Reducer::Append)
            .node("work", move |ctx| {
                let (in_flight, peak) = (Arc::clone(&in_flight), Arc::clone(&peak));
                let together = Arc::clone(&together);
                async move {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    together.wait().await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    Ok(Command::new().set("results", ctx.arg().cloned().unwrap_or_default()))
                }
            })
            .conditional_edge(START, |_| {
                (0..48)
                    .map(|i| Send::new("work", json!(i)))
                    .collect::<Vec<_>>()
            })
            .compile()?
    };
    let options = RunOptions {
        max_concurrency: 24,
        ..RunOptions::default()
    };
    let control = RunControl::new();
    let run = graph.run(
        checkpointer,
        thread(),
        input(),
        &options,
        &control,
        discard(),
    );
    let result = tokio::time::timeout(Duration::from_secs(30), run).await??;
    assert_eq!(
        result.values["results"],
        json!((0..48).collect::<Vec<_>>()),
        "writes in task order"
    );
    assert_eq!(
        peak.load(Ordering::SeqCst),
        24,
        "never more than max_concurrency at once"
    );
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
        Err(Error::NodeFailed { node, message, .. }) => {
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
