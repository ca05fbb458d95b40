//! Webhook deliveries: the announcements of ended runs that named a webhook, queued by the
//! statement that ended the run (a trigger, migration 0017) and taken by senders a few per
//! receiver at a time ([`take`]). A sender holds what it takes for [`HOLD`] (pushed ahead, not
//! locked, so a sender that dies only delays them), then deletes each one sent or given up, or
//! sets it back by a backoff.

use std::time::Duration;

use sqlx::PgExecutor;

use crate::Result;
use crate::run::RunId;
use crate::thread::ThreadId;

/// How long a taken delivery is left to its sender before another may take it.
pub const HOLD: Duration = Duration::from_secs(60);

/// A run's announcement to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub run_id: RunId,
    pub thread_id: ThreadId,
    pub url: String,
    /// Attempts before this one.
    pub attempts: i32,
}

/// The receiver of a webhook: its URL's host and port as written (`https://h:8443/x` →
/// `h:8443`), as [`take`] groups deliveries.
pub fn receiver(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split(['/', '?', '#']).next().unwrap_or_default()
}

/// Takes up to `limit` deliveries that are due, oldest due first, at most `per_receiver` of one
/// receiver ([`receiver`]) and none of the receivers in `full` (the taker's busy ones), holding
/// them for [`HOLD`]. A delivery another taker holds is not taken twice: its hold is re-checked
/// once its lock is free.
///
/// # Errors
///
/// The database failed.
pub async fn take(
    executor: impl PgExecutor<'_>,
    limit: i64,
    per_receiver: i64,
    full: &[String],
) -> Result<Vec<Delivery>> {
    Ok(sqlx::query_as!(
        Delivery,
        r#"
        update mostrador.webhook_deliveries d
        set next_attempt_at = now() + make_interval(secs => $2), attempts = d.attempts + 1
        from (
            select run_id
            from (
                select
                    run_id,
                    next_attempt_at,
                    row_number() over (
                        partition by substring(url from '^[^:]*://([^/?#]*)')
                        order by next_attempt_at
                    ) as nth
                from mostrador.webhook_deliveries
                where next_attempt_at <= now()
                  and coalesce(substring(url from '^[^:]*://([^/?#]*)'), '') <> all($4)
            ) due
            where nth <= $3
            order by next_attempt_at
            limit $1
        ) due
        where d.run_id = due.run_id
          and d.next_attempt_at <= now()
        returning d.run_id as "run_id: RunId", d.thread_id as "thread_id: ThreadId", d.url,
            d.attempts - 1 as "attempts!"
        "#,
        limit,
        HOLD.as_secs_f64(),
        per_receiver,
        full,
    )
    .fetch_all(executor)
    .await?)
}

/// Forgets a delivery: sent, or given up.
///
/// # Errors
///
/// The database failed.
pub async fn done(executor: impl PgExecutor<'_>, run_id: RunId) -> Result<()> {
    sqlx::query!(
        "delete from mostrador.webhook_deliveries where run_id = $1",
        run_id.0
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// Sets a delivery back by `retry_in`, with why it failed.
///
/// # Errors
///
/// The database failed.
pub async fn retry(
    executor: impl PgExecutor<'_>,
    run_id: RunId,
    retry_in: Duration,
    error: &str,
) -> Result<()> {
    sqlx::query!(
        r#"
        update mostrador.webhook_deliveries
        set next_attempt_at = now() + make_interval(secs => $2), last_error = $3
        where run_id = $1
        "#,
        run_id.0,
        retry_in.as_secs_f64(),
        error,
    )
    .execute(executor)
    .await?;
    Ok(())
}
