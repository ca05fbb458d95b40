//! The property test: drain-and-resume on random graphs matches an uninterrupted run.

use super::*;

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
