//! The descriptions of Python graphs (schemas, drawings, subgraphs) that workers record for the
//! api, which runs no Python.

use serde_json::Value;
use sqlx::PgPool;

use crate::Result;

/// Records what a worker's runner said of each graph, replacing an older description.
///
/// # Errors
///
/// The database failed.
pub async fn record(pool: &PgPool, graph_id: &str, description: &Value) -> Result {
    sqlx::query!(
        r#"
        insert into mostrador.graph_descriptions (graph_id, description)
        values ($1, $2)
        on conflict (graph_id) do update
        set description = excluded.description, described_at = now()
        "#,
        graph_id,
        description,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// The latest description of a graph, if a worker has recorded one.
///
/// # Errors
///
/// The database failed.
pub async fn description(pool: &PgPool, graph_id: &str) -> Result<Option<Value>> {
    Ok(sqlx::query_scalar!(
        "select description from mostrador.graph_descriptions where graph_id = $1",
        graph_id
    )
    .fetch_optional(pool)
    .await?)
}

/// The names the workers found for these graphs (a compiled graph's own `name`, which the
/// official server gives its assistant), for those they have described.
///
/// # Errors
///
/// The database failed.
pub async fn names(pool: &PgPool, graph_ids: &[String]) -> Result<Vec<(String, String)>> {
    let rows = sqlx::query!(
        r#"
        select graph_id, description->>'name' as "name!"
        from mostrador.graph_descriptions
        where graph_id = any($1)
          and description->>'name' is not null
        "#,
        graph_ids,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.graph_id, row.name))
        .collect())
}
