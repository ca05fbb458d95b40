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
        let checkpointer = PgCheckpointer::fenced(pool.clone(), run.lease());
        let input = RunInput::Values(json!({}));
        graph
            .run(
                &checkpointer,
                run.thread_id.0,
                input,
                options,
                &RunControl::new(),
                discard(),
            )
            .await?;
    }
    Ok(start.elapsed())
}

/// Supersteps per second of the six-node linear graph, one new thread per run.
pub async fn linear_supersteps_per_second(pool: &PgPool, runs: usize) -> anyhow::Result<f64> {
    let options = RunOptions {
        durability: Durability::Sync,
        ..RunOptions::default()
    };
    let elapsed = run_each(pool, &linear(), runs, &options).await?;
    Ok((runs * 6) as f64 / elapsed.as_secs_f64())
}

/// Milliseconds per run of the 50-item fan-out with `max_concurrency = 24`.
pub async fn fan_out_ms_per_run(pool: &PgPool, runs: usize) -> anyhow::Result<Duration> {
    let options = RunOptions {
        durability: Durability::Sync,
        max_concurrency: 24,
        ..RunOptions::default()
    };
    let elapsed = run_each(pool, &fan_out(), runs, &options).await?;
    Ok(elapsed / runs as u32)
}
