//! Assistants that callers create: configured instances of a graph, each update a new version,
//! each its creator's own. (Every graph's own assistant is code, in the api, not a row.)

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::{Acquire, PgExecutor, Postgres};
use uuid::Uuid;

use crate::{Error, Result, check_page};

/// An assistant at its latest version, or one version of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Assistant {
    pub assistant_id: Uuid,
    pub graph_id: String,
    pub name: String,
    pub description: Option<String>,
    pub config: Value,
    pub context: Value,
    pub metadata: Value,
    pub version: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A new assistant.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAssistant {
    pub assistant_id: Uuid,
    pub owner: String,
    pub graph_id: String,
    pub name: String,
    pub description: Option<String>,
    pub config: Value,
    pub context: Value,
    pub metadata: Value,
}

/// What an update changes; what it leaves `None` stays. Metadata is merged into the old.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    pub graph_id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub config: Option<Value>,
    pub context: Option<Value>,
    pub metadata: Option<Value>,
}

/// What a search or a count asks. `sort_by` is a column name of [`SORTS`].
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    pub graph_id: Option<String>,
    pub name: Option<String>,
    /// Assistants whose metadata holds these keys and values (JSON containment).
    pub metadata: Option<Value>,
    /// Assistants whose metadata passes this filter of a project's auth handler
    /// (`mostrador.auth_admits`).
    pub auth_filter: Option<Value>,
    pub sort_by: &'static str,
    pub descending: bool,
    pub limit: i64,
    pub offset: i64,
}

/// The columns a search sorts by.
pub const SORTS: [&str; 5] = [
    "assistant_id",
    "graph_id",
    "name",
    "created_at",
    "updated_at",
];

/// The most assistants one caller may have: no caller fills the database every tenant shares.
pub const MAX_PER_OWNER: i64 = 10_000;

/// The versions an assistant keeps, its newest: each update adds one, and the oldest beyond
/// these go.
pub const VERSIONS_KEPT: i32 = 1_000;

/// Creates an assistant and its first version; `None` when its id is taken (by anyone).
///
/// # Errors
///
/// [`Error::Invalid`] when its owner has [`MAX_PER_OWNER`] already; the database failed.
pub async fn create(
    executor: impl PgExecutor<'_> + Copy,
    new: &NewAssistant,
) -> Result<Option<Assistant>> {
    // Counted without a lock: concurrent creations can pass the bound by as many as run at once.
    let owned = sqlx::query_scalar!(
        r#"select count(*) as "count!" from mostrador.assistants where owner = $1"#,
        new.owner,
    )
    .fetch_one(executor)
    .await?;
    if owned >= MAX_PER_OWNER {
        return Err(Error::Invalid {
            field: "assistants",
            reason: format!("a caller has at most {MAX_PER_OWNER} assistants: delete one first"),
        });
    }
    let created = sqlx::query_as!(
        Assistant,
        r#"
        with created as (
            insert into mostrador.assistants
                (assistant_id, owner, graph_id, name, description, config, context, metadata)
            values ($1, $2, $3, $4, $5, $6, $7, $8)
            on conflict (assistant_id) do nothing
            returning *
        ),
        first as (
            insert into mostrador.assistant_versions
                (assistant_id, version, graph_id, name, description, config, context, metadata,
                 created_at)
            select assistant_id, 1, graph_id, name, description, config, context, metadata,
                   created_at
            from created
        )
        select assistant_id as "assistant_id!", graph_id as "graph_id!", name as "name!",
               description, config as "config!", context as "context!",
               metadata as "metadata!", version as "version!", created_at as "created_at!",
               updated_at as "updated_at!"
        from created
        "#,
        new.assistant_id,
        new.owner,
        new.graph_id,
        new.name,
        new.description,
        new.config,
        new.context,
        new.metadata,
    )
    .fetch_optional(executor)
    .await?;
    Ok(created)
}

/// `owner`'s assistant (anyone's: `None`, under a project's auth handlers).
///
/// # Errors
///
/// The database failed.
pub async fn get(
    executor: impl PgExecutor<'_>,
    owner: Option<&str>,
    assistant_id: Uuid,
) -> Result<Option<Assistant>> {
    let found = sqlx::query_as!(
        Assistant,
        r#"
        select assistant_id, graph_id, name, description, config, context, metadata, version,
               created_at, updated_at
        from mostrador.assistants
        where assistant_id = $1 and ($2::text is null or owner = $2)
        "#,
        assistant_id,
        owner,
    )
    .fetch_optional(executor)
    .await?;
    Ok(found)
}

/// A new version of `owner`'s assistant, made the latest (its oldest beyond [`VERSIONS_KEPT`]
/// go); `None` when it has no such assistant.
///
/// # Errors
///
/// The database failed.
pub async fn update<'a>(
    db: impl Acquire<'a, Database = Postgres>,
    owner: Option<&str>,
    assistant_id: Uuid,
    change: &Change,
) -> Result<Option<Assistant>> {
    let mut tx = db.begin().await?;
    // The row lock orders concurrent updates: each gets the next version.
    let updated = sqlx::query_file_as!(
        Assistant,
        "queries/update_assistant.sql",
        assistant_id,
        owner,
        change.graph_id,
        change.name,
        change.description,
        change.config,
        change.context,
        change.metadata,
        VERSIONS_KEPT,
    )
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(updated)
}

/// Makes `version` the latest of `owner`'s assistant; `None` when it has no such assistant or
/// version.
///
/// # Errors
///
/// The database failed.
pub async fn set_latest(
    executor: impl PgExecutor<'_>,
    owner: Option<&str>,
    assistant_id: Uuid,
    version: i32,
) -> Result<Option<Assistant>> {
    let latest = sqlx::query_as!(
        Assistant,
        r#"
        update mostrador.assistants a
        set version = v.version, graph_id = v.graph_id, name = v.name,
            description = v.description, config = v.config, context = v.context,
            metadata = v.metadata, updated_at = now()
        from mostrador.assistant_versions v
        where a.assistant_id = $1 and ($2::text is null or a.owner = $2)
          and v.assistant_id = a.assistant_id and v.version = $3
        returning a.assistant_id, a.graph_id, a.name, a.description, a.config, a.context,
                  a.metadata, a.version, a.created_at, a.updated_at
        "#,
        assistant_id,
        owner,
        version,
    )
    .fetch_optional(executor)
    .await?;
    Ok(latest)
}

/// Deletes `owner`'s assistant and its versions; whether there was one.
///
/// # Errors
///
/// The database failed.
pub async fn delete(
    executor: impl PgExecutor<'_>,
    owner: Option<&str>,
    assistant_id: Uuid,
) -> Result<bool> {
    let deleted = sqlx::query!(
        "delete from mostrador.assistants \
         where assistant_id = $1 and ($2::text is null or owner = $2)",
        assistant_id,
        owner,
    )
    .execute(executor)
    .await?;
    Ok(deleted.rows_affected() > 0)
}

/// The versions of `owner`'s assistant, newest first, whose metadata holds `metadata`; `None`
/// when it has no such assistant.
///
/// # Errors
///
/// [`Error::Invalid`] for a limit outside 1..=1000 or a negative offset.
pub async fn versions(
    executor: impl PgExecutor<'_>,
    owner: Option<&str>,
    assistant_id: Uuid,
    metadata: Option<&Value>,
    limit: i64,
    offset: i64,
) -> Result<Option<Vec<Assistant>>> {
    check_page(limit, offset)?;
    let rows = sqlx::query!(
        r#"
        select a.assistant_id as "owned?", v.assistant_id as "assistant_id?", v.graph_id as "graph_id?",
               v.name as "name?", v.description, v.config as "config?", v.context as "context?",
               v.metadata as "metadata?", v.version as "version?", v.created_at as "created_at?"
        from mostrador.assistants a
        left join lateral (
            select *
            from mostrador.assistant_versions v
            where v.assistant_id = a.assistant_id
              and ($3::jsonb is null or v.metadata @> $3)
            order by v.version desc
            limit $4
            offset $5
        ) v on true
        where a.assistant_id = $1 and ($2::text is null or a.owner = $2)
        "#,
        assistant_id,
        owner,
        metadata,
        limit,
        offset,
    )
    .fetch_all(executor)
    .await?;
    if rows.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        rows.into_iter()
            .filter_map(|row| {
                let created_at = row.created_at?;
                Some(Assistant {
                    assistant_id: row.assistant_id?,
                    graph_id: row.graph_id?,
                    name: row.name?,
                    description: row.description,
                    config: row.config?,
                    context: row.context?,
                    metadata: row.metadata?,
                    version: row.version?,
                    created_at,
                    updated_at: created_at,
                })
            })
            .collect(),
    ))
}

/// `owner`'s assistants that match, sorted, at most `limit` after `offset`.
///
/// # Errors
///
/// [`Error::Invalid`] for a limit outside 1..=1000, a negative offset or an unknown sort.
pub async fn search(
    executor: impl PgExecutor<'_>,
    owner: Option<&str>,
    search: &Search,
) -> Result<Vec<Assistant>> {
    check_page(search.limit, search.offset)?;
    if !SORTS.contains(&search.sort_by) {
        return Err(Error::Invalid {
            field: "sort_by",
            reason: format!("sort_by must be one of {}", SORTS.join(", ")),
        });
    }
    // N.B. The sort column is one of SORTS, never the caller's text.
    let sql = format!(
        "select assistant_id, graph_id, name, description, config, context, metadata, version, \
                created_at, updated_at \
         from mostrador.assistants \
         where ($1::text is null or owner = $1) \
           and ($2::text is null or graph_id = $2) \
           and ($3::text is null or name = $3) \
           and ($4::jsonb is null or metadata @> $4) \
           and ($7::jsonb is null or mostrador.auth_admits(metadata, $7)) \
         order by {} {}, assistant_id \
         limit $5 offset $6",
        search.sort_by,
        if search.descending { "desc" } else { "asc" },
    );
    let found = sqlx::query_as::<
        _,
        (
            Uuid,
            String,
            String,
            Option<String>,
            Value,
            Value,
            Value,
            i32,
            DateTime<Utc>,
            DateTime<Utc>,
        ),
    >(sqlx::AssertSqlSafe(sql))
    .bind(owner)
    .bind(&search.graph_id)
    .bind(&search.name)
    .bind(&search.metadata)
    .bind(search.limit)
    .bind(search.offset)
    .bind(&search.auth_filter)
    .fetch_all(executor)
    .await?;
    Ok(found
        .into_iter()
        .map(
            |(
                assistant_id,
                graph_id,
                name,
                description,
                config,
                context,
                metadata,
                version,
                created_at,
                updated_at,
            )| Assistant {
                assistant_id,
                graph_id,
                name,
                description,
                config,
                context,
                metadata,
                version,
                created_at,
                updated_at,
            },
        )
        .collect())
}

/// How many of `owner`'s assistants match (`sort_by`, `limit` and `offset` aside).
///
/// # Errors
///
/// The database failed.
pub async fn count(
    executor: impl PgExecutor<'_>,
    owner: Option<&str>,
    search: &Search,
) -> Result<i64> {
    let count = sqlx::query_scalar!(
        r#"
        select count(*) as "count!"
        from mostrador.assistants
        where ($1::text is null or owner = $1)
          and ($2::text is null or graph_id = $2)
          and ($3::text is null or name = $3)
          and ($4::jsonb is null or metadata @> $4)
          and ($5::jsonb is null or mostrador.auth_admits(metadata, $5))
        "#,
        owner,
        search.graph_id,
        search.name,
        search.metadata,
        search.auth_filter,
    )
    .fetch_one(executor)
    .await?;
    Ok(count)
}

/// The context a run's graph reads (LangGraph's `runtime.context`): its assistant's, with the
/// run's own keys over it, as the official server merges them; `{}` when neither has one, so the
/// graph's context schema gives its defaults. Kept in the run's config under `context`.
pub fn context_under(assistant: &Value, run: Map<String, Value>) -> Map<String, Value> {
    let mut merged = assistant.as_object().cloned().unwrap_or_default();
    merged.extend(run);
    merged
}

/// The run's config over its assistant's: what the run sets wins, `configurable` merged key by key.
pub fn config_under(assistant: &Value, run: Value) -> Value {
    let Some(defaults) = assistant
        .as_object()
        .filter(|defaults| !defaults.is_empty())
    else {
        return run;
    };
    let mut merged = defaults.clone();
    let run = match run {
        Value::Object(run) => run,
        _ => Map::new(),
    };
    for (key, value) in run {
        match (merged.get_mut(&key), value) {
            (Some(Value::Object(base)), Value::Object(over)) if key == "configurable" => {
                base.extend(over);
            }
            (_, value) => {
                merged.insert(key, value);
            }
        }
    }
    Value::Object(merged)
}
