//! Supersteps, pending writes after a crash, concurrency and limits, retries and timeouts,
//! invalid graphs, durability.

use super::*;

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
