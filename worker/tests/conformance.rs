//! LangGraph's own checkpointer conformance suite (PyPI `langgraph-checkpoint-conformance`)
//! against the checkpointer Python graphs get: the runner's `MostradorSaver`, each of its calls
//! executed by this crate's [`checkpointer::call`] with a real run's fenced [`Saver`].
//!
//! The suite names many threads per saver, and a run's saver serves one thread: for each thread
//! the suite names, the Python side (`tests/python/conformance/conformance.py`) asks for a run,
//! and this test creates the thread with that id, enqueues a run on it, claims it and answers its
//! calls, as a worker answers a runner's. Run by `tests/python/conformance/run`, which prepares
//! the Python environment.

use std::process::Stdio;
use std::time::Duration;

use mostrador_queue::run::{self, NewRun};
use mostrador_queue::state::saver::{Saver, Write};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{ThreadId, WorkerLease, claim};
use mostrador_worker::runner::checkpointer;
use mostrador_worker::runner::protocol::{FromRunner, ToRunner};
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use uuid::Uuid;

use crate::support::GRAPH;

/// The capabilities a run's saver does not offer, and why (docs/python-graphs.md says the same).
const NOT_OFFERED: &[(&str, &str)] = &[
    (
        "delete_thread",
        "a run's saver cannot delete a thread: DELETE /threads/{id} does, under the caller's authorization",
    ),
    (
        "delete_for_runs",
        "a run's checkpoints are kept with its thread: they go with the thread or its time to live",
    ),
    (
        "copy_thread",
        "POST /threads/{id}/copy copies a thread, under the caller's authorization",
    ),
    (
        "prune",
        "a thread's time to live with `keep_latest` prunes it (retention), not a run",
    ),
];

/// A run of its own on each thread the suite names, and the writes it cast not yet written.
struct Runs {
    pool: PgPool,
    worker: WorkerLease,
    savers: Vec<(Saver, Vec<Write>)>,
}

impl Runs {
    /// The thread `thread_id`, a run on it claimed: its number.
    async fn open(&mut self, thread_id: &str) -> anyhow::Result<u64> {
        let thread_id: Uuid = thread_id.parse()?;
        let created =
            thread::create_with_id(&self.pool, thread_id, &NewThread::new(GRAPH, "conformance"))
                .await?;
        anyhow::ensure!(created.is_some(), "thread {thread_id} exists already");
        run::enqueue(&self.pool, &NewRun::new(ThreadId(thread_id), GRAPH), None).await?;
        let claimed = claim(&self.pool, self.worker.worker_id, &self.worker.graphs, 1)
            .await?
            .pop()
            .ok_or_else(|| anyhow::anyhow!("the run on {thread_id} was not claimed"))?;
        self.savers
            .push((Saver::fenced(self.pool.clone(), &claimed), Vec::new()));
        Ok(u64::try_from(self.savers.len() - 1)?)
    }

    fn saver(&mut self, run: u64) -> anyhow::Result<&mut (Saver, Vec<Write>)> {
        let index = usize::try_from(run)?;
        self.savers
            .get_mut(index)
            .ok_or_else(|| anyhow::anyhow!("no run {run}"))
    }

    /// The answer to one message of the Python side; `None` for what needs none.
    async fn answer(&mut self, message: Value) -> anyhow::Result<Option<ToRunner>> {
        if message["t"] == "open" {
            let id = message["id"].as_u64().unwrap_or_default();
            let run = self
                .open(message["thread"].as_str().unwrap_or_default())
                .await?;
            return Ok(Some(ToRunner::Reply {
                id,
                result: json!(run),
                error: None,
            }));
        }
        match serde_json::from_value::<FromRunner>(message)? {
            FromRunner::Call { run, id, call } => {
                let (saver, held) = self.saver(run)?;
                let held = std::mem::take(held);
                Ok(Some(checkpointer::call(saver, held, id, call).await?))
            }
            FromRunner::Cast { run, cast } => {
                let (_, held) = self.saver(run)?;
                held.extend(checkpointer::write_of(cast)?);
                Ok(None)
            }
            other => anyhow::bail!("not the checkpointer's: {other:?}"),
        }
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
#[ignore = "needs Python with langgraph-checkpoint-conformance: tests/python/conformance/run"]
async fn langgraphs_checkpointer_conformance_suite_passes_against_a_runs_saver(
    pool: PgPool,
) -> anyhow::Result<()> {
    let python = std::env::var("MOSTRADOR_CONFORMANCE_PYTHON")
        .map_err(|_| anyhow::anyhow!("MOSTRADOR_CONFORMANCE_PYTHON: the suite's Python"))?;
    let manifest = env!("CARGO_MANIFEST_DIR");
    let mut child = Command::new(python)
        .arg(format!(
            "{manifest}/../tests/python/conformance/conformance.py"
        ))
        .env("PYTHONPATH", format!("{manifest}/python"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut to_python = child.stdin.take().expect("stdin");
    let mut from_python = BufReader::new(child.stdout.take().expect("stdout")).lines();

    let worker = WorkerLease::new(
        "conformance",
        vec![GRAPH.to_owned()],
        Duration::from_secs(600),
    );
    worker.register(&pool).await?;
    let mut runs = Runs {
        pool,
        worker,
        savers: Vec::new(),
    };
    let report = loop {
        let line = from_python
            .next_line()
            .await?
            .ok_or_else(|| anyhow::anyhow!("the suite ended without its report"))?;
        let message: Value = serde_json::from_str(&line)?;
        if message["t"] == "report" {
            break message["report"].clone();
        }
        if let Some(reply) = runs.answer(message).await? {
            let mut line = serde_json::to_vec(&reply)?;
            line.push(b'\n');
            to_python.write_all(&line).await?;
        }
    };
    drop(to_python);
    child.wait().await?;

    let results = report["results"]
        .as_object()
        .ok_or_else(|| anyhow::anyhow!("no results: {report}"))?;
    let mut passed = 0;
    for (capability, result) in results {
        let offered = result["detected"] == true;
        let not_offered = NOT_OFFERED.iter().any(|(name, _)| name == capability);
        anyhow::ensure!(
            offered != not_offered,
            "{capability}: offered {offered}, but listed as not offered {not_offered}"
        );
        let failures = result["failures"].as_array().map_or(0, Vec::len);
        anyhow::ensure!(failures == 0, "{capability}: {}", result["failures"]);
        passed += result["tests_passed"].as_u64().unwrap_or_default();
    }
    println!("conformance: {passed} passed, none failed");
    anyhow::ensure!(passed > 0, "nothing passed: {report}");
    Ok(())
}

/// A Python run's checkpointer call the database fails under (here, unreachable: as a restart,
/// a failover or a full disk) is not answered to the runner as the graph's error: it is the
/// worker's, which postpones the run without using an attempt.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_call_the_database_fails_under_is_the_workers_to_wait_for(pool: PgPool) {
    use mostrador_worker::runner::protocol::Call;

    crate::support::enqueue(&pool, None, |new| new).await;
    let claimed = crate::support::claim_next(&pool).await;
    let get = || Call::Get {
        ns: String::new(),
        checkpoint_id: None,
    };
    let saver = Saver::fenced(pool.clone(), &claimed);
    let answered = checkpointer::call(&saver, Vec::new(), 1, get())
        .await
        .expect("answered");
    assert!(matches!(answered, ToRunner::Reply { error: None, .. }));
    // The same run's saver, over a database that does not answer.
    let unreachable = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(500))
        .connect_lazy_with((*pool.connect_options()).clone().port(1));
    let saver = Saver::fenced(unreachable, &claimed);
    let store = Call::Store {
        ops: vec![mostrador_worker::runner::protocol::StoreOp::Get {
            namespace: vec!["memories".into()],
            key: "k".into(),
            refresh_ttl: true,
        }],
    };
    let failed = checkpointer::call(&saver, Vec::new(), 2, store).await;
    assert!(
        matches!(&failed, Err(err) if err.is_transient()),
        "the worker's to handle: {failed:?}"
    );
}
