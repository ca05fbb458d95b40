//! End-to-end tests that start real mostrador processes against Postgres.
//!
//! The `mostrador-e2e` binary is the `mostrador` command line (the same [`mostrador::main`])
//! serving the graphs of this module instead of the built-in ones. Their nodes record every
//! start and finish in the table `e2e_executions` of the database they run against, and announce
//! it on the channel `e2e_executions`, so a test can wait for "node s3 started" without polling
//! and count afterwards how often each node ran.
//!
//! Graphs (every node sleeps `slow[node]` milliseconds if the state says so, else `delay_ms`):
//! * `e2e_linear_5`, `e2e_linear_6`: `s1 → … → sN`, each appending its name to `log`.
//! * `e2e_fanout`: `plan` sends `width` tasks to `work` (task `i` sleeps `(i + 1) × delay_ms`
//!   and appends `i²` to `done`), then `total` sums `done`.
//! * `e2e_flaky`: `flaky` fails (retryably) while it has started at most `fail_times` times on
//!   its thread; its retry policy allows 3 attempts.
//! * `e2e_approval`: `ask` interrupts for a decision on `refund`, `record` keeps it (0 unless
//!   `"approved"`).
//! * `e2e_nested`: `intake` sets `refund`, then `review` (the `e2e_approval` graph used as a
//!   node: a subgraph) decides it, then `close` appends to `log`.
//! * `bench_linear_1`, `bench_linear_6`: `n1 → … → nN` that record nothing, for the worker
//!   benchmarks (`bench/src/bin/worker_bench.rs`).
//! * `e2e_recall`: a Rust node's semantic memory: `remember` put in the Store under
//!   `("memories", "rust")`, or the three memories nearest `recall` as `recalled`
//!   (`tests/python/store`, under a project's `store.index`).

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use mostrador_graph::{
    Command, Graph, NodeContext, NodeError, Reducer, RetryPolicy, START, StateGraph,
};
use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::migrate::Migrator;
use uuid::Uuid;

/// The platform's migrations and the retail app's, as `mostrador-e2e migrate` applies them: the
/// end-to-end tests' databases, whose `mostrador-e2e` processes check for both.
pub static MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| {
    let mut migrations: Vec<_> = mostrador_queue::MIGRATOR
        .iter()
        .chain(mostrador_retail::MIGRATOR.iter())
        .cloned()
        .collect();
    migrations.sort_by_key(|migration| migration.version);
    Migrator {
        migrations: migrations.into(),
        ..Migrator::DEFAULT
    }
});

/// The table and channel the e2e graphs record executions in.
pub const EXECUTIONS: &str = "e2e_executions";

/// Creates the executions table (once per test database, before workers start).
///
/// # Errors
///
/// The database failed.
pub async fn create_executions_table(pool: &PgPool) -> sqlx::Result<()> {
    sqlx::raw_sql(include_str!("executions.sql"))
        .execute(pool)
        .await?;
    Ok(())
}

/// The graphs of the `mostrador-e2e` binary.
pub fn graphs(pool: &PgPool) -> HashMap<String, Graph> {
    HashMap::from([
        ("e2e_linear_5".to_owned(), linear(pool, 5)),
        ("e2e_linear_6".to_owned(), linear(pool, 6)),
        ("e2e_fanout".to_owned(), fanout(pool)),
        ("e2e_flaky".to_owned(), flaky(pool)),
        ("e2e_approval".to_owned(), approval()),
        ("e2e_nested".to_owned(), nested()),
        ("bench_linear_1".to_owned(), quiet_linear(1)),
        ("bench_linear_6".to_owned(), quiet_linear(6)),
        ("e2e_recall".to_owned(), recall()),
    ])
}

/// `memory` keeps `remember` in the Store, or recalls the memories nearest `recall`.
fn recall() -> Graph {
    StateGraph::new()
        .channel("remember", Reducer::LastValue)
        .channel("recall", Reducer::LastValue)
        .channel("recalled", Reducer::LastValue)
        .node("memory", |ctx| async move {
            let store = ctx.store()?;
            if let Some(memory) = ctx.get("remember").and_then(Value::as_str) {
                store
                    .put(&["memories", "rust"], memory, json!({"text": memory}))
                    .await?;
                return Ok(Command::new());
            }
            let query = ctx
                .get("recall")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let found = store.search_similar(&["memories"], query, None, 3).await?;
            let recalled: Vec<Value> = found
                .iter()
                .map(|item| json!({"text": item.value["text"], "score": item.score}))
                .collect();
            Ok(Command::new().set("recalled", json!(recalled)))
        })
        .edge(START, "memory")
        .compile()
        .expect("the recall graph is valid")
}

/// `ask` waits for a decision on a refund (an interrupt), then `record` keeps it.
fn approval() -> Graph {
    StateGraph::new()
        .channel("decision", Reducer::LastValue)
        .channel("refund", Reducer::LastValue)
        .node("ask", |ctx| async move {
            let refund = ctx.get("refund").cloned().unwrap_or(json!(40));
            let decision = ctx.interrupt(json!({"refund": refund, "question": "approve?"}))?;
            Ok(Command::new().set("decision", decision))
        })
        .node("record", |ctx| async move {
            let approved = ctx.get("decision") == Some(&json!("approved"));
            Ok(Command::new().set(
                "refund",
                if approved {
                    json!(ctx.get("refund").cloned().unwrap_or(json!(40)))
                } else {
                    json!(0)
                },
            ))
        })
        .edge(START, "ask")
        .edge("ask", "record")
        .compile()
        .expect("the approval graph is valid")
}

/// The approval graph as a subgraph: `intake → review (approval) → close`.
fn nested() -> Graph {
    StateGraph::new()
        .channel("decision", Reducer::LastValue)
        .channel("refund", Reducer::LastValue)
        .channel("log", Reducer::Append)
        .node("intake", |_| async {
            Ok(Command::new()
                .set("refund", json!(25))
                .set("log", json!(["intake"])))
        })
        .subgraph("review", approval())
        .node("close", |_| async {
            Ok(Command::new().set("log", json!(["close"])))
        })
        .edge(START, "intake")
        .edge("intake", "review")
        .edge("review", "close")
        .compile()
        .expect("the nested graph is valid")
}

/// `n1 → … → nN`, each appending its name to `log` after sleeping `delay_ms`, and recording
/// nothing: the workload of the worker benchmarks.
fn quiet_linear(steps: usize) -> Graph {
    let mut graph = StateGraph::new()
        .channel("log", Reducer::Append)
        .channel("delay_ms", Reducer::LastValue)
        .edge(START, "n1");
    for step in 1..=steps {
        let name = format!("n{step}");
        if step > 1 {
            graph = graph.edge(format!("n{}", step - 1), name.clone());
        }
        graph = graph.node(name, |ctx| async move {
            sleep(delay(&ctx, 1)).await;
            Ok(Command::new().set("log", json!([ctx.node()])))
        });
    }
    graph.compile().expect("the linear graph is valid")
}

fn linear(pool: &PgPool, steps: usize) -> Graph {
    let mut graph = StateGraph::new()
        .channel("log", Reducer::Append)
        .channel("delay_ms", Reducer::LastValue)
        .channel("slow", Reducer::LastValue)
        .edge(START, "s1");
    for step in 1..=steps {
        let name = format!("s{step}");
        if step > 1 {
            graph = graph.edge(format!("s{}", step - 1), name.clone());
        }
        let pool = pool.clone();
        graph = graph.node(name, move |ctx| {
            let pool = pool.clone();
            async move {
                record(&pool, &ctx, "start").await?;
                sleep(delay(&ctx, 1)).await;
                record(&pool, &ctx, "finish").await?;
                Ok(Command::new().set("log", json!([ctx.node()])))
            }
        });
    }
    graph.compile().expect("the linear graph is valid")
}

fn fanout(pool: &PgPool) -> Graph {
    let (work_pool, total_pool) = (pool.clone(), pool.clone());
    StateGraph::new()
        .channel("width", Reducer::LastValue)
        .channel("delay_ms", Reducer::LastValue)
        .channel("slow", Reducer::LastValue)
        .channel("done", Reducer::Append)
        .channel("total", Reducer::LastValue)
        .node("plan", |_| async { Ok(Command::new()) })
        .conditional_edge("plan", |state| {
            let width = state.get("width").and_then(Value::as_u64).unwrap_or(4);
            (0..width)
                .map(|i| mostrador_graph::Send::new("work", json!(i)))
                .collect::<Vec<_>>()
        })
        .node("work", move |ctx| {
            let pool = work_pool.clone();
            async move {
                let i = ctx.arg().and_then(Value::as_u64).unwrap_or(0);
                record(&pool, &ctx, "start").await?;
                sleep(delay(&ctx, i + 1)).await;
                record(&pool, &ctx, "finish").await?;
                Ok(Command::new().set("done", json!([i * i])))
            }
        })
        .node("total", move |ctx| {
            let pool = total_pool.clone();
            async move {
                record(&pool, &ctx, "start").await?;
                let total: u64 = ctx
                    .get("done")
                    .and_then(Value::as_array)
                    .map(|done| done.iter().filter_map(Value::as_u64).sum())
                    .unwrap_or(0);
                record(&pool, &ctx, "finish").await?;
                Ok(Command::new().set("total", json!(total)))
            }
        })
        .edge(START, "plan")
        .edge("work", "total")
        .compile()
        .expect("the fan-out graph is valid")
}

fn flaky(pool: &PgPool) -> Graph {
    let pool = pool.clone();
    let retry = RetryPolicy {
        max_attempts: 3,
        initial_interval: Duration::from_millis(10),
        ..RetryPolicy::default()
    };
    StateGraph::new()
        .channel("fail_times", Reducer::LastValue)
        .channel("ok", Reducer::LastValue)
        .node_with(
            "flaky",
            move |ctx| {
                let pool = pool.clone();
                async move {
                    let started = record(&pool, &ctx, "start").await?;
                    let fail_times = ctx.get("fail_times").and_then(Value::as_i64).unwrap_or(0);
                    if started <= fail_times {
                        return Err(NodeError::retryable(format!(
                            "flaky failure {started} of {fail_times}"
                        )));
                    }
                    record(&pool, &ctx, "finish").await?;
                    Ok(Command::new().set("ok", json!(true)))
                }
            },
            Some(retry),
            None,
        )
        .edge(START, "flaky")
        .compile()
        .expect("the flaky graph is valid")
}

/// How long this task sleeps: `slow[node]`, else `delay_ms × factor`.
fn delay(ctx: &NodeContext, factor: u64) -> Duration {
    let slow = ctx
        .get("slow")
        .and_then(|slow| slow.get(ctx.node()))
        .and_then(Value::as_u64);
    let base = ctx.get("delay_ms").and_then(Value::as_u64).unwrap_or(0);
    Duration::from_millis(slow.unwrap_or(base * factor))
}

async fn sleep(duration: Duration) {
    if !duration.is_zero() {
        tokio::time::sleep(duration).await;
    }
}

/// Records a start or finish of this task and announces it; returns how many times this node
/// has recorded `phase` on its thread, this one included.
async fn record(pool: &PgPool, ctx: &NodeContext, phase: &str) -> Result<i64, NodeError> {
    let thread_id = ctx
        .config()
        .get("thread_id")
        .and_then(Value::as_str)
        .and_then(|id| Uuid::parse_str(id).ok())
        .ok_or_else(|| NodeError::fatal("the run's config has no thread_id"))?;
    let recorded = insert_execution(pool, thread_id, ctx, phase).await;
    let recorded = match recorded {
        // A database the tests did not prepare (`mostrador-e2e dev` on one's own database):
        // make the table and try again.
        Err(sqlx::Error::Database(err)) if err.code().as_deref() == Some("42P01") => {
            create_executions_table(pool)
                .await
                .map_err(|err| NodeError::retryable(format!("creating e2e_executions: {err}")))?;
            insert_execution(pool, thread_id, ctx, phase).await
        }
        other => other,
    };
    recorded.map_err(|err| NodeError::retryable(format!("recording the execution failed: {err}")))
}

async fn insert_execution(
    pool: &PgPool,
    thread_id: Uuid,
    ctx: &NodeContext,
    phase: &str,
) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "with recorded as (
            insert into e2e_executions (thread_id, node, task, phase, pid)
            values ($1, $2, $3, $4, $5)
            returning thread_id
        ), announced as (
            select pg_notify('e2e_executions', json_build_object(
                'thread_id', $1::uuid, 'node', $2::text, 'task', $3::text, 'phase', $4::text, 'pid', $5::integer
            )::text)
            from recorded
        )
        -- The new row is not visible to this statement: count it in.
        select 1 + (
            select count(*) from e2e_executions where thread_id = $1 and node = $2 and phase = $4
        )
        from announced",
    )
    .bind(thread_id)
    .bind(ctx.node())
    .bind(ctx.task_id())
    .bind(phase)
    .bind(std::process::id() as i32)
    .fetch_one(pool)
    .await
}
