//! The run queue of mostrador and every SQL statement it runs.
//!
//! This crate owns the schema (`migrations/`, embedded as [`MIGRATOR`]) and exposes typed
//! functions over it; `api` and `worker` contain no SQL. It knows nothing about HTTP, SSE or graph
//! execution.
//!
//! # Layout
//!
//! * [`db`]: connection options and the pool.
//! * [`schema`]: the migrator, the schema-version check and the runtime role's grants.
//! * [`thread`]: threads, the unit of ownership and authorization.
//! * [`run`]: run records and their reads (re-exporting [`enqueue`]'s).
//! * [`enqueue`]: enqueueing runs one at a time (under the thread's lock: its multitask strategy,
//!   the graph's queue limit, the caller's share and fair order) or in batches.
//! * [`cancel`](mod@cancel): cancelling a pending or running run, or many at once.
//! * [`claim`](mod@claim): `claim`, the one statement that makes a [`ClaimedRun`] and its [`Lease`].
//! * [`ending`]: the one way out of a claim: a [`ClaimedRun`]'s `Ending` (success, pause, cancel,
//!   timeout, failure, release, rollback), written fenced by `end_many`, or by the publisher's
//!   `write` with events and described states in one statement.
//! * [`lease`]: worker registration, the per-process heartbeat and the sweeper of expired leases.
//! * [`cron`]: crons, and the scheduler's tick that enqueues their due runs.
//! * [`effects`]: effects outside the state (a refund), recorded once per idempotency key.
//! * [`retention`]: deleting what each graph's retention policy no longer keeps.
//! * [`checkpoint`]: the Postgres checkpointer of the graph engine, fenced by a run's lease, and
//!   the one for changes outside any run (`IdleThreadCheckpointer`).
//! * [`saver`]: LangGraph's own checkpoints of Python graphs, stored as it serialized them and
//!   fenced the same way.
//! * [`graphs`]: what workers describe of Python graphs (schemas, drawings) for the api.
//! * [`event`]: the durable event log of a run and its notifications.
//! * [`files`]: a thread's files (deep agents' file tools and sandbox), beside its checkpoints.
//! * [`listener`]: the one LISTEN connection per process, fanned out to in-process subscribers.
//! * [`api_keys`]: API keys, stored hashed, each standing for a caller as a token does.
//! * [`assistants`]: assistants callers create, configured instances of a graph, versioned.
//! * [`store`]: the Store, long-term memory by namespace and key, each item a caller's own.
//! * [`webhooks`]: the announcements of ended runs that named a webhook, queued as they end and
//!   taken by senders.
//!
//! # Guarantees
//!
//! * A claim is one `FOR UPDATE SKIP LOCKED` statement: no run is claimed twice, and only the
//!   oldest unfinished run of a thread is ever claimable, so a thread never has two running runs.
//! * Every transition of a claimed run is conditional on `(run_id, attempt, status = running)`;
//!   when that matches nothing the caller gets [`Error::LeaseLost`] and nothing was written.
//! * NOTIFY is only a hint. The tables are the truth, and the listener tells subscribers to re-read
//!   them after any reconnect.

pub mod api_keys;
pub mod assistants;
pub mod cancel;
pub mod checkpoint;
pub mod claim;
pub mod cron;
pub mod db;
pub mod effects;
pub mod ending;
pub mod enqueue;
pub mod event;
pub mod files;
pub mod graphs;
pub mod lease;
pub mod listener;
pub mod retention;
pub mod run;
pub mod saver;
pub mod schema;
pub mod store;
pub mod thread;
pub mod webhooks;

mod error;

pub use cancel::{CancelOutcome, cancel};
pub use checkpoint::{IdleThreadCheckpointer, PgCheckpointer};
pub use claim::{ClaimedRun, Lease, claim};
pub use error::{Error, Result, is_transient};
pub use event::{NewEvent, RunEvent};
pub use lease::{LiveWorker, WorkerId, WorkerLease};
pub use listener::Listener;
pub use run::{CancelAction, MultitaskStrategy, NewRun, QueueLimit, Run, RunId, RunStatus};
pub use schema::MIGRATOR;
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
