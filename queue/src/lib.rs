//! The run queue of mostrador and every SQL statement it runs.
//!
//! This crate owns the schema (`migrations/`, embedded as [`MIGRATOR`]) and exposes typed
//! functions over it; `api` and `worker` contain no SQL. It knows nothing about HTTP, SSE or graph
//! execution. Queries are `sqlx::query!` macros checked against the committed `.sqlx/`; a statement
//! over about thirty lines lives in `queue/queries/`, read by `sqlx::query_file!` where it runs.
//!
//! # Layout
//!
//! A module is one noun, and its `//!` says in one sentence what it owns.
//!
//! * [`db`]: connection options and pools; [`db::Connections`] keeps one connection between a
//!   claimed run's statements, a worker's claims or its publisher's writes, for half a second.
//! * [`schema`]: the migrator, the schema-version check and the runtime role's grants.
//! * [`thread`]: threads, the unit of ownership, counted per caller by triggers and held to a
//!   quota; a stateless run's is `temporary`, marked deleted by the statement that ends the run;
//!   `thread::search` (private): who sees which ([`thread::Visibility`]), search, count.
//! * [`listener`]: the one LISTEN connection per process; the api's hears runs' events, wake-ups
//!   and cancels, a worker's only wake-ups and cancels.
//! * [`run`]: a run's life, in the order it is lived. Its records and their reads, and what it is
//!   asked to do, typed as the api accepts it and both engines read it: [`run::RunSpec`] (its
//!   input, [`run::RunCommand`] and [`run::RunConfig`]).
//!   * [`run::enqueue`](mod@run::enqueue): one run in one statement that locks its thread, checks the limits,
//!     inserts, binds the thread's graph and notifies (other multitask strategies in one
//!     transaction), or a batch.
//!   * [`run::claim`](mod@run::claim): `claim`, the one statement that makes a [`ClaimedRun`] and its [`Lease`].
//!   * [`run::lease`]: worker registration, the per-process heartbeat (which disowns a run the
//!     database says the worker holds and it does not) and the sweeper of expired leases.
//!   * [`run::event`]: the durable event log of a run: append (fenced by bumping the run's
//!     `event_seq`), read, [`run::event::publish`], and
//!     [`EventFollower`](run::event::EventFollower).
//!   * [`run::ending`]: the one way out of a claim: a [`ClaimedRun`]'s `Ending`, written fenced by
//!     `end_many`, or by `write` with runs' events and described states in one statement.
//!   * [`run::cancel`](mod@run::cancel): cancelling one run, or many in one transaction.
//! * [`state`]: what runs leave of a thread.
//!   * [`state::checkpoint`]: [`PgCheckpointer`], fenced by a run's lease when it writes for a
//!     claimed run and holding its final checkpoint for its ending, and [`IdleThreadCheckpointer`].
//!   * [`state::saver`]: LangGraph's own checkpoints of Python graphs, as LangGraph serialized
//!     them, a superstep's writes and checkpoint in one fenced statement; and the states the api
//!     serves.
//!   * [`state::files`]: a thread's files, beside its checkpoints and never in them; read plainly,
//!     written fenced by the run's lease within the thread's limit, copied and deleted with the
//!     thread.
//!   * [`state::storage`]: what a thread's checkpoints occupy, per table and per channel.
//! * [`data`]: what the product keeps beside runs; the run loop reads none of it.
//!   * [`data::assistants`]: assistants callers create, every version kept, each its owner's; a
//!     run's config and context over its assistant's.
//!   * [`data::cron`]: crons on five-field schedules read on an IANA zone's clocks, each with its
//!     runs' [`RunTemplate`](data::cron::RunTemplate), and `tick`, where the advisory-lock leader
//!     enqueues the due runs and moves the crons on in one transaction.
//!   * [`data::store`]: the Store, items by owner, namespace and key; `store::similar` (private):
//!     semantic search scored in the process, its vectors kept in a
//!     [`VectorCache`](data::store::VectorCache).
//!   * [`data::api_keys`]: API keys, of which only a SHA-256 is stored, each checked by a
//!     [`Verifier`](data::api_keys::Verifier) before any query; a cron made with a key stops when
//!     it is revoked.
//!   * [`data::webhooks`]: announcements of ended runs that named a webhook, queued by a trigger on
//!     the statement that ends the run and taken by senders with `SKIP LOCKED` and a hold.
//!   * [`data::retention`]: idle threads deleted by policy in keyset batches, one per transaction,
//!     never one waiting on an interrupt; `expire`: threads whose own time to live passed.
//!   * [`data::effects`]: a tool's result by idempotency key, claimed and recorded in the tool's
//!     own transaction.
//!   * [`data::graphs`]: what workers describe of Python graphs (schemas, drawings, subgraphs) for
//!     the api.
//! * `error` (private): [`Error`], whose domain variants callers match on, and [`is_transient`].
//!
//! # Guarantees
//!
//! * A claim is one `FOR UPDATE SKIP LOCKED` statement: no run is claimed twice, and only the
//!   oldest unfinished run of a thread is ever claimable, so a thread never has two running runs.
//! * Every transition of a claimed run is conditional on `(run_id, attempt, status = running)`;
//!   when that matches nothing the caller gets [`Error::LeaseLost`] and nothing was written.
//! * NOTIFY is only a hint. The tables are the truth, and the listener tells subscribers to re-read
//!   them after any reconnect.
//! * A function that writes more than one row does it in one statement or one transaction, and a
//!   typed error means nothing was written.
//!
//! # Writing a statement
//!
//! * Every connection plans with `plan_cache_mode = force_generic_plan` and `jit = off`, so write
//!   each statement for its generic plan: primary-key lookups, `= any(array(...))` rather than
//!   joins whose size the planner cannot see, `offset 0` fences. Check the plan with
//!   `explain analyze execute ...` under `set plan_cache_mode = force_generic_plan`.
//! * A statement that finds a run or a thread by id checks its `status` or `deleted_at` on the row
//!   it read or locked, never in the scan beside the id (`queue/tests/history.rs`).
//! * The claim runs on a connection of its own ([`db::claimer`]) with `enable_sort` and
//!   `enable_seqscan` off, so it walks `runs_claim_idx` in queue order whatever the statistics say
//!   (`a_claim_reads_the_queue_in_order_whatever_the_statistics`,
//!   `a_claim_reads_no_table_whole_however_small`).
//! * A run's end changes none of its thread's indexed columns, so it is a HOT update: `threads`
//!   keeps half of each page free, the retention clock `last_activity_at` moves at most once a
//!   minute, and the time the api serves is `state_updated_at`, in no index
//!   (`a_runs_end_dates_the_state_exactly_and_writes_no_index_entry_of_its_thread`).
//! * Pools ping a connection before use only after half a second idle. A claimed run's
//!   checkpointer keeps its connection between writes and remembers the latest checkpoint it read
//!   until it writes, and a claim says whether the thread had one ([`ClaimedRun::checkpointed`]).

pub mod data;
pub mod db;
pub mod listener;
pub mod run;
pub mod schema;
pub mod state;
pub mod thread;

mod error;

pub use error::{Error, Result, is_transient};
pub use listener::Listener;
pub use run::cancel::{CancelOutcome, cancel};
pub use run::claim::{ClaimedRun, Lease, claim};
pub use run::event::{NewEvent, RunEvent};
pub use run::lease::{LiveWorker, WorkerId, WorkerLease};
pub use run::{CancelAction, MultitaskStrategy, NewRun, QueueLimit, Run, RunId, RunStatus};
pub use schema::MIGRATOR;
pub use state::checkpoint::{IdleThreadCheckpointer, PgCheckpointer};
pub use thread::{NewThread, Thread, ThreadId, ThreadStatus};

/// The database handle every function here takes; its users need no `sqlx` of their own, so the
/// compiler keeps their SQL here (the api and the worker do not depend on `sqlx`).
pub use sqlx::{PgPool, Postgres, Transaction};

/// A page of a listing: `limit` in 1..=1000, `offset` at least 0.
///
/// # Errors
///
/// [`Error::Invalid`] otherwise.
pub(crate) fn check_page(limit: i64, offset: i64) -> Result {
    if !(1..=1000).contains(&limit) || offset < 0 {
        return Err(Error::Invalid {
            field: "limit",
            reason: "limit must be between 1 and 1000 and offset at least 0".into(),
        });
    }
    Ok(())
}

/// The largest metadata of a thread or a run, as JSON text, unless configured: 64 KiB.
pub const METADATA_MAX_BYTES_DEFAULT: usize = 64 * 1024;

static METADATA_MAX_BYTES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(METADATA_MAX_BYTES_DEFAULT);

/// Sets the largest metadata of a thread or a run this process writes (the operator's setting,
/// read once at start).
pub fn set_metadata_max_bytes(bytes: usize) {
    METADATA_MAX_BYTES.store(bytes, std::sync::atomic::Ordering::Relaxed);
}

/// The largest metadata of a thread or a run, as JSON text.
pub fn metadata_max_bytes() -> usize {
    METADATA_MAX_BYTES.load(std::sync::atomic::Ordering::Relaxed)
}

/// The length of `value` as compact JSON, counted without writing it anywhere.
fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).expect("a JSON value serializes");
    count.0
}

/// Metadata is a JSON object of at most [`metadata_max_bytes`].
///
/// # Errors
///
/// [`Error::Invalid`] otherwise.
pub(crate) fn check_metadata(metadata: &serde_json::Value) -> Result {
    if !metadata.is_object() {
        return Err(Error::Invalid {
            field: "metadata",
            reason: "must be a JSON object".into(),
        });
    }
    let most = metadata_max_bytes();
    if json_len(metadata) > most {
        return Err(Error::Invalid {
            field: "metadata",
            reason: format!("must be at most {most} bytes of JSON"),
        });
    }
    Ok(())
}
