//! Interrupts and resume.

use super::*;

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

/// `task_id` is an idempotency key: the same when a task runs again (its resume), different on
/// another thread, on a copy of the thread, and in another superstep.
pub async fn task_id_is_stable_across_reruns_and_unique_elsewhere<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let graph = {
        let (ask, after) = (Arc::clone(&seen), Arc::clone(&seen));
        StateGraph::new()
            .channel("decisions", Reducer::Append)
            .node("ask", move |ctx| {
                let seen = Arc::clone(&ask);
                async move {
                    seen.lock().expect("lock").push(ctx.task_id().to_owned());
                    let decision = ctx.interrupt(json!("?"))?;
                    Ok(Command::new().set("decisions", json!([decision])))
                }
            })
            .node("after", move |ctx| {
                let seen = Arc::clone(&after);
                async move {
                    seen.lock().expect("lock").push(ctx.task_id().to_owned());
                    Ok(Command::new())
                }
            })
            .edge(START, "ask")
            .edge("ask", "after")
            .compile()?
    };
    let (a, b, copy) = (thread(), thread(), thread());
    let yes = || RunInput::Resume(Resume::Value(json!("yes")));
    run(&graph, checkpointer, a, input()).await;
    checkpointer.copy_thread(a, copy).await?;
    run(&graph, checkpointer, a, yes()).await;
    run(&graph, checkpointer, b, input()).await;
    run(&graph, checkpointer, copy, yes()).await;
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(
        seen.len(),
        6,
        "ask, ask again, after, ask on b, ask and after on the copy: {seen:?}"
    );
    assert_eq!(seen[0], seen[1], "the resumed task keeps its id");
    assert_ne!(seen[1], seen[2], "the next superstep's task has another id");
    assert_ne!(
        seen[0], seen[3],
        "the same task on another thread has another id"
    );
    assert_ne!(
        seen[4], seen[1],
        "the same task on a copy of the thread has another id: its effects are its own"
    );
    assert_ne!(seen[5], seen[2]);
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

/// A run that records its resume and then dies before saving any progress is tried again: the
/// second attempt must not record the same resume twice (a node with two interrupts would get it
/// for both). And a run drained before it began records nothing at all.
pub async fn a_run_retried_after_recording_its_resume_counts_it_once<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let starts = Starts::default();
    let graph = approval_graph(&starts, 2);
    let thread_id = thread();
    run(&graph, checkpointer, thread_id, input()).await;

    let options = RunOptions {
        config: json!({"run_id": "resume-run"}),
        ..RunOptions::default()
    };
    let resume = || RunInput::Resume(Resume::Value(json!("first")));
    let drained = RunControl::new();
    drained.request_drain("sigterm");
    let result = graph
        .run(
            checkpointer,
            thread_id,
            resume(),
            &options,
            &drained,
            discard(),
        )
        .await?;
    assert_eq!(result.outcome, Outcome::Drained("sigterm".into()));
    assert_eq!(
        starts.of("approve"),
        1,
        "a run drained before it began runs nothing"
    );

    // The same run records its resume, then (as if it crashed) records it again on its retry.
    for _ in 0..2 {
        let result = graph
            .run(
                checkpointer,
                thread_id,
                resume(),
                &options,
                &RunControl::new(),
                discard(),
            )
            .await?;
        let Outcome::Interrupted(interrupts) = result.outcome else {
            panic!("the second interrupt waits")
        };
        assert_eq!(
            interrupts[0].value,
            json!({"question": 1}),
            "the one resume answered only the first"
        );
    }
    let done = graph
        .run(
            checkpointer,
            thread_id,
            RunInput::Resume(Resume::Value(json!("second"))),
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await?;
    assert_eq!(done.values["decisions"], json!(["first", "second"]));
    Ok(())
}

/// `interrupt_before` stops before a superstep with a task of its nodes, `interrupt_after` after
/// one, each with no interrupt to answer; a run without input goes on from there and does not
/// stop again where the last one stopped.
pub async fn breakpoints_stop_before_and_after_their_nodes<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let graph = three_steps();
    let run_with = |thread_id, input, options: RunOptions| {
        let graph = &graph;
        async move {
            let (sink, mut events) = collect();
            let result = graph
                .run(
                    checkpointer,
                    thread_id,
                    input,
                    &options,
                    &RunControl::new(),
                    sink,
                )
                .await
                .unwrap();
            let mut updates = Vec::new();
            while let Ok(event) = events.try_recv() {
                if event.mode == StreamMode::Updates {
                    updates.push(event.data);
                }
            }
            (result, updates)
        }
    };
    let before = |nodes: &[&str]| RunOptions {
        interrupt_before: crate::Breakpoints::Nodes(
            nodes.iter().map(|n| (*n).to_owned()).collect(),
        ),
        ..RunOptions::default()
    };

    let thread_id = thread();
    let (stopped, updates) = run_with(thread_id, input(), before(&["b"])).await;
    assert_eq!(stopped.outcome, Outcome::Interrupted(Vec::new()));
    assert_eq!(stopped.values["log"], json!(["a"]));
    assert_eq!(updates.last(), Some(&json!({"__interrupt__": []})));
    let state = graph.get_state(checkpointer, thread_id, None).await?;
    assert_eq!(state.next, vec!["b"]);
    assert_eq!(state.interrupts().count(), 0, "nothing to answer");
    let (went_on, _) = run_with(thread_id, RunInput::Continue, before(&["b"])).await;
    assert_eq!(went_on.outcome, Outcome::Finished, "not stopped twice at b");
    assert_eq!(went_on.values["log"], json!(["a", "b", "c"]));

    let thread_id = thread();
    let after = RunOptions {
        interrupt_after: crate::Breakpoints::Nodes(vec!["a".into()]),
        ..RunOptions::default()
    };
    let (stopped, _) = run_with(thread_id, input(), after.clone()).await;
    assert_eq!(stopped.outcome, Outcome::Interrupted(Vec::new()));
    assert_eq!(
        stopped.values["log"],
        json!(["a"]),
        "a's checkpoint is saved"
    );
    let state = graph.get_state(checkpointer, thread_id, None).await?;
    assert_eq!(state.next, vec!["b"]);
    let (went_on, _) = run_with(thread_id, RunInput::Continue, after).await;
    assert_eq!(went_on.outcome, Outcome::Finished);
    assert_eq!(went_on.values["log"], json!(["a", "b", "c"]));

    // `*`: before every superstep but the first of a run that goes on.
    let thread_id = thread();
    let all = RunOptions {
        interrupt_before: crate::Breakpoints::All,
        ..RunOptions::default()
    };
    let (stopped, _) = run_with(thread_id, input(), all.clone()).await;
    assert_eq!(stopped.supersteps, 0);
    let (stopped, _) = run_with(thread_id, RunInput::Continue, all).await;
    assert_eq!(stopped.outcome, Outcome::Interrupted(Vec::new()));
    assert_eq!(
        stopped.values["log"],
        json!(["a"]),
        "one superstep, then b's breakpoint"
    );
    Ok(())
}

/// A command writes its `update` through the reducers and adds its `goto` tasks to those pending.
pub async fn a_command_updates_the_state_and_adds_its_goto_tasks<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let graph = three_steps();
    let thread_id = thread();
    let finished = run(&graph, checkpointer, thread_id, input()).await;
    assert_eq!(finished.values["log"], json!(["a", "b", "c"]));
    let command = RunInput::Command {
        update: vec![("log".into(), json!("x")), ("last".into(), json!("x"))],
        goto: vec![crate::Goto::Node("c".into())],
    };
    let commanded = run(&graph, checkpointer, thread_id, command).await;
    assert_eq!(commanded.outcome, Outcome::Finished);
    assert_eq!(commanded.values["log"], json!(["a", "b", "c", "x", "c"]));
    assert_eq!(commanded.values["last"], json!("x"));

    let unknown = graph
        .run(
            checkpointer,
            thread_id,
            RunInput::Command {
                update: Vec::new(),
                goto: vec![crate::Goto::Node("nowhere".into())],
            },
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await;
    assert!(matches!(unknown, Err(Error::UnknownNode(_))), "{unknown:?}");
    Ok(())
}

/// A compiled graph used as a node runs in a namespace of the thread: its checkpoints are its
/// own, its events carry its namespace, its interrupt is the thread's and a resume of the thread
/// answers it; the channels it shares with its parent are its writes.
pub async fn a_subgraph_runs_as_a_node_with_its_own_checkpoints_and_interrupts<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let starts = Starts::default();
    let counted = starts.clone();
    let inner = StateGraph::new()
        .channel("topic", Reducer::LastValue)
        .channel("answer", Reducer::LastValue)
        .channel("steps", Reducer::Append)
        .node("ask", move |ctx| {
            let starts = counted.clone();
            async move {
                starts.record("ask");
                let topic = ctx.get("topic").cloned().unwrap_or(Value::Null);
                let decision = ctx.interrupt(json!({"approve": topic}))?;
                Ok(Command::new()
                    .set(
                        "answer",
                        json!(format!(
                            "{} about {}",
                            decision.as_str().unwrap_or(""),
                            topic.as_str().unwrap_or("")
                        )),
                    )
                    .set("steps", json!("ask")))
            }
        })
        .node("note", |_| async {
            Ok(Command::new().set("steps", json!("note")))
        })
        .edge(START, "ask")
        .edge("ask", "note")
        .compile()?;
    let outer = StateGraph::new()
        .channel("topic", Reducer::LastValue)
        .channel("answer", Reducer::LastValue)
        .channel("log", Reducer::Append)
        .node("before", |_| async {
            Ok(Command::new()
                .set("log", json!("before"))
                .set("topic", json!("tea")))
        })
        .subgraph("sub", inner.clone())
        .node("after", |_| async {
            Ok(Command::new().set("log", json!("after")))
        })
        .edge(START, "before")
        .edge("before", "sub")
        .edge("sub", "after")
        .compile()?;
    assert_eq!(
        outer.subgraphs().map(|(name, _)| name).collect::<Vec<_>>(),
        ["sub"]
    );
    let thread_id = thread();
    let (sink, mut events) = collect();
    let first = outer
        .run(
            checkpointer,
            thread_id,
            input(),
            &RunOptions::default(),
            &RunControl::new(),
            sink,
        )
        .await?;
    let Outcome::Interrupted(interrupts) = first.outcome else {
        panic!(
            "the subgraph's interrupt is the thread's: {:?}",
            first.outcome
        )
    };
    assert_eq!(interrupts[0].value, json!({"approve": "tea"}));
    let state = outer.get_state(checkpointer, thread_id, None).await?;
    assert_eq!(state.next, vec!["sub"]);
    assert_eq!(state.interrupts().count(), 1);

    let namespace =
        crate::run::task_namespace("sub", state.checkpoint_id.expect("a checkpoint"), "0:sub");
    assert!(namespace.starts_with("sub:"), "{namespace}");
    let inner_state = inner
        .get_state(&checkpointer.scoped(&namespace), thread_id, None)
        .await?;
    assert_eq!(
        inner_state.next,
        vec!["ask"],
        "the subgraph's own checkpoint"
    );
    assert_eq!(inner_state.values["topic"], json!("tea"));
    let mut namespaced = Vec::new();
    while let Ok(event) = events.try_recv() {
        if !event.namespace.is_empty() {
            namespaced.push(event);
        }
    }
    assert!(
        namespaced
            .iter()
            .all(|event| event.namespace == vec![namespace.clone()]),
        "{namespaced:?}"
    );
    assert!(
        namespaced
            .iter()
            .any(|event| event.mode == StreamMode::Values)
    );

    let resumed = run(
        &outer,
        checkpointer,
        thread_id,
        RunInput::Resume(Resume::Value(json!("yes"))),
    )
    .await;
    assert_eq!(resumed.outcome, Outcome::Finished);
    assert_eq!(resumed.values["answer"], json!("yes about tea"));
    assert_eq!(resumed.values["log"], json!(["before", "after"]));
    assert!(
        resumed.values.get("steps").is_none(),
        "the subgraph's own channel stays its own"
    );
    assert_eq!(
        starts.of("ask"),
        2,
        "the interrupted node ran again from its start"
    );
    let inner_state = inner
        .get_state(&checkpointer.scoped(&namespace), thread_id, None)
        .await?;
    assert_eq!(inner_state.values["steps"], json!(["ask", "note"]));
    assert!(inner_state.next.is_empty());
    Ok(())
}
