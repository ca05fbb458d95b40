//! A Python graph through mostrador's worker path, in this process: each run is claimed, then
//! executed by [`Executor::execute_in_runner`] exactly as a worker executes it (a warm runner
//! process runs LangGraph's engine; its checkpointer's calls come back over the pipe and are
//! written fenced by the run's lease; events go to the publisher; the run ends with its
//! completion). Runs go one after another on new threads, like `bench/langgraph/bench.py` runs
//! the same graphs with LangGraph's own `PostgresSaver` in one Python process.
//!
//! The graphs are those of `bench/servers/langgraph.json` (`linear6`, `linear1`): their
//! difference is the cost of five supersteps with the per-run costs taken out.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use mostrador_graph::Durability;
use mostrador_queue::run::{self, NewRun, RunConfig};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{ClaimedRun, RunStatus, WorkerLease, claim};
use mostrador_worker::runner::{Isolation, Language, Runners};
use mostrador_worker::{AgentConfig, Executor, Finish, RunHandle, RunnerConfig, Telemetry};
use serde_json::{Value, json};
use sqlx::PgPool;

/// Where the Python graphs come from.
pub struct PythonGraphs<'a> {
    /// The interpreter of an environment with `langgraph`.
    pub python: &'a Path,
    /// A `langgraph.json` naming `linear6` and `linear1`.
    pub config: &'a Path,
}

/// Wall time per run of `graph` (n1 → … → n`steps`, appending to `path`), `runs` runs one after
/// another, each on a new thread, `durability = "sync"`.
pub async fn linear_per_run(
    pool: &PgPool,
    graphs: &PythonGraphs<'_>,
    graph: &str,
    steps: usize,
    runs: usize,
) -> anyhow::Result<Duration> {
    let config = std::fs::canonicalize(graphs.config)
        .with_context(|| format!("{}", graphs.config.display()))?;
    let runners = Runners::new(
        RunnerConfig {
            language: Language::Python,
            program: graphs.python.to_owned(),
            config,
            graphs: vec!["linear1".to_owned(), "linear6".to_owned()],
            memory_limit_mib: None,
            isolation: Isolation::Shared,
            blocked_after: None,
            fork: true,
            processes: Some(1),
            agents: AgentConfig::default(),
        },
        1,
    )?;
    // A warm runner, as a worker starts them before its first run: its start (importing
    // LangGraph and the graphs) is not part of a run.
    runners.warm().await?;

    let threads =
        thread::create_many(pool, &vec![NewThread::new(graph, "bench"); runs + 1]).await?;
    let news: Vec<NewRun> = threads
        .iter()
        .map(|t| NewRun {
            input: Some(json!({"path": []})),
            config: RunConfig {
                durability: Some(Durability::Sync),
                ..RunConfig::default()
            },
            ..NewRun::new(t.thread_id, graph)
        })
        .collect();
    run::enqueue_batch(pool, &news, None).await?;
    let worker = WorkerLease::new(
        "python-bench",
        vec![graph.to_owned()],
        Duration::from_secs(600),
    );
    worker.register(pool).await?;
    let claimed = claim(pool, worker.worker_id, &worker.graphs, (runs + 1) as i64).await?;
    anyhow::ensure!(
        claimed.len() == runs + 1,
        "claimed {} of {}",
        claimed.len(),
        runs + 1
    );

    let executor = Executor::new(pool.clone(), Arc::new(Telemetry::new()));
    // The first run warms the runner's graph and the statements' plans; it is not timed.
    let mut claimed = claimed.into_iter();
    execute_one(&executor, &runners, claimed.next().expect("a run")).await?;
    let last = claimed.as_slice().last().expect("a timed run").run_id();
    let start = Instant::now();
    for claimed in claimed {
        execute_one(&executor, &runners, claimed).await?;
    }
    let elapsed = start.elapsed();

    // The final state LangGraph streamed, as bench/langgraph/bench.py asserts it.
    let values: Value = sqlx::query_scalar(
        "select data from mostrador.run_events where run_id = $1 and event = 'values' order by seq desc limit 1",
    )
    .bind(last.0)
    .fetch_one(pool)
    .await?;
    let expected: Vec<String> = (1..=steps).map(|i| format!("n{i}")).collect();
    anyhow::ensure!(values == json!({"path": expected}), "final state {values}");
    Ok(elapsed / runs as u32)
}

async fn execute_one(
    executor: &Executor,
    runners: &Runners,
    claimed: ClaimedRun,
) -> anyhow::Result<()> {
    let finish = executor
        .execute_in_runner(claimed, runners, &RunHandle::new(), None)
        .await?;
    anyhow::ensure!(
        finish == Finish::Ended(RunStatus::Success),
        "run ended {finish:?}"
    );
    Ok(())
}
