//! `mostrador enqueue` and `mostrador batch`: runs submitted by an external scheduler (a
//! Kubernetes CronJob, cron, Airflow). Each run gets a new thread of the graph, owned by the
//! scheduler's name; the command waits for them (a progress line on stderr), prints a summary,
//! and fails when any run failed, so the scheduler sees it.

use std::io::{BufRead, IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use mostrador_model::{Model, Offline};
use mostrador_queue::db::DbConfig;
use mostrador_queue::run::{self, NewRun, RunConfig};
use mostrador_queue::schema;
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{RunId, RunStatus};
use serde_json::Value;
use sqlx::PgPool;

use crate::duration::parse_duration;
use crate::{App, DatabaseArgs};

/// What to submit and how to wait.
#[derive(Debug, Clone)]
pub struct Submit {
    pub graph: String,
    /// One run's input each.
    pub inputs: Vec<Value>,
    /// The runs' `config` (`max_concurrency`, `configurable`, ...).
    pub config: RunConfig,
    /// The threads' owner.
    pub owner: String,
    /// Give up waiting after this long (the runs go on).
    pub wait: Option<Duration>,
}

/// Inputs as JSON lines (blank lines skipped).
///
/// # Errors
///
/// A line that is not a JSON object, named by its number.
pub fn json_lines(reader: impl BufRead) -> anyhow::Result<Vec<Value>> {
    let mut inputs = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.context("failed to read the inputs")?;
        if line.trim().is_empty() {
            continue;
        }
        let input: Value =
            serde_json::from_str(&line).with_context(|| format!("line {} is not JSON", n + 1))?;
        anyhow::ensure!(input.is_object(), "line {} is not a JSON object", n + 1);
        inputs.push(input);
    }
    Ok(inputs)
}

/// Submits the runs (all or none), waits for them unless `wait` is zero, and reports. `Ok(false)`
/// when a run failed or the wait ran out.
///
/// # Errors
///
/// The runs could not be submitted (nothing was), or the database failed while waiting.
pub async fn submit(pool: &PgPool, submit: &Submit) -> anyhow::Result<bool> {
    anyhow::ensure!(!submit.inputs.is_empty(), "no inputs: nothing to run");
    let mut tx = pool.begin().await?;
    let threads = thread::create_many(
        &mut *tx,
        &vec![NewThread::new(&submit.graph, &submit.owner); submit.inputs.len()],
    )
    .await?;
    let news: Vec<NewRun> = threads
        .iter()
        .zip(&submit.inputs)
        .map(|(thread, input)| NewRun {
            input: Some(input.clone()),
            config: submit.config.clone(),
            ..NewRun::new(thread.thread_id, &submit.graph)
        })
        .collect();
    let run_ids = run::enqueue_batch(&mut tx, &news, None).await?;
    tx.commit().await?;
    eprintln!(
        "submitted {} runs of {} (threads owned by {})",
        run_ids.len(),
        submit.graph,
        submit.owner
    );
    if submit.wait == Some(Duration::ZERO) {
        for run_id in &run_ids {
            println!("{run_id}");
        }
        return Ok(true);
    }
    wait(pool, &run_ids, submit.wait).await
}

async fn wait(pool: &PgPool, run_ids: &[RunId], within: Option<Duration>) -> anyhow::Result<bool> {
    let started = Instant::now();
    let terminal = std::io::stderr().is_terminal();
    let mut last_line = Instant::now();
    loop {
        let statuses = run::statuses(pool, run_ids).await?;
        let count = |status: RunStatus| statuses.iter().filter(|(_, s, _)| *s == status).count();
        let ended = statuses
            .iter()
            .filter(|(_, status, _)| !matches!(status, RunStatus::Pending | RunStatus::Running))
            .count();
        let total = run_ids.len();
        let progress = format!(
            "{} {ended}/{total} ended (success {}, error {}, timeout {}, interrupted {})",
            bar(ended, total),
            count(RunStatus::Success),
            count(RunStatus::Error),
            count(RunStatus::Timeout),
            count(RunStatus::Interrupted),
        );
        let done = ended == total;
        let out_of_time = within.is_some_and(|within| started.elapsed() >= within);
        if terminal {
            eprint!("\r{progress}");
            let _ = std::io::stderr().flush();
        } else if done || out_of_time || last_line.elapsed() >= Duration::from_secs(10) {
            eprintln!("{progress}");
            last_line = Instant::now();
        }
        if done || out_of_time {
            if terminal {
                eprintln!();
            }
            let failed: Vec<_> = statuses
                .iter()
                .filter(|(_, status, _)| matches!(status, RunStatus::Error | RunStatus::Timeout))
                .collect();
            for (run_id, status, error) in &failed {
                let message = error
                    .as_ref()
                    .and_then(|e| e["message"].as_str())
                    .unwrap_or("");
                println!("run {run_id} {}: {message}", status.as_str());
            }
            println!(
                "{total} runs: {} success, {} failed, {} interrupted (waiting for a decision), {} unfinished, in {:.1} s",
                count(RunStatus::Success),
                failed.len(),
                count(RunStatus::Interrupted),
                total - ended,
                started.elapsed().as_secs_f64()
            );
            return Ok(failed.is_empty() && done);
        }
        // A scheduler's command line: a second of lag in a progress line is nothing.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn bar(done: usize, total: usize) -> String {
    const WIDTH: usize = 30;
    let filled = (done * WIDTH).checked_div(total).unwrap_or(WIDTH);
    format!("[{}{}]", "#".repeat(filled), " ".repeat(WIDTH - filled))
}

/// How runs are submitted by a scheduler.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    database: DatabaseArgs,

    /// The graph (assistant) to run.
    #[arg(long)]
    graph: String,

    /// The runs' config, JSON (e.g. '{"max_concurrency": 24}').
    #[arg(long, default_value = "{}")]
    config: String,

    /// A `langgraph.json` whose (Python) graphs may be named too.
    #[arg(long, env = "MOSTRADOR_LANGGRAPH_CONFIG")]
    langgraph_config: Option<std::path::PathBuf>,

    /// The owner of the runs' threads.
    #[arg(long, env = "MOSTRADOR_SCHEDULER_OWNER", default_value = "scheduler")]
    owner: String,

    /// Stop waiting after this long (0s: do not wait; print the run ids) [default: until they
    /// end].
    #[arg(long, value_parser = parse_duration)]
    wait: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct EnqueueArgs {
    #[command(flatten)]
    submit: SubmitArgs,

    /// The run's input, JSON.
    #[arg(long, default_value = "{}")]
    input: String,
}

#[derive(Debug, Args)]
pub struct BatchArgs {
    #[command(flatten)]
    submit: SubmitArgs,

    /// JSON lines, one run's input each ('-': standard input).
    #[arg(long)]
    inputs: std::path::PathBuf,
}

/// `mostrador enqueue`.
pub async fn enqueue(args: EnqueueArgs, graphs: App) -> anyhow::Result<()> {
    let input = serde_json::from_str(&args.input).context("--input is not JSON")?;
    submit_args(args.submit, vec![input], graphs).await
}

/// `mostrador batch`.
pub async fn batch(args: BatchArgs, graphs: App) -> anyhow::Result<()> {
    let inputs = if args.inputs.as_os_str() == "-" {
        json_lines(std::io::stdin().lock())?
    } else {
        let file = std::fs::File::open(&args.inputs)
            .with_context(|| format!("failed to open {}", args.inputs.display()))?;
        json_lines(std::io::BufReader::new(file))?
    };
    submit_args(args.submit, inputs, graphs).await
}

async fn submit_args(args: SubmitArgs, inputs: Vec<Value>, graphs: App) -> anyhow::Result<()> {
    let config: Value = serde_json::from_str(&args.config).context("--config is not JSON")?;
    let config = RunConfig::from_value(config).context("--config")?;
    let db = DbConfig {
        pool_size: 2,
        ..DbConfig::new(&args.database.database_url, "mostrador-submit")
    };
    let pool = db.connect_lazy().context("invalid database url")?;
    let mut known: Vec<String> = (graphs.build)(&pool, &Model::Offline(Offline::default()))
        .into_keys()
        .collect();
    if let Some(path) = &args.langgraph_config {
        known.extend(crate::langgraph::read_project(path)?.graphs.into_keys());
    }
    known.sort_unstable();
    anyhow::ensure!(
        known.contains(&args.graph),
        "no graph {:?} in this binary or its langgraph.json (they serve: {})",
        args.graph,
        known.join(", ")
    );
    schema::check_schema(&pool, graphs.migrations)
        .await
        .context("failed to check the database schema")?;
    let request = Submit {
        graph: args.graph,
        inputs,
        config,
        owner: args.owner,
        wait: args.wait,
    };
    let all_succeeded = submit(&pool, &request).await?;
    pool.close().await;
    anyhow::ensure!(all_succeeded, "not every run succeeded");
    Ok(())
}
