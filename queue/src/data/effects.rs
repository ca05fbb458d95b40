//! Tools with external effects run at most once per idempotency key (the tool-call id or the
//! task id), because a node may run again: after a crash before its superstep's checkpoint, or
//! after a resume. The key and the tool's result are recorded in `mostrador.tool_effects` in the
//! same transaction as the effect:
//!
//! ```text
//! begin
//!   claim(key)        -- inserts the key; if it was there, returns the recorded result: stop
//!   ... the effect ...
//!   record(key, result)
//! commit
//! ```
//!
//! Two concurrent runs of the same tool with one key serialise on the key's row: the second
//! `claim` waits for the first transaction, then returns its result (or, if it rolled back,
//! claims the key itself).

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

/// Claims `key` for `tool` in the caller's transaction: `None` when this call is the first (do
/// the effect, then [`record`]), else the result recorded by the call that did it.
///
/// # Errors
///
/// The database failed.
pub async fn claim(
    tx: &mut PgConnection,
    key: &str,
    tool: &str,
    thread_id: Uuid,
    run_id: Uuid,
) -> sqlx::Result<Option<Value>> {
    let claimed = sqlx::query!(
        r#"
        insert into mostrador.tool_effects (idempotency_key, tool, thread_id, run_id, result)
        values ($1, $2, $3, $4, 'null')
        on conflict (idempotency_key) do nothing
        "#,
        key,
        tool,
        thread_id,
        run_id
    )
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if claimed {
        return Ok(None);
    }
    let recorded = sqlx::query_scalar!(
        "select result from mostrador.tool_effects where idempotency_key = $1",
        key
    )
    .fetch_one(&mut *tx)
    .await?;
    Ok(Some(recorded))
}

/// Records the result of the effect `key` claimed, in the same transaction.
///
/// # Errors
///
/// The database failed.
pub async fn record(tx: &mut PgConnection, key: &str, result: &Value) -> sqlx::Result<()> {
    sqlx::query!(
        "update mostrador.tool_effects set result = $2 where idempotency_key = $1",
        key,
        result
    )
    .execute(tx)
    .await?;
    Ok(())
}
