//! Claiming runs: the one statement that makes a [`ClaimedRun`] and its [`Lease`], the fencing
//! token every later transition of the run carries. Only [`claim`] makes either; ending a run
//! ([`crate::run::ending`]) takes the claim.

use mostrador_graph::StreamMode;
use serde_json::Value;
use sqlx::PgExecutor;

use crate::run::lease::WorkerId;
use crate::run::{CancelAction, RunCommand, RunConfig, RunId, RunSpec};
use crate::thread::ThreadId;
use crate::{Error, Result};

/// The fencing token of a claimed run: a transition made under a stale attempt changes nothing.
/// Only a claim makes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    pub(crate) run_id: RunId,
    pub(crate) attempt: i32,
}

impl Lease {
    pub fn run_id(self) -> RunId {
        self.run_id
    }

    pub fn attempt(self) -> i32 {
        self.attempt
    }

    pub(crate) fn lost(self) -> Error {
        Error::LeaseLost {
            run_id: self.run_id,
            attempt: self.attempt,
        }
    }
}

/// A run this worker holds: made only by [`claim`], ended only by [`ClaimedRun::end`] or, batched
/// with others, by [`crate::run::ending::end_many`] of its [`ClaimedRun::ending`].
#[derive(Debug, PartialEq)]
pub struct ClaimedRun {
    run_id: RunId,
    attempt: i32,
    pub thread_id: ThreadId,
    pub graph_id: String,
    /// What it is asked to do; `Err`: why this release cannot read what was stored (the run fails
    /// with it).
    pub spec: std::result::Result<RunSpec, String>,
    pub metadata: Value,
    pub max_attempts: i32,
    pub drain_count: i32,
    /// Set when a cancel reached the run before this claim (e.g. while it was released by a
    /// drain): the holder should end the run that way at once.
    pub cancel_action: Option<CancelAction>,
    pub trace_id: Option<String>,
    /// The stream modes whose events are stored.
    pub stream_mode: Vec<StreamMode>,
    /// A client streams its events as they come: its first is written at once.
    pub streamed: bool,
    /// Its thread had a checkpoint when the run was claimed. One that had none has none until the
    /// run writes one: while a run of a thread is pending or running, only that run writes its
    /// checkpoints (the api changes a thread's state only when it has none in flight, checked
    /// under the lock every enqueue takes), so the run starts from nothing without reading.
    pub checkpointed: bool,
    /// Whose run it is: its thread's tenant, or its owner where there is none (a worker that
    /// isolates runner processes by tenant never hands a process to another).
    pub tenant: Option<String>,
}

/// Claims up to `n` runs of `graphs` for `worker_id`, in one statement: pending, due, the oldest
/// unfinished run of their thread, lowest `priority` first, then oldest. Each claimed run becomes
/// `running` with `attempt + 1`; the claim also renews the worker's lease.
///
/// Returns nothing when the worker is not registered (or was swept away after its lease expired).
///
/// Run it on a [`crate::db::claimer`] connection: elsewhere its plan depends on the statistics of
/// `runs`.
pub async fn claim(
    executor: impl PgExecutor<'_>,
    worker_id: WorkerId,
    graphs: &[String],
    n: i64,
) -> Result<Vec<ClaimedRun>> {
    // N.B. The candidate CTE filters exactly on `runs_claim_idx` (`status = 'pending'`) and orders
    // by its columns, so it is an index range scan that stops after `n` usable rows. A run behind
    // another unfinished run of its thread is never a candidate: two claimers therefore never
    // take two runs of one thread, and no claim can trip `runs_one_running_per_thread`. (A running
    // run was its thread's head when claimed, so its `seq` is below every pending run's of that
    // thread, and `e.seq < r.seq` covers it; the probe is one entry of `runs_thread_active_idx`.)
    // SKIP LOCKED passes over rows another claimer is taking; rows it has already taken fail the
    // `status = 'pending'` recheck.
    let claimed = sqlx::query_file_as!(Claimed, "queries/claim_runs.sql", worker_id.0, graphs, n,)
        .fetch_all(executor)
        .await?;
    Ok(claimed.into_iter().map(ClaimedRun::from).collect())
}

fn spec(input: Option<Value>, command: Option<Value>, config: Value) -> Result<RunSpec> {
    Ok(RunSpec {
        input,
        command: command.map(RunCommand::from_value).transpose()?,
        config: RunConfig::from_value(config)?,
    })
}

/// A claimed run's row.
struct Claimed {
    run_id: RunId,
    attempt: i32,
    thread_id: ThreadId,
    graph_id: String,
    input: Option<Value>,
    command: Option<Value>,
    config: Value,
    metadata: Value,
    max_attempts: i32,
    drain_count: i32,
    cancel_action: Option<CancelAction>,
    trace_id: Option<String>,
    stream_mode: Vec<String>,
    streamed: bool,
    checkpointed: bool,
    tenant: Option<String>,
}

impl From<Claimed> for ClaimedRun {
    fn from(row: Claimed) -> Self {
        // A mode this release does not know (a newer one stored it) fails the run, as its spec.
        let stream_mode: std::result::Result<Vec<StreamMode>, String> = row
            .stream_mode
            .iter()
            .map(|name| {
                StreamMode::from_name(name)
                    .ok_or_else(|| format!("stream mode {name:?} is not one this release streams"))
            })
            .collect();
        let (stream_mode, spec) = match stream_mode {
            Ok(modes) => (
                modes,
                spec(row.input, row.command, row.config).map_err(|err| err.to_string()),
            ),
            Err(why) => (Vec::new(), Err(why)),
        };
        Self {
            run_id: row.run_id,
            attempt: row.attempt,
            thread_id: row.thread_id,
            graph_id: row.graph_id,
            spec,
            metadata: row.metadata,
            max_attempts: row.max_attempts,
            drain_count: row.drain_count,
            cancel_action: row.cancel_action,
            trace_id: row.trace_id,
            stream_mode,
            streamed: row.streamed,
            checkpointed: row.checkpointed,
            tenant: row.tenant,
        }
    }
}

impl ClaimedRun {
    pub fn run_id(&self) -> RunId {
        self.run_id
    }

    /// The claim's attempt: its fencing token.
    pub fn attempt(&self) -> i32 {
        self.attempt
    }

    pub fn lease(&self) -> Lease {
        Lease {
            run_id: self.run_id,
            attempt: self.attempt,
        }
    }

    /// Attempts used up so far, this one included. Drain releases do not count.
    pub fn attempts_used(&self) -> i32 {
        self.attempt - self.drain_count
    }
}
