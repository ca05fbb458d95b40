//! Enqueueing many runs in one statement, for batch schedulers: one insert, one limit check per
//! graph, one NOTIFY per graph.

use serde_json::Value;
use sqlx::{Acquire, PgConnection, Postgres};

use super::{QueueLimit, within_limit};
use crate::listener::RUNS_CHANNEL;
use crate::run::{MultitaskStrategy, NewRun, RunCommand, RunId};
use crate::{Error, Result};

/// Enqueues many runs with one insert statement and one NOTIFY per graph, for batch schedulers.
/// Runs queue behind whatever their threads have in flight (the `enqueue` strategy), whatever
/// their `multitask_strategy` says. `limit` bounds the graphs' queues and the delays; the callers'
/// shares are [`enqueue`]'s, for runs callers ask for one by one.
///
/// # Errors
///
/// [`Error::ThreadNotFound`] or [`Error::GraphMismatch`] for the first run whose thread is
/// missing or of another graph, [`Error::Backpressure`] when the batch would take any graph over
/// `limit`, [`Error::Invalid`]. On any error nothing was written.
pub async fn enqueue_batch<'a>(
    db: impl Acquire<'a, Database = Postgres>,
    news: &[NewRun],
    limit: Option<QueueLimit>,
) -> Result<Vec<RunId>> {
    let n = news.len();
    let mut run_ids = Vec::with_capacity(n);
    let mut thread_ids = Vec::with_capacity(n);
    let mut graph_ids = Vec::with_capacity(n);
    let mut inputs = Vec::with_capacity(n);
    let mut commands = Vec::with_capacity(n);
    let mut configs = Vec::with_capacity(n);
    let mut metadatas = Vec::with_capacity(n);
    let mut strategies = Vec::with_capacity(n);
    let mut priorities = Vec::with_capacity(n);
    let mut afters = Vec::with_capacity(n);
    let mut max_attempts = Vec::with_capacity(n);
    let mut trace_ids = Vec::with_capacity(n);
    let mut stream_modes = Vec::with_capacity(n);
    let mut webhooks = Vec::with_capacity(n);
    let mut streamed = Vec::with_capacity(n);
    for new in news {
        new.validate()?;
        let (run_id, trace_id) = new.id_and_trace();
        run_ids.push(run_id);
        thread_ids.push(new.thread_id.0);
        graph_ids.push(new.graph_id.as_str());
        inputs.push(new.input.as_ref());
        commands.push(new.command.as_ref().map(RunCommand::to_value));
        configs.push(unless_empty(&new.config.to_value()).cloned());
        metadatas.push(unless_empty(&new.metadata));
        strategies.push(new.multitask_strategy);
        priorities.push(new.priority);
        afters.push(new.after.as_secs_f64());
        max_attempts.push(new.max_attempts);
        trace_ids.push(trace_id);
        // One text per run (unnest flattens arrays of arrays); mode names hold no comma.
        stream_modes.push(new.stream_mode_names().join(","));
        streamed.push(new.streamed);
        webhooks.push(new.webhook.as_deref());
    }

    let mut tx = db.begin().await?;
    if let Some(limit) = limit {
        for new in news {
            limit.check_delay(new)?;
        }
        // Due and delayed runs count against budgets of their own, per graph.
        let mut per_graph: Vec<(&str, bool, i64)> = Vec::new();
        for new in news {
            let delayed = !new.after.is_zero();
            match per_graph
                .iter_mut()
                .find(|(g, d, _)| *g == new.graph_id && *d == delayed)
            {
                Some((_, _, count)) => *count += 1,
                None => per_graph.push((&new.graph_id, delayed, 1)),
            }
        }
        for (graph_id, delayed, count) in per_graph {
            check_limit(&mut tx, graph_id, delayed, count, limit).await?;
        }
    }

    // The join drops runs whose thread is missing, deleted or of another graph: fewer rows
    // inserted than runs given tell.
    // `order by ord` keeps `seq` in input order, so runs of one thread run in the order given.
    let inserted = sqlx::query_file!(
        "queries/enqueue_runs.sql",
        &run_ids,
        &thread_ids,
        &graph_ids as &[&str],
        &inputs as &[Option<&Value>],
        &commands as &[Option<Value>],
        &configs as &[Option<Value>],
        &metadatas as &[Option<&Value>],
        &strategies as &[MultitaskStrategy],
        &priorities,
        &afters,
        &max_attempts,
        &trace_ids,
        &stream_modes,
        &webhooks as &[Option<&str>],
        &streamed,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();

    if inserted != n as u64 {
        // Find the first offender to name it; the transaction rolls back on return.
        for new in news {
            let thread_graph_id = sqlx::query_scalar!(
                r#"
                select graph_id
                -- By its id alone (see `crate::db`).
                from (select * from mostrador.threads where thread_id = $1 offset 0) t
                where deleted_at is null
                "#,
                new.thread_id.0
            )
            .fetch_optional(&mut *tx)
            .await?;
            match thread_graph_id {
                None => return Err(Error::ThreadNotFound(new.thread_id)),
                Some(None) => {
                    return Err(Error::Invalid {
                        field: "runs",
                        reason: format!(
                            "thread {} has no graph yet: a batch only enqueues on threads created \
                             with a graph or bound by a run",
                            new.thread_id
                        ),
                    });
                }
                Some(Some(thread_graph_id)) if thread_graph_id != new.graph_id => {
                    return Err(Error::GraphMismatch {
                        thread_id: new.thread_id,
                        thread_graph_id,
                        graph_id: new.graph_id.clone(),
                    });
                }
                Some(Some(_)) => {}
            }
        }
        // Every thread checks out now although one did not during the insert: it changed in
        // between. Nothing was written; the caller may retry.
        return Err(Error::Invalid {
            field: "runs",
            reason: "a thread changed while the batch was enqueued; retry".into(),
        });
    }
    let mut woken: Vec<&str> = news
        .iter()
        .filter(|new| new.after.is_zero())
        .map(|new| new.graph_id.as_str())
        .collect();
    woken.sort_unstable();
    woken.dedup();
    notify_queued(&mut tx, &woken).await?;
    tx.commit().await?;
    Ok(run_ids.into_iter().map(RunId).collect())
}

/// `value`, or none when it is an empty object: PostgreSQL parses each JSON value of a statement,
/// and a run's config and metadata are mostly empty (`coalesce` in the statement puts the object
/// back).
fn unless_empty(value: &Value) -> Option<&Value> {
    match value {
        Value::Object(object) if object.is_empty() => None,
        value => Some(value),
    }
}

/// Wakes the claimers of these graphs when the transaction commits.
async fn notify_queued(conn: &mut PgConnection, graph_ids: &[&str]) -> Result {
    if graph_ids.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "select pg_notify($1, graph_id) from unnest($2::text[]) as graph_id",
        RUNS_CHANNEL,
        graph_ids as &[&str],
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(())
}

/// Fails with [`Error::Backpressure`] when `adding` more pending runs would take `graph_id` over
/// its limit. Runs due now and runs delayed to later (`delayed`) have a budget each, so a flood
/// of delayed runs never holds up the runs due now. Counts at most `max_pending` rows, so the
/// check costs the limit, not the backlog.
async fn check_limit(
    conn: &mut PgConnection,
    graph_id: &str,
    delayed: bool,
    adding: i64,
    limit: QueueLimit,
) -> Result {
    let pending = sqlx::query_scalar!(
        r#"
        select count(*) as "n!"
        from (
            select 1
            from mostrador.runs
            where status = 'pending'
              and graph_id = $1
              and (available_at > now()) = $3
            limit $2
        ) p
        "#,
        graph_id,
        limit.max_pending,
        delayed,
    )
    .fetch_one(&mut *conn)
    .await?;
    within_limit(graph_id, pending, adding, limit)
}
