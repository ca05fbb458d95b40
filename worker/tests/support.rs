//! What the worker tests share: enqueueing and claiming a run, an executor, a node-start counter
//! and a three-node graph with a gate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mostrador_graph::{Command, Graph, Reducer, START, StateGraph};
use mostrador_queue::run::{self, NewRun};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{ClaimedRun, ThreadId, WorkerLease, claim};
use mostrador_worker::Executor;
use serde_json::json;
use sqlx::PgPool;
use tokio::sync::Notify;

pub const GRAPH: &str = "test";

/// Enqueues a run of [`GRAPH`] (`new` shapes it) on `thread_id`, or on a new thread of Ana's.
pub async fn enqueue(
    pool: &PgPool,
    thread_id: Option<ThreadId>,
    new: impl FnOnce(NewRun) -> NewRun,
) -> NewRun {
    let thread_id = match thread_id {
        Some(id) => id,
        None => {
            thread::create(pool, &NewThread::new(GRAPH, "ana"))
                .await
                .expect("thread")
                .thread_id
        }
    };
    let new = new(NewRun::new(thread_id, GRAPH));
    run::enqueue(pool, &new, None).await.expect("enqueue");
    new
}

/// An executor with its publisher and default metrics.
pub fn executor(pool: &PgPool) -> Executor {
    Executor::new(pool.clone(), Arc::default())
}

/// Claims the next run of [`GRAPH`] for a new worker.
pub async fn claim_next(pool: &PgPool) -> ClaimedRun {
    let worker = WorkerLease::new("test", vec![GRAPH.to_owned()], Duration::from_secs(30));
    worker.register(pool).await.expect("register");
    claim(pool, worker.worker_id, &worker.graphs, 1)
        .await
        .expect("claim")
        .pop()
        .expect("a run to claim")
}

/// Counts node starts.
#[derive(Clone, Default)]
pub struct Starts(Arc<Mutex<HashMap<String, usize>>>);

impl Starts {
    pub fn record(&self, node: &str) {
        *self
            .0
            .lock()
            .expect("lock")
            .entry(node.to_owned())
            .or_default() += 1;
    }

    pub fn of(&self, node: &str) -> usize {
        self.0.lock().expect("lock").get(node).copied().unwrap_or(0)
    }
}

/// a → b → c, each appending its name to `log`. `b` announces its start on `started` and, when
/// `release` is given, waits for it (at most a second: long enough for a worker to act on a
/// shutdown or a cancel meanwhile).
pub fn abc(starts: &Starts, started: Arc<Notify>, release: Option<Arc<Notify>>) -> Graph {
    let mut graph = StateGraph::new()
        .channel("log", Reducer::Append)
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", "c");
    for name in ["a", "b", "c"] {
        let (starts, started, release) = (starts.clone(), Arc::clone(&started), release.clone());
        graph = graph.node(name, move |_| {
            let (starts, started, release) =
                (starts.clone(), Arc::clone(&started), release.clone());
            async move {
                starts.record(name);
                if name == "b" {
                    started.notify_one();
                    if let Some(release) = release {
                        let _ =
                            tokio::time::timeout(Duration::from_secs(1), release.notified()).await;
                    }
                }
                Ok(Command::new().set("log", json!([name])))
            }
        });
    }
    graph.compile().expect("valid graph")
}
