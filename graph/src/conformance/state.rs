//! A thread's state: empty, at a checkpoint, its history, updates, prune and copy.

use super::*;

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

pub async fn a_branch_from_a_past_checkpoint_keeps_its_own_values_and_becomes_the_latest<
    C: Checkpointer,
>(
    checkpointer: &C,
) -> TestResult {
    let graph = three_steps();
    let thread_id = thread();
    run(&graph, checkpointer, thread_id, input()).await;
    let history = graph.get_history(checkpointer, thread_id, 10, None).await?;
    let after_a = history[2].checkpoint_id.expect("the checkpoint after a");
    assert_eq!(history[2].next, vec!["b"]);

    // Edited: input on the past checkpoint, then the graph from START again.
    let edit = RunInput::From {
        checkpoint_id: after_a,
        input: Some(json!({"log": "x"})),
    };
    let edited = run(&graph, checkpointer, thread_id, edit).await;
    assert_eq!(edited.outcome, Outcome::Finished);
    let latest = graph.get_state(checkpointer, thread_id, None).await?;
    assert_eq!(
        latest.values["log"],
        json!(["a", "x", "a", "b", "c"]),
        "read back: the branch's values, not the first branch's at the same versions"
    );
    assert_eq!(latest.checkpoint_id, edited.checkpoint_id);

    // Regenerated: no input, the past checkpoint's tasks run again.
    let again = RunInput::From {
        checkpoint_id: after_a,
        input: None,
    };
    let regenerated = run(&graph, checkpointer, thread_id, again).await;
    assert_eq!(regenerated.supersteps, 2, "b and c");
    let latest = graph.get_state(checkpointer, thread_id, None).await?;
    assert_eq!(latest.values["log"], json!(["a", "b", "c"]));
    assert_eq!(latest.checkpoint_id, regenerated.checkpoint_id);
    let history = graph
        .get_history(checkpointer, thread_id, 100, None)
        .await?;
    assert_eq!(
        history.len(),
        4 + 4 + 3,
        "every branch stays in the history"
    );

    let missing = graph
        .run(
            checkpointer,
            thread_id,
            RunInput::From {
                checkpoint_id: Uuid::now_v7(),
                input: None,
            },
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await;
    assert!(
        matches!(missing, Err(Error::InvalidInput(_))),
        "{missing:?}"
    );
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
            None,
        )
        .await?;
    let state = graph.get_state(checkpointer, thread_id, None).await?;
    assert_eq!(state.next, vec!["b"], "as if a had run");
    let result = run(&graph, checkpointer, thread_id, RunInput::Continue).await;
    assert_eq!(result.values["log"], json!(["manual", "b", "c"]));
    let res = graph
        .update_state(checkpointer, thread_id, json!({"nope": 1}), None, None)
        .await;
    assert!(matches!(res, Err(Error::InvalidUpdate { .. })));
    let res = graph
        .update_state(checkpointer, thread_id, json!({"log": 1}), Some("zz"), None)
        .await;
    assert!(matches!(res, Err(Error::UnknownNode(_))));
    Ok(())
}

/// An update at a past checkpoint starts a branch there that becomes the thread's latest, with
/// that checkpoint's values and tasks: the edit is kept, the other branch's later values are not.
pub async fn update_state_at_a_past_checkpoint_branches_there<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let graph = three_steps();
    let thread_id = thread();
    run(&graph, checkpointer, thread_id, input()).await;
    let history = graph.get_history(checkpointer, thread_id, 10, None).await?;
    let before_b = history
        .iter()
        .find(|s| s.next == vec!["b"])
        .and_then(|s| s.checkpoint_id)
        .expect("the checkpoint before b");
    let edited = graph
        .update_state(
            checkpointer,
            thread_id,
            json!({"last": "edited"}),
            None,
            Some(before_b),
        )
        .await?;
    let state = graph.get_state(checkpointer, thread_id, None).await?;
    assert_eq!(
        state.checkpoint_id,
        Some(edited),
        "the branch is the thread's latest"
    );
    assert_eq!(state.next, vec!["b"]);
    assert_eq!(
        state.values["log"],
        json!(["a"]),
        "that checkpoint's values"
    );
    assert_eq!(state.values["last"], json!("edited"));
    let result = run(&graph, checkpointer, thread_id, RunInput::Continue).await;
    assert_eq!(result.values["log"], json!(["a", "b", "c"]));
    assert_eq!(result.values["last"], json!("edited"));
    let missing = graph
        .update_state(
            checkpointer,
            thread_id,
            json!({}),
            None,
            Some(Uuid::now_v7()),
        )
        .await;
    assert!(
        matches!(missing, Err(Error::CheckpointNotFound)),
        "{missing:?}"
    );
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
