//! The Store: items by namespace and key, each a caller's own (`owner`), as the official
//! server's `/store` routes and LangGraph's `BaseStore` use them.
//!
//! An item with a TTL lives that many minutes after it was written, and again after each read
//! that refreshes it; an expired item is gone for every read, and the next write of its key
//! replaces it.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgExecutor;

use crate::{Error, Result, check_page};

mod similar;

pub use similar::{Embedded, MAX_EMBEDDED, VectorCache};

/// The longest TTL: 100 years, in minutes.
pub const MAX_TTL_MINUTES: u32 = 100 * 366 * 24 * 60;

/// The largest value an item may hold, in bytes of JSON: memories, not files.
pub const MAX_VALUE_BYTES: usize = 1024 * 1024;

/// What one caller may keep in the Store, so that no caller fills the database every tenant
/// shares. Writes to an item the caller has already are not counted again (an item holds at most
/// [`MAX_VALUE_BYTES`] and [`MAX_EMBEDDED`] vectors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreQuota {
    pub items: i64,
    /// The bytes of their values, as PostgreSQL stores them, and of their vectors.
    pub bytes: i64,
}

impl Default for StoreQuota {
    /// 100,000 items and 1 GiB: a long-lived agent's memories many times over.
    fn default() -> Self {
        Self {
            items: 100_000,
            bytes: 1 << 30,
        }
    }
}

/// An item of the Store.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub namespace: Vec<String>,
    pub key: String,
    pub value: Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Item {
    /// As the official server answers it (LangGraph's `Item.dict()`).
    pub fn json(&self) -> Value {
        json!({
            "namespace": self.namespace,
            "key": self.key,
            "value": self.value,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        })
    }
}

/// What a search asks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Search {
    pub namespace_prefix: Vec<String>,
    /// Items whose value holds these fields with these values (JSON containment).
    pub filter: Option<Value>,
    /// The embedded query of a semantic search (`store.index`): the items most similar to it
    /// first, with their score.
    pub query: Option<Vec<f32>>,
    pub limit: i64,
    pub offset: i64,
    pub refresh_ttl: bool,
}

/// What listing namespaces asks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Namespaces {
    pub prefix: Vec<String>,
    pub suffix: Vec<String>,
    /// Namespaces cut to this many labels (and the duplicates that makes, dropped).
    pub max_depth: Option<i32>,
    pub limit: i64,
    pub offset: i64,
}

/// A namespace as the official server takes it: labels that are non-empty and have no period
/// (nor a NUL character, which Postgres's text cannot hold).
///
/// # Errors
///
/// [`Error::Invalid`] naming what is wrong.
pub fn check_namespace(namespace: &[String]) -> Result {
    match namespace
        .iter()
        .find(|label| label.is_empty() || label.contains(['.', '\0']))
    {
        Some(label) => Err(Error::Invalid {
            field: "namespace",
            reason: format!(
                "namespace label {label:?} must be a non-empty string without periods or NUL"
            ),
        }),
        None => Ok(()),
    }
}

/// An item's key: any text but a NUL character, which Postgres's text cannot hold.
///
/// # Errors
///
/// [`Error::Invalid`].
pub fn check_key(key: &str) -> Result {
    if key.contains('\0') {
        return Err(Error::Invalid {
            field: "key",
            reason: "an item's key holds no NUL character".into(),
        });
    }
    Ok(())
}

/// What to write: an item's place, its value, how long it lives and its embedded fields.
#[derive(Debug, Clone, Copy)]
pub struct Write<'a> {
    pub namespace: &'a [String],
    pub key: &'a str,
    pub value: &'a Value,
    /// Minutes it lives; it never expires without.
    pub ttl_minutes: Option<f64>,
    /// Its fields' vectors, which replace those it had (none: it is found by no query).
    pub embedded: &'a [Embedded],
}

/// Writes `owner`'s item (replacing the one with its namespace and key, and its vectors).
///
/// # Errors
///
/// [`Error::Invalid`] for an empty or malformed namespace, a TTL that is not positive, a value
/// over [`MAX_VALUE_BYTES`], a vector that is empty or not finite, or a new item past the owner's
/// `quota`.
pub async fn put(
    executor: impl PgExecutor<'_>,
    owner: &str,
    write: Write<'_>,
    quota: StoreQuota,
) -> Result {
    let Write {
        namespace,
        key,
        value,
        ttl_minutes,
        embedded,
    } = write;
    check_namespace(namespace)?;
    check_key(key)?;
    if namespace.is_empty() {
        return Err(Error::Invalid {
            field: "namespace",
            reason: "an item's namespace has at least one label".into(),
        });
    }
    if ttl_minutes.is_some_and(|ttl| !(ttl > 0.0 && ttl <= f64::from(MAX_TTL_MINUTES))) {
        return Err(Error::Invalid {
            field: "ttl",
            reason: format!("ttl must be a positive number of minutes, at most {MAX_TTL_MINUTES}"),
        });
    }
    if serde_json::to_vec(value).map_or(usize::MAX, |json| json.len()) > MAX_VALUE_BYTES {
        return Err(Error::Invalid {
            field: "value",
            reason: format!("an item's value holds at most {MAX_VALUE_BYTES} bytes of JSON"),
        });
    }
    let (fields, embedding) = similar::columns(embedded)?.unzip();
    // A new item only within the owner's quota (counted without a lock: concurrent writes can
    // pass it by about as many as run at once); an item the owner has is always rewritten, its
    // embedding replaced (under a new id) or removed.
    let written = sqlx::query!(
        r#"
        insert into mostrador.store_items as i (
            owner, namespace, key, value, ttl_minutes, expires_at,
            embedding, embedded_fields, embedding_id
        )
        select $1, $2, $3, $4, $5::float8, now() + make_interval(secs => $5::float8 * 60),
               $8::bytea, $9::text[],
               case when $8::bytea is null then null
                    else nextval('mostrador.store_embedding_ids') end
        where exists (
            select 1 from mostrador.store_items
            where owner = $1 and namespace = $2 and key = $3
        ) or (
            select count(*) < $6
                and coalesce(sum(pg_column_size(value)), 0) + pg_column_size($4::jsonb)
                    + coalesce(sum(octet_length(embedding)), 0)
                    + coalesce(octet_length($8::bytea), 0)
                    <= $7
            from mostrador.store_items
            where owner = $1
        )
        on conflict (owner, namespace, key) do update
        set value = excluded.value,
            updated_at = now(),
            -- An expired item is a new one.
            created_at = case when i.expires_at <= now() then now() else i.created_at end,
            ttl_minutes = excluded.ttl_minutes,
            expires_at = excluded.expires_at,
            embedding = excluded.embedding,
            embedded_fields = excluded.embedded_fields,
            embedding_id = excluded.embedding_id
        "#,
        owner,
        namespace as &[String],
        key,
        value,
        ttl_minutes,
        quota.items,
        quota.bytes,
        embedding,
        fields as Option<Vec<String>>,
    )
    .execute(executor)
    .await?
    .rows_affected();
    if written == 0 {
        return Err(Error::Invalid {
            field: "store",
            reason: format!(
                "a caller keeps at most {} items and {} MiB in the Store: delete some first",
                quota.items,
                quota.bytes >> 20
            ),
        });
    }
    Ok(())
}

/// `owner`'s item, if it has one there and it has not expired; a read refreshes its TTL unless
/// `refresh_ttl` is false.
///
/// # Errors
///
/// [`Error::Invalid`] for a malformed namespace or key; the database failed.
pub async fn get(
    executor: impl PgExecutor<'_>,
    owner: &str,
    namespace: &[String],
    key: &str,
    refresh_ttl: bool,
) -> Result<Option<Item>> {
    check_namespace(namespace)?;
    check_key(key)?;
    let found = sqlx::query_as!(
        Item,
        r#"
        with found as (
            select owner, namespace, key
            from mostrador.store_items
            where owner = $1 and namespace = $2 and key = $3
              and (expires_at is null or expires_at > now())
        ),
        refreshed as (
            update mostrador.store_items i
            set expires_at = now() + make_interval(secs => i.ttl_minutes * 60)
            from found f
            where $4 and i.ttl_minutes is not null
              and (i.owner, i.namespace, i.key) = (f.owner, f.namespace, f.key)
        )
        select i.namespace as "namespace!", i.key as "key!", i.value as "value!",
               i.created_at as "created_at!", i.updated_at as "updated_at!"
        from mostrador.store_items i
        join found f using (owner, namespace, key)
        "#,
        owner,
        namespace as &[String],
        key,
        refresh_ttl,
    )
    .fetch_optional(executor)
    .await?;
    Ok(found)
}

/// Deletes `owner`'s item; deleting what is not there is no error.
///
/// # Errors
///
/// [`Error::Invalid`] for a malformed namespace or key; the database failed.
pub async fn delete(
    executor: impl PgExecutor<'_>,
    owner: &str,
    namespace: &[String],
    key: &str,
) -> Result {
    check_namespace(namespace)?;
    check_key(key)?;
    sqlx::query!(
        "delete from mostrador.store_items where owner = $1 and namespace = $2 and key = $3",
        owner,
        namespace as &[String],
        key,
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// An item a search found, and how similar it is to the query of a semantic search.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub item: Item,
    /// The cosine similarity of its nearest embedded field to the query; none without a query or
    /// for an item without embedded fields.
    pub score: Option<f64>,
}

/// `owner`'s live items under a namespace prefix that hold `filter`: with a query, the most
/// similar first (`cache` keeps the vectors this process has read); without, newest first.
///
/// # Errors
///
/// [`Error::Invalid`] for a limit outside 1..=1000, a negative offset, a malformed prefix or a
/// query in other dimensions than the items'.
pub async fn search(
    pool: &sqlx::PgPool,
    owner: &str,
    search: &Search,
    cache: &VectorCache,
) -> Result<Vec<Found>> {
    check_namespace(&search.namespace_prefix)?;
    check_page(search.limit, search.offset)?;
    if let Some(query) = &search.query {
        return similar::search(pool, owner, search, query, cache).await;
    }
    let items = newest(pool, owner, search, search.limit, search.offset, false).await?;
    Ok(items
        .into_iter()
        .map(|item| Found { item, score: None })
        .collect())
}

/// A page of the search's items, newest first (only those without embedded fields when
/// `unembedded`), their TTL refreshed if asked.
async fn newest(
    executor: impl PgExecutor<'_>,
    owner: &str,
    search: &Search,
    limit: i64,
    offset: i64,
    unembedded: bool,
) -> Result<Vec<Item>> {
    let found = sqlx::query_as!(
        Item,
        r#"
        with found as (
            select owner, namespace, key
            from mostrador.store_items
            where owner = $1
              and namespace[1:cardinality($2::text[])] = $2
              and ($3::jsonb is null or value @> $3)
              and (expires_at is null or expires_at > now())
              and not ($7 and embedding_id is not null)
            order by updated_at desc, namespace, key
            limit $4
            offset $5
        ),
        refreshed as (
            update mostrador.store_items i
            set expires_at = now() + make_interval(secs => i.ttl_minutes * 60)
            from found f
            where $6 and i.ttl_minutes is not null
              and (i.owner, i.namespace, i.key) = (f.owner, f.namespace, f.key)
        )
        select i.namespace as "namespace!", i.key as "key!", i.value as "value!",
               i.created_at as "created_at!", i.updated_at as "updated_at!"
        from mostrador.store_items i
        join found f using (owner, namespace, key)
        order by i.updated_at desc, i.namespace, i.key
        "#,
        owner,
        &search.namespace_prefix as &[String],
        search.filter,
        limit,
        offset,
        search.refresh_ttl,
        unembedded,
    )
    .fetch_all(executor)
    .await?;
    Ok(found)
}

/// The distinct namespaces of `owner`'s live items that start with `prefix` and end with
/// `suffix`, cut to `max_depth` labels, in order.
///
/// # Errors
///
/// [`Error::Invalid`] for a limit outside 1..=1000, a negative offset, a depth below 1 or a
/// malformed prefix or suffix.
pub async fn namespaces(
    executor: impl PgExecutor<'_>,
    owner: &str,
    asked: &Namespaces,
) -> Result<Vec<Vec<String>>> {
    check_namespace(&asked.prefix)?;
    check_namespace(&asked.suffix)?;
    check_page(asked.limit, asked.offset)?;
    if asked.max_depth.is_some_and(|depth| depth < 1) {
        return Err(Error::Invalid {
            field: "max_depth",
            reason: "max_depth must be at least 1".into(),
        });
    }
    let found = sqlx::query_scalar!(
        r#"
        select distinct
            case when $4::int is null then namespace else namespace[1:$4] end as "namespace!"
        from mostrador.store_items
        where owner = $1
          and namespace[1:cardinality($2::text[])] = $2
          and (cardinality($3::text[]) = 0
               or namespace[cardinality(namespace) - cardinality($3::text[]) + 1:] = $3)
          and (expires_at is null or expires_at > now())
        order by 1
        limit $5
        offset $6
        "#,
        owner,
        &asked.prefix as &[String],
        &asked.suffix as &[String],
        asked.max_depth,
        asked.limit,
        asked.offset,
    )
    .fetch_all(executor)
    .await?;
    Ok(found)
}

/// Deletes up to `limit` items whose time to live has passed (reads already leave them out),
/// soonest expired first, through the index of expiring items; one statement, safe on every
/// worker at once (items another deletes are skipped). The number deleted.
///
/// # Errors
///
/// The database failed.
pub async fn delete_expired(pool: &sqlx::PgPool, limit: i64) -> Result<u64> {
    Ok(sqlx::query!(
        r#"
        delete from mostrador.store_items i
        using (
            select owner, namespace, key
            from mostrador.store_items
            where expires_at <= now()
            order by expires_at
            limit $1
            for update skip locked
        ) d
        where i.owner = d.owner and i.namespace = d.namespace and i.key = d.key
        "#,
        limit,
    )
    .execute(pool)
    .await?
    .rows_affected())
}
