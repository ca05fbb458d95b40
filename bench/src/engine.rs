//! The engine on the Postgres checkpointer, on the two workloads also run by
//! `bench/langgraph/bench.py` against LangGraph with `PostgresSaver`.
//!
//! Each graph run writes through a checkpointer fenced by a claimed run, as a worker's would.

use std::time::{Duration, Instant};

use mostrador_graph::stream::discard;
use mostrador_graph::{
    Command, Durability, Graph, Reducer, RunControl, RunInput, RunOptions, START, Send, StateGraph,
};
use mostrador_queue::run::{self, NewRun};
use mostrador_queue::{PgCheckpointer, WorkerLease, claim};
use serde_json::json;
use sqlx::PgPool;

use crate::{GRAPH, threads};

/// n1 → … → n6, each appending its name to `log`.
fn linear() -> Graph {
    let mut graph = StateGraph::new()
        .channel("log", Reducer::Append)
        .edge(START, "n1");
    for i in 1..=6 {
        let name = format!("n{i}");
        let label = name.clone();
        graph = graph.node(name.clone(), move |_| {
            let label = label.clone();
            async move { Ok(Command::new().set("log", json!([label]))) }
        });
        if i < 6 {
            graph = graph.edge(name, format!("n{}", i + 1));
        }
    }
    graph.compile().expect("valid graph")
}

/// START fans out 50 `Send`s to `work`, which appends its item to `results`.
fn fan_out() -> Graph {
    StateGraph::new()
        .channel("results", Reducer::Append)
        .node("work", |ctx| async move {
            let item = ctx.arg().cloned().unwrap_or_default();
            Ok(Command::new().set("results", json!([item])))
        })
        .conditional_edge(START, |_| {
            (0..50)
                .map(|i| Send::new("work", json!({"item": i})))
                .collect::<Vec<_>>()
        })
        .compile()
        .expect("valid graph")
}

/// Runs `graph` once on each of `n` new threads, sequentially, each under a claimed run.
async fn run_each(
    pool: &PgPool,
    graph: &Graph,
    n: usize,
    options: &RunOptions,
    expected: &serde_json::Value,
) -> anyhow::Result<Duration> {
    let threads = threads(pool, n).await?;
    let news: Vec<NewRun> = threads
        .iter()
        .map(|t| NewRun::new(t.thread_id, GRAPH))
        .collect();
    run::enqueue_batch(pool, &news, None).await?;
    let worker = WorkerLease::new(
        "engine-bench",
        vec![GRAPH.to_owned()],
        Duration::from_secs(600),
    );
    worker.register(pool).await?;
    let claimed = claim(pool, worker.worker_id, &worker.graphs, n as i64).await?;
    anyhow::ensure!(claimed.len() == n, "claimed {} of {n}", claimed.len());

    let start = Instant::now();
    for run in &claimed {
        let checkpointer = PgCheckpointer::fenced(pool.clone(), run);
        let input = RunInput::Values(json!({}));
        let result = graph
            .run(
                &checkpointer,
                run.thread_id.0,
                input,
                options,
                &RunControl::new(),
                discard(),
            )
            .await?;
        // The same final state that bench/langgraph/bench.py asserts for LangGraph.
        let values = serde_json::Value::Object(result.values);
        anyhow::ensure!(values == *expected, "final state {values}");
    }
    Ok(start.elapsed())
}

/// Supersteps per second of the six-node linear graph, one new thread per run.
pub async fn linear_supersteps_per_second(pool: &PgPool, runs: usize) -> anyhow::Result<f64> {
    let options = RunOptions {
        durability: Durability::Sync,
        ..RunOptions::default()
    };
    let expected = json!({"log": ["n1", "n2", "n3", "n4", "n5", "n6"]});
    let elapsed = run_each(pool, &linear(), runs, &options, &expected).await?;
    Ok((runs * 6) as f64 / elapsed.as_secs_f64())
}

/// Milliseconds per run of the 50-item fan-out with `max_concurrency = 24`.
pub async fn fan_out_ms_per_run(pool: &PgPool, runs: usize) -> anyhow::Result<Duration> {
    let options = RunOptions {
        durability: Durability::Sync,
        max_concurrency: 24,
        ..RunOptions::default()
    };
    let expected = json!({"results": (0..50).map(|i| json!({"item": i})).collect::<Vec<_>>()});
    let elapsed = run_each(pool, &fan_out(), runs, &options, &expected).await?;
    Ok(elapsed / runs as u32)
}

/// Bytes of channel values written per superstep (sum of the JSON text of the blobs each
/// checkpoint wrote) for a chat whose message list grows by one 200-byte message per superstep,
/// beside a 10 KB document that never changes. Returns the bytes of supersteps 1, 10 and 20.
pub async fn bytes_per_superstep(pool: &PgPool) -> anyhow::Result<Vec<i64>> {
    let graph = StateGraph::new()
        .channel("messages", Reducer::Messages)
        .channel("document", Reducer::LastValue)
        .node("chat", |ctx| async move {
            let n = ctx
                .get("messages")
                .and_then(|m| m.as_array())
                .map_or(0, Vec::len);
            Ok(Command::new().set(
                "messages",
                json!({"id": format!("m{n}"), "role": "ai", "content": "x".repeat(170)}),
            ))
        })
        .edge(START, "chat")
        .conditional_edge("chat", |state| {
            let n = state
                .get("messages")
                .and_then(|m| m.as_array())
                .map_or(0, Vec::len);
            vec![if n < 20 { "chat" } else { mostrador_graph::END }]
        })
        .compile()?;
    let checkpointer = PgCheckpointer::new(pool.clone());
    let thread_id = uuid::Uuid::now_v7();
    let input = RunInput::Values(json!({"document": "d".repeat(10_000)}));
    let options = RunOptions {
        recursion_limit: 30,
        ..RunOptions::default()
    };
    graph
        .run(
            &checkpointer,
            thread_id,
            input,
            &options,
            &RunControl::new(),
            discard(),
        )
        .await?;
    let per_version: Vec<i64> = sqlx::query_scalar(
        "select sum(octet_length(value::text))::int8 from mostrador.checkpoint_blobs where thread_id = $1 group by version order by version",
    )
    .bind(thread_id)
    .fetch_all(pool)
    .await?;
    // Version 1 is the input (the document); supersteps follow.
    anyhow::ensure!(
        per_version.len() == 21,
        "expected 21 versions, got {}",
        per_version.len()
    );
    Ok(vec![per_version[1], per_version[10], per_version[20]])
}
