//! A run's statements cost what they cost on an empty database however many runs and threads came
//! before: each finds its rows by primary key, whatever plan a new deployment's small tables led
//! to.

use std::collections::BTreeMap;
use std::time::Duration;

use mostrador_graph::stream::discard;
use mostrador_graph::{Command, Reducer, RunControl, RunInput, RunOptions, START, StateGraph};
use mostrador_queue::run::ending::Ending;
use mostrador_queue::run::event::{self, NewEvent};
use mostrador_queue::state::saver::{Blob, NewCheckpoint, Payload, Saver, Write};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{NewRun, PgCheckpointer, WorkerLease, claim, db, run};
use serde_json::json;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

use crate::support::{GRAPH, graphs, new_runs, new_worker};

/// Threads and runs, each run ended after it ran, behind the second measured run.
const HISTORY: usize = 3_000;

/// A run's statements read no more pages with thousands of runs and threads behind them than on
/// an empty database: none walks an index whose predicate it happens to imply (the runs that ever
/// ran, until a vacuum; every live thread) instead of the primary key.
///
/// N.B. Each statement's generic plan is made by its connection's first execution and kept: a
/// server's connections make theirs in a new deployment's first seconds, on tables as small as
/// these, and where autovacuum has not analyzed them since (this machine runs without it) they
/// keep them. A plan that read `runs_one_running_per_thread` whole for the checkpoints' fence
/// made a run's PostgreSQL time grow by half over 4,000 runs (`bench/RESULTS.md`).
///
/// N.B. The claim is left out: it walks `runs_claim_idx` from its head, past the entries of runs
/// claimed since the last vacuum, which a scan marks dead only once no transaction of the whole
/// server (another database's too) can still see them. `claim.rs` bounds what it reads.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_runs_statements_read_no_more_pages_with_thousands_of_runs_behind_them(
    pool: PgPool,
) -> anyhow::Result<()> {
    // A server's pools, one connection each, as the api's and a worker's.
    let main = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(
            (*pool.connect_options())
                .clone()
                .options([("plan_cache_mode", "force_generic_plan"), ("jit", "off")]),
        )
        .await?;
    let server = Server {
        claimer: db::claimer(&main),
        publisher: db::publisher(&main),
        main,
        worker: new_worker(&pool).await,
    };

    // Each measured run follows another, which made the plans.
    server.one_run(&pool).await?;
    let empty = server.one_run(&pool).await?;
    behind(&pool, HISTORY).await?;
    server.one_run(&pool).await?;
    let after = server.one_run(&pool).await?;
    let total = |pages: &BTreeMap<String, i64>| pages.values().sum::<i64>();
    // A level more in the indexes it goes through is all thousands of rows may add (a fifth).
    assert!(
        total(&after) <= total(&empty) + total(&empty) / 2,
        "a run read {} pages on an empty database ({empty:?}), {} with {HISTORY} runs behind it \
         ({after:?})",
        total(&empty),
        total(&after),
    );
    Ok(())
}

struct Server {
    main: PgPool,
    claimer: PgPool,
    publisher: PgPool,
    worker: WorkerLease,
}

impl Server {
    /// The pages of each of `mostrador`'s tables (with its indexes) read so far through the
    /// server's connections (and `pool`'s).
    async fn pages(&self, pool: &PgPool) -> anyhow::Result<BTreeMap<String, i64>> {
        // Each connection's counts reach the shared statistics when it goes idle, once asked.
        for p in [&self.main, &self.claimer, &self.publisher] {
            sqlx::query("select pg_stat_force_next_flush()")
                .execute(p)
                .await?;
        }
        let pages: Vec<(String, i64)> = sqlx::query_as(
            "select relname::text,
                    (coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0)
                     + coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0))::int8
             from pg_statio_user_tables
             where schemaname = 'mostrador'",
        )
        .fetch_all(pool)
        .await?;
        Ok(pages.into_iter().collect())
    }

    /// A waited run of a graph: its thread made and read, its run enqueued, claimed,
    /// checkpointed by the engine and by a Python graph's saver, its events flushed alone, and
    /// its ending. Returns the pages it read, but the claim's.
    async fn one_run(&self, pool: &PgPool) -> anyhow::Result<BTreeMap<String, i64>> {
        let start = self.pages(pool).await?;
        let created = thread::create(&self.main, &NewThread::new(GRAPH, "ana")).await?;
        thread::get(&self.main, created.thread_id).await?;
        run::enqueue(&self.main, &NewRun::new(created.thread_id, GRAPH), None).await?;
        let enqueued = self.pages(pool).await?;
        let claimed = claim(&self.claimer, self.worker.worker_id, &graphs(), 1)
            .await?
            .pop()
            .expect("the run is claimed");
        let claimed_at = self.pages(pool).await?;

        let checkpointer = PgCheckpointer::fenced(self.main.clone(), &claimed);
        let graph = StateGraph::new()
            .channel("log", Reducer::Append)
            .node("step", |_| async {
                Ok(Command::new().set("log", json!("x")))
            })
            .edge(START, "step")
            .compile()?;
        graph
            .run(
                &checkpointer,
                created.thread_id.0,
                RunInput::Values(json!({})),
                &RunOptions::default(),
                &RunControl::new(),
                discard(),
            )
            .await?;
        Saver::fenced(self.main.clone(), &claimed)
            .write(&[Write::Checkpoint(NewCheckpoint {
                checkpoint_ns: String::new(),
                checkpoint_id: Uuid::now_v7(),
                parent_checkpoint_id: None,
                saved: json!({"channel_versions": {"log": 1}}),
                metadata: json!({}),
                blobs: vec![Blob {
                    channel: "log".into(),
                    version: 1,
                    payload: Payload {
                        kind: "json".into(),
                        bytes: b"[]".to_vec(),
                    },
                }],
            })])
            .await?;
        let values = NewEvent {
            event: "values".into(),
            data: json!({"log": ["x"]}),
        };
        event::append(&self.publisher, claimed.lease(), &[values]).await?;
        claimed.end(&self.publisher, Ending::Success).await?;
        let end = self.pages(pool).await?;

        let mut read = BTreeMap::new();
        for (table, pages) in end {
            let at = |m: &BTreeMap<String, i64>| m.get(&table).copied().unwrap_or(0);
            let n = (at(&enqueued) - at(&start)) + (pages - at(&claimed_at));
            if n != 0 {
                read.insert(table, n);
            }
        }
        Ok(read)
    }
}

/// `n` threads, each with a run that was claimed (as a worker claims), ran and ended; its
/// connections' statistics flushed.
async fn behind(pool: &PgPool, n: usize) -> anyhow::Result<()> {
    let setup = PgPoolOptions::new()
        .max_connections(1)
        .connect_with((*pool.connect_options()).clone())
        .await?;
    let claimer = db::claimer(&setup);
    new_runs(&setup, n).await;
    let worker = WorkerLease::new("history", graphs(), Duration::from_secs(30));
    worker.register(&setup).await?;
    loop {
        let claimed = claim(&claimer, worker.worker_id, &graphs(), 500).await?;
        if claimed.is_empty() {
            break;
        }
        let mut conn = setup.acquire().await?;
        let ends: Vec<_> = claimed.iter().map(|c| c.ending(Ending::Success)).collect();
        run::ending::end_many(&mut conn, &ends).await?;
    }
    for p in [&setup, &claimer] {
        sqlx::query("select pg_stat_force_next_flush()")
            .execute(p)
            .await?;
    }
    Ok(())
}
