//! Threads: the unit of ownership. A thread row exists before any checkpoint, and every route that
//! takes a thread id authorizes against it.
//!
//! `threads.status` stores the thread's resting status (`idle`, `interrupted` or `error`), written
//! by the transition that finished its last run. `busy` is never stored: a thread is busy exactly
//! while it has a pending or running run, and [`get`] derives it from the runs, so no path can
//! leave a thread busy for ever.

use std::fmt;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{Acquire, PgExecutor, Postgres};
use uuid::Uuid;

use crate::run::cancel::cancel_in_tx;
use crate::run::{CancelAction, RunId};
use crate::{Error, Result, check_metadata, metadata_max_bytes};

mod search;

pub use search::{ThreadSearch, ThreadSort, ThreadSortKey, Visibility, count, search, search_page};

/// A thread id: a UUIDv7 the server draws, or the id a client chose for its new thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, sqlx::Type)]
#[sqlx(transparent)]
pub struct ThreadId(pub Uuid);

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The thread status the `langgraph-sdk` knows. Mirrors `mostrador.thread_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, sqlx::Type)]
#[sqlx(type_name = "mostrador.thread_status", rename_all = "lowercase")]
pub enum ThreadStatus {
    Idle,
    Busy,
    Interrupted,
    Error,
}

impl ThreadStatus {
    pub const ALL: [Self; 4] = [Self::Idle, Self::Busy, Self::Interrupted, Self::Error];

    /// The name on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadStatus::Idle => "idle",
            ThreadStatus::Busy => "busy",
            ThreadStatus::Interrupted => "interrupted",
            ThreadStatus::Error => "error",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == name)
    }
}

/// A thread as stored, with `status` already derived (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Thread {
    pub thread_id: ThreadId,
    /// `None` until a run binds the thread to its graph.
    pub graph_id: Option<String>,
    pub owner: String,
    pub tenant: Option<String>,
    pub status: ThreadStatus,
    pub metadata: Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When its state last changed as the api tells it (a run's end, a state update; a
    /// running graph's checkpoints at most once a minute).
    pub state_updated_at: DateTime<Utc>,
}

/// What a caller decides about a new thread; the id and times are the server's.
#[derive(Debug, Clone)]
pub struct NewThread {
    /// `None` leaves the thread for its first run to bind.
    pub graph_id: Option<String>,
    pub owner: String,
    pub tenant: Option<String>,
    pub metadata: Value,
    /// Deleted when its run ends (a stateless run's, `on_completion: delete`).
    pub temporary: bool,
    /// Its time to live, if it has one.
    pub ttl: Option<Ttl>,
    /// The most threads its owner may have: creating it past them is refused
    /// ([`Error::Invalid`]); `None` for no bound (a cron's own threads, an operator's).
    pub quota: Option<i64>,
}

/// A thread's time to live: once idle this many minutes, it is deleted, or with `keep_latest`
/// keeps only its latest checkpoint ([`crate::data::retention::expire`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ttl {
    pub minutes: f64,
    pub keep_latest: bool,
}

impl Ttl {
    /// The most minutes a time to live may be: ten years.
    pub const MAX_MINUTES: f64 = 10.0 * 366.0 * 24.0 * 60.0;

    /// A time to live of `minutes` (above 0, at most [`Self::MAX_MINUTES`]) with the strategy the
    /// official server names (`delete`, the default, or `keep_latest`); `None` for anything else.
    pub fn new(minutes: f64, strategy: Option<&str>) -> Option<Self> {
        if !(minutes > 0.0 && minutes <= Self::MAX_MINUTES) {
            return None;
        }
        let keep_latest = match strategy {
            None | Some("delete") => false,
            Some("keep_latest") => true,
            Some(_) => return None,
        };
        Some(Self {
            minutes,
            keep_latest,
        })
    }

    fn strategy(self) -> &'static str {
        if self.keep_latest {
            "keep_latest"
        } else {
            "delete"
        }
    }
}

/// Sets or clears a thread's time to live.
///
/// # Errors
///
/// [`Error::ThreadNotFound`]; the database failed.
pub async fn set_ttl(
    executor: impl PgExecutor<'_>,
    thread_id: ThreadId,
    ttl: Option<Ttl>,
) -> Result {
    let updated = sqlx::query!(
        r#"
        update mostrador.threads
        set ttl_minutes = $2, ttl_strategy = coalesce($3, ttl_strategy), ttl_applied_at = null,
            updated_at = now()
        where thread_id = $1 and deleted_at is null
        "#,
        thread_id.0,
        ttl.map(|ttl| ttl.minutes),
        ttl.map(Ttl::strategy),
    )
    .execute(executor)
    .await?;
    if updated.rows_affected() == 0 {
        return Err(Error::ThreadNotFound(thread_id));
    }
    Ok(())
}

impl NewThread {
    pub fn new(graph_id: impl Into<String>, owner: impl Into<String>) -> Self {
        Self {
            graph_id: Some(graph_id.into()),
            ..Self::unbound(owner)
        }
    }

    /// A thread whose first run will bind it to its graph.
    pub fn unbound(owner: impl Into<String>) -> Self {
        Self {
            graph_id: None,
            owner: owner.into(),
            tenant: None,
            metadata: Value::Object(Default::default()),
            temporary: false,
            ttl: None,
            quota: None,
        }
    }

    pub fn tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }
}

/// The threads of `owner` an assistant ran on (their metadata names it), not deleted.
///
/// # Errors
///
/// The database failed.
pub async fn of_assistant(
    executor: impl PgExecutor<'_>,
    owner: &str,
    assistant_id: Uuid,
) -> Result<Vec<ThreadId>> {
    Ok(sqlx::query_scalar!(
        r#"
        select thread_id as "thread_id: ThreadId"
        from mostrador.threads
        where owner = $1
          and deleted_at is null
          and metadata->>'assistant_id' = $2
        "#,
        owner,
        assistant_id.to_string(),
    )
    .fetch_all(executor)
    .await?)
}

/// Creates a thread with the id its client chose; `None` when a thread (anyone's, deleted or
/// not) has that id already: nothing is taken over.
///
/// # Errors
///
/// [`Error::Invalid`] when the metadata is not an object; a database failure.
pub async fn create_with_id(
    executor: impl PgExecutor<'_>,
    thread_id: Uuid,
    new: &NewThread,
) -> Result<Option<Thread>> {
    check_metadata(&new.metadata)?;
    sqlx::query_as!(
        Thread,
        r#"
        insert into mostrador.threads
            (thread_id, graph_id, owner, tenant, metadata, temporary, ttl_minutes, ttl_strategy)
        select $1, $2, $3, $4, $5, $6, $7, coalesce($8, 'delete')
        where mostrador.hold_thread_quota($3, 1, $9)
        on conflict (thread_id) do nothing
        returning
            thread_id as "thread_id: ThreadId",
            graph_id,
            owner,
            tenant,
            status as "status: ThreadStatus",
            metadata,
            created_at,
            updated_at,
            state_updated_at as "state_updated_at!"
        "#,
        thread_id,
        new.graph_id,
        new.owner,
        new.tenant,
        new.metadata,
        new.temporary,
        new.ttl.map(|ttl| ttl.minutes),
        new.ttl.map(Ttl::strategy),
        new.quota,
    )
    .fetch_optional(executor)
    .await
    .map_err(over_quota)
}

/// A creation the owner's thread quota refused, as [`Error::Invalid`].
fn over_quota(err: sqlx::Error) -> Error {
    match &err {
        sqlx::Error::Database(db) if db.code().as_deref() == Some("MQ001") => Error::Invalid {
            field: "threads",
            reason: db.message().to_owned(),
        },
        _ => err.into(),
    }
}

/// Creates a thread with a fresh UUIDv7.
pub async fn create(executor: impl PgExecutor<'_>, new: &NewThread) -> Result<Thread> {
    let threads = create_many(executor, std::slice::from_ref(new)).await?;
    Ok(threads
        .into_iter()
        .next()
        .expect("one thread inserted for one input"))
}

/// Creates many threads with one statement, in input order.
pub async fn create_many(executor: impl PgExecutor<'_>, news: &[NewThread]) -> Result<Vec<Thread>> {
    let mut thread_ids = Vec::with_capacity(news.len());
    let mut graph_ids = Vec::with_capacity(news.len());
    let mut owners = Vec::with_capacity(news.len());
    let mut tenants = Vec::with_capacity(news.len());
    let mut metadatas = Vec::with_capacity(news.len());
    let mut temporaries = Vec::with_capacity(news.len());
    let mut ttls = Vec::with_capacity(news.len());
    let mut strategies = Vec::with_capacity(news.len());
    for new in news {
        check_metadata(&new.metadata)?;
        thread_ids.push(Uuid::now_v7());
        graph_ids.push(new.graph_id.clone());
        owners.push(new.owner.clone());
        tenants.push(new.tenant.clone());
        metadatas.push(new.metadata.clone());
        temporaries.push(new.temporary);
        ttls.push(new.ttl.map(|ttl| ttl.minutes));
        strategies.push(new.ttl.map_or("delete", Ttl::strategy));
    }
    // Each owner's quota (the tightest any of their threads names), held once for all the
    // threads the statement gives them.
    let mut quota_owners: Vec<&str> = Vec::new();
    let mut adding: Vec<i64> = Vec::new();
    let mut quotas: Vec<Option<i64>> = Vec::new();
    for new in news {
        match quota_owners.iter().position(|owner| *owner == new.owner) {
            Some(at) => {
                adding[at] += 1;
                quotas[at] = match (quotas[at], new.quota) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            None => {
                quota_owners.push(&new.owner);
                adding.push(1);
                quotas.push(new.quota);
            }
        }
    }
    let threads = sqlx::query_as!(
        Thread,
        r#"
        insert into mostrador.threads
            (thread_id, graph_id, owner, tenant, metadata, temporary, ttl_minutes, ttl_strategy)
        select *
        from unnest(
            $1::uuid[], $2::text[], $3::text[], $4::text[], $5::jsonb[], $6::bool[],
            $7::float8[], $8::text[]
        )
        where (
            select bool_and(mostrador.hold_thread_quota(owner, adding, quota))
            from unnest($9::text[], $10::int8[], $11::int8[]) as held (owner, adding, quota)
        )
        returning
            thread_id as "thread_id: ThreadId",
            graph_id,
            owner,
            tenant,
            status as "status: ThreadStatus",
            metadata,
            created_at,
            updated_at,
            state_updated_at as "state_updated_at!"
        "#,
        &thread_ids,
        &graph_ids as &[Option<String>],
        &owners,
        &tenants as &[Option<String>],
        &metadatas,
        &temporaries,
        &ttls as &[Option<f64>],
        &strategies as &[&str],
        &quota_owners as &[&str],
        &adding,
        &quotas as &[Option<i64>],
    )
    .fetch_all(executor)
    .await
    .map_err(over_quota)?;
    Ok(threads)
}

/// Reads a thread that has not been deleted by retention.
///
/// # Errors
///
/// [`Error::ThreadNotFound`].
pub async fn get(executor: impl PgExecutor<'_>, thread_id: ThreadId) -> Result<Thread> {
    sqlx::query_as!(
        Thread,
        r#"
        select
            t.thread_id as "thread_id: ThreadId",
            t.graph_id,
            t.owner,
            t.tenant,
            case
                when exists (
                    select 1
                    from mostrador.runs r
                    where r.thread_id = t.thread_id
                      and r.status in ('pending', 'running')
                ) then 'busy'
                else t.status
            end as "status!: ThreadStatus",
            t.metadata,
            t.created_at,
            t.updated_at,
            coalesce(t.state_updated_at, t.last_activity_at) as "state_updated_at!"
        -- By its id alone (see `crate::db`).
        from (select * from mostrador.threads where thread_id = $1 offset 0) t
        where t.deleted_at is null
        "#,
        thread_id.0
    )
    .fetch_optional(executor)
    .await?
    .ok_or(Error::ThreadNotFound(thread_id))
}

/// Records activity on a thread now, which restarts its retention clock.
///
/// # Errors
///
/// [`Error::ThreadNotFound`].
pub async fn touch(executor: impl PgExecutor<'_>, thread_id: ThreadId) -> Result {
    let res = sqlx::query!(
        r#"
        -- Locked by its id alone, then checked (see `crate::db`).
        with locked as materialized (
            select deleted_at
            from mostrador.threads
            where thread_id = $1
            for no key update
        )
        update mostrador.threads
        set last_activity_at = now(), state_updated_at = now(), updated_at = now()
        where thread_id = $1
          and exists (select 1 from locked where deleted_at is null)
        "#,
        thread_id.0
    )
    .execute(executor)
    .await?;
    if res.rows_affected() == 0 {
        return Err(Error::ThreadNotFound(thread_id));
    }
    Ok(())
}

/// Deletes a thread: its pending runs with it, its running run rolled back by its holder (told on
/// the control channel), its checkpoints and files at once. The row stays, marked deleted (traces and
/// business rows point at it); retention removes the rest.
///
/// # Errors
///
/// [`Error::ThreadNotFound`].
pub async fn delete<'a>(db: impl Acquire<'a, Database = Postgres>, thread_id: ThreadId) -> Result {
    let mut tx = db.begin().await?;
    let deleted = sqlx::query_scalar!(
        r#"
        -- Locked by its id alone, then checked (see `crate::db`).
        with locked as materialized (
            select deleted_at
            from mostrador.threads
            where thread_id = $1
            for no key update
        )
        update mostrador.threads
        set deleted_at = now(),
            updated_at = now()
        where thread_id = $1
          and exists (select 1 from locked where deleted_at is null)
        returning thread_id
        "#,
        thread_id.0
    )
    .fetch_optional(&mut *tx)
    .await?;
    if deleted.is_none() {
        return Err(Error::ThreadNotFound(thread_id));
    }
    let in_flight = sqlx::query_scalar!(
        r#"
        select run_id as "run_id: RunId"
        from mostrador.runs
        where thread_id = $1
          and status in ('pending', 'running')
        "#,
        thread_id.0
    )
    .fetch_all(&mut *tx)
    .await?;
    cancel_in_tx(&mut tx, thread_id, &in_flight, CancelAction::Rollback).await?;
    sqlx::query!(
        r#"
        with writes as (
            delete from mostrador.checkpoint_writes where thread_id = $1
        ),
        blobs as (
            delete from mostrador.checkpoint_blobs where thread_id = $1
        ),
        files as (
            delete from mostrador.thread_files where thread_id = $1
        )
        delete from mostrador.checkpoints where thread_id = $1
        "#,
        thread_id.0
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Merges `metadata` into the thread's (top-level keys replaced).
///
/// # Errors
///
/// [`Error::ThreadNotFound`]; [`Error::Invalid`] for metadata that is not an object.
pub async fn update_metadata(
    executor: impl PgExecutor<'_>,
    thread_id: ThreadId,
    metadata: &Value,
) -> Result<()> {
    check_metadata(metadata)?;
    // The merged metadata is bounded too: many small updates do not grow it without end.
    let done = sqlx::query!(
        r#"
        -- Locked by its id alone, then checked (see `crate::db`).
        with locked as materialized (
            select thread_id, metadata, deleted_at
            from mostrador.threads
            where thread_id = $1
            for update
        ),
        current as (
            select thread_id, metadata || $2 as merged
            from locked
            where deleted_at is null
        ),
        updated as (
            update mostrador.threads t
            set metadata = c.merged,
                updated_at = now()
            from current c
            where t.thread_id = c.thread_id
              and octet_length(c.merged::text) <= $3
            returning 1
        )
        select exists (select 1 from current) as "found!",
               exists (select 1 from updated) as "updated!"
        "#,
        thread_id.0,
        metadata,
        i32::try_from(metadata_max_bytes()).unwrap_or(i32::MAX),
    )
    .fetch_one(executor)
    .await?;
    match (done.found, done.updated) {
        (false, _) => Err(Error::ThreadNotFound(thread_id)),
        (true, false) => Err(Error::Invalid {
            field: "metadata",
            reason: format!(
                "the thread's metadata would be over {} bytes of JSON",
                metadata_max_bytes()
            ),
        }),
        (true, true) => Ok(()),
    }
}
