//! Streaming: the events a run sends, by stream mode.

use super::*;

/// Runs `graph` on a new thread, building the events of `stream_modes`, and returns what it sent.
async fn events_of<C: Checkpointer>(
    graph: &Graph,
    checkpointer: &C,
    stream_modes: StreamModes,
) -> Result<Vec<StreamEvent>, Error> {
    let (sink, mut rx) = collect();
    let options = RunOptions {
        stream_modes,
        ..RunOptions::default()
    };
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
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    Ok(events)
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
    let events = events_of(&graph, checkpointer, StreamModes::ALL).await?;
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

/// A run streamed in some modes gets the events of those modes, exactly as a run streamed in
/// every mode gets them, and no other (the engine builds no event nobody reads).
pub async fn a_run_sends_only_the_modes_it_streams<C: Checkpointer>(
    checkpointer: &C,
) -> TestResult {
    let graph = StateGraph::new()
        .channel("answer", Reducer::LastValue)
        .node("model", |ctx| async move {
            ctx.emit_message(json!({"content": "hola"}));
            ctx.emit_custom(json!({"progress": 1.0}));
            Ok(Command::new().set("answer", json!("hola")))
        })
        .node("check", |_| async { Ok(Command::new()) })
        .edge(START, "model")
        .edge("model", "check")
        .compile()?;
    // What differs from one run to another: the ids of checkpoints and tasks.
    let masked = |events: &[StreamEvent]| -> Vec<(StreamMode, Value)> {
        events
            .iter()
            .map(|e| {
                let mut data = e.data.clone();
                mask_ids(&mut data);
                (e.mode, data)
            })
            .collect()
    };
    let every = masked(&events_of(&graph, checkpointer, StreamModes::ALL).await?);
    let subsets: [&[StreamMode]; 5] = [
        &[StreamMode::Values],
        &[StreamMode::Updates, StreamMode::Custom],
        &[StreamMode::Messages],
        &[StreamMode::Debug],
        &[StreamMode::Tasks, StreamMode::Checkpoints],
    ];
    for subset in subsets {
        let modes: StreamModes = subset.iter().copied().collect();
        let expected: Vec<(StreamMode, Value)> = every
            .iter()
            .filter(|(mode, _)| modes.contains(*mode))
            .cloned()
            .collect();
        assert!(!expected.is_empty(), "{subset:?} has events to compare");
        assert_eq!(
            masked(&events_of(&graph, checkpointer, modes).await?),
            expected,
            "streamed in {subset:?}"
        );
    }
    assert_eq!(
        events_of(&graph, checkpointer, StreamModes::NONE).await?,
        Vec::new()
    );
    Ok(())
}

/// Replaces the ids of checkpoints and tasks in an event (and in a debug event's payload).
fn mask_ids(data: &mut Value) {
    if let Value::Object(map) = data {
        for key in ["checkpoint_id", "parent_checkpoint_id", "id"] {
            if let Some(id) = map.get_mut(key) {
                *id = json!("<id>");
            }
        }
        if let Some(payload) = map.get_mut("payload") {
            mask_ids(payload);
        }
    }
}
