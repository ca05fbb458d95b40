//! Finding threads: who sees which ([`Visibility`]), and searching and counting them with
//! filters and a sort.

use serde_json::Value;
use sqlx::PgExecutor;
use uuid::Uuid;

use super::{Thread, ThreadId, ThreadStatus};
use crate::{Error, Result};

/// Who may see which threads, as [`search`] filters them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visibility {
    /// Threads this subject owns; `None`: every thread (a project's auth handlers decide, with
    /// [`Visibility::auth_filter`]).
    pub owner: Option<String>,
    /// And the threads of this tenant, where the authorization policy lets the caller's roles
    /// read their tenant's threads.
    pub tenant: Option<String>,
    /// Of these graphs only; `None`: of every graph (threads no run has bound yet included).
    pub tenant_graphs: Option<Vec<String>>,
    /// And whose metadata passes this filter of a project's auth handler
    /// (`mostrador.auth_admits`).
    pub auth_filter: Option<Value>,
}

impl Visibility {
    /// Its owner's threads only.
    pub fn owner(owner: impl Into<String>) -> Self {
        Self {
            owner: Some(owner.into()),
            tenant: None,
            tenant_graphs: None,
            auth_filter: None,
        }
    }

    /// Every thread whose metadata passes `filter` (all of them without one): what a project's
    /// auth handlers let a caller see.
    pub fn filtered(filter: Option<Value>) -> Self {
        Self {
            owner: None,
            tenant: None,
            tenant_graphs: None,
            auth_filter: filter,
        }
    }
}

/// What [`search`] looks for, newest first.
#[derive(Debug, Clone)]
pub struct ThreadSearch {
    pub visible_to: Visibility,
    /// Threads whose metadata contains this object.
    pub metadata: Option<Value>,
    /// Threads whose values (their latest state's) contain this object.
    pub values: Option<Value>,
    pub status: Option<ThreadStatus>,
    pub ids: Option<Vec<ThreadId>>,
    pub limit: i64,
    pub offset: i64,
    pub sort: ThreadSort,
}

/// The order of a thread search (newest first by default), as the official server's `sort_by`
/// and `sort_order` name it; ties go by thread id the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadSort {
    pub by: ThreadSortKey,
    pub ascending: bool,
}

impl Default for ThreadSort {
    fn default() -> Self {
        Self {
            by: ThreadSortKey::CreatedAt,
            ascending: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadSortKey {
    ThreadId,
    Status,
    CreatedAt,
    UpdatedAt,
    /// The last activity of its runs.
    StateUpdatedAt,
}

impl ThreadSortKey {
    pub const ALL: [Self; 5] = [
        Self::ThreadId,
        Self::Status,
        Self::CreatedAt,
        Self::UpdatedAt,
        Self::StateUpdatedAt,
    ];

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|key| key.as_str() == name)
    }

    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ThreadId => "thread_id",
            Self::Status => "status",
            Self::CreatedAt => "created_at",
            Self::UpdatedAt => "updated_at",
            Self::StateUpdatedAt => "state_updated_at",
        }
    }
}

/// The visible threads that match, in the search's order.
///
/// # Errors
///
/// [`Error::Invalid`] for a limit outside 1..=1000, a negative offset or metadata or values that
/// are not objects.
pub async fn search(executor: impl PgExecutor<'_>, search: &ThreadSearch) -> Result<Vec<Thread>> {
    Ok(search_page(executor, search).await?.0)
}

/// [`search`], and whether more threads match after its page (one more is read to tell).
///
/// # Errors
///
/// As [`search`].
pub async fn search_page(
    executor: impl PgExecutor<'_>,
    search: &ThreadSearch,
) -> Result<(Vec<Thread>, bool)> {
    if !(1..=1000).contains(&search.limit) || search.offset < 0 {
        return Err(Error::Invalid {
            field: "limit",
            reason: "limit must be between 1 and 1000 and offset at least 0".into(),
        });
    }
    objects(search)?;
    let ids: Option<Vec<Uuid>> = search
        .ids
        .as_ref()
        .map(|ids| ids.iter().map(|id| id.0).collect());
    let threads = sqlx::query_file_as!(
        Thread,
        "queries/search_threads.sql",
        search.visible_to.owner,
        search.visible_to.tenant,
        search.metadata,
        ids.as_deref(),
        search.status as Option<ThreadStatus>,
        search.limit + 1,
        search.offset,
        search.sort.by.as_str(),
        search.sort.ascending,
        search.visible_to.tenant_graphs.as_deref(),
        search.values,
        search.visible_to.auth_filter,
    )
    .fetch_all(executor)
    .await?;
    let mut threads = threads;
    let more = threads.len() > usize::try_from(search.limit).unwrap_or(usize::MAX);
    threads.truncate(usize::try_from(search.limit).unwrap_or(usize::MAX));
    Ok((threads, more))
}

/// The search's `metadata` and `values`, when given, are objects.
fn objects(search: &ThreadSearch) -> Result {
    for (field, filter) in [("metadata", &search.metadata), ("values", &search.values)] {
        if filter.as_ref().is_some_and(|filter| !filter.is_object()) {
            return Err(Error::Invalid {
                field,
                reason: format!("{field} must be a JSON object"),
            });
        }
    }
    Ok(())
}

/// How many visible threads match (the search's limit, offset and order aside).
///
/// # Errors
///
/// [`Error::Invalid`] for metadata or values that are not objects.
pub async fn count(executor: impl PgExecutor<'_>, search: &ThreadSearch) -> Result<i64> {
    objects(search)?;
    let ids: Option<Vec<Uuid>> = search
        .ids
        .as_ref()
        .map(|ids| ids.iter().map(|id| id.0).collect());
    Ok(sqlx::query_scalar!(
        r#"
        select count(*) as "count!"
        from mostrador.threads t
        where t.deleted_at is null
          and ($1::text is null or t.owner = $1 or ($2::text is not null and t.tenant = $2
              and ($6::text[] is null or t.graph_id = any($6))))
          and ($8::jsonb is null or mostrador.auth_admits(t.metadata, $8))
          and ($3::jsonb is null or t.metadata @> $3)
          and ($4::uuid[] is null or t.thread_id = any($4))
          and ($7::jsonb is null or mostrador.thread_values(t.thread_id) @> $7)
          and (
              $5::mostrador.thread_status is null
              or $5 = case
                  when exists (
                      select 1
                      from mostrador.runs r
                      where r.thread_id = t.thread_id
                        and r.status in ('pending', 'running')
                  ) then 'busy'
                  else t.status
              end
          )
        "#,
        search.visible_to.owner,
        search.visible_to.tenant,
        search.metadata,
        ids.as_deref(),
        search.status as Option<ThreadStatus>,
        search.visible_to.tenant_graphs.as_deref(),
        search.values,
        search.visible_to.auth_filter,
    )
    .fetch_one(executor)
    .await?)
}
