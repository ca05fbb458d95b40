//! A thread's files: what a deep agent's file tools and sandbox keep, stored beside the thread's
//! checkpoints and never in them.
//!
//! Reads are plain. Writes come from the run that holds the thread and are fenced by its lease,
//! as checkpoints are: a worker that lost the run writes nothing. A thread's files together stay
//! within a limit the worker sets; a write that would pass it changes nothing.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use crate::run::claim::Lease;
use crate::{Error, Result};

/// A file's description, without its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    pub path: String,
    pub size: i64,
    pub is_binary: bool,
    pub created_at: DateTime<Utc>,
    pub modified_at: DateTime<Utc>,
}

/// A file with its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub path: String,
    pub content: Vec<u8>,
    pub is_binary: bool,
    pub created_at: DateTime<Utc>,
    pub modified_at: DateTime<Utc>,
}

impl FileInfo {
    /// As deepagents lists files, with the encoding its `FileData` would have.
    pub fn json(&self) -> Value {
        json!({
            "path": self.path,
            "size": self.size,
            "encoding": encoding(self.is_binary),
            "created_at": self.created_at,
            "modified_at": self.modified_at,
        })
    }
}

impl File {
    /// Its content as text: itself, or base64 for bytes that are not UTF-8 ([`encoding`]).
    pub fn text(&self) -> String {
        if self.is_binary {
            BASE64.encode(&self.content)
        } else {
            String::from_utf8_lossy(&self.content).into_owned()
        }
    }

    /// As deepagents' `FileData` holds it: text, or base64 for bytes that are not.
    pub fn json(&self) -> Value {
        json!({
            "path": self.path,
            "content": self.text(),
            "encoding": encoding(self.is_binary),
            "created_at": self.created_at,
            "modified_at": self.modified_at,
        })
    }
}

/// How a file's content is written as text: `base64` for bytes that are not UTF-8.
pub fn encoding(is_binary: bool) -> &'static str {
    if is_binary { "base64" } else { "utf-8" }
}

/// A file to write, created or replaced whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    pub path: String,
    pub content: Vec<u8>,
    pub is_binary: bool,
}

/// The files at `under` or below it (`/` for all), by path.
///
/// # Errors
///
/// The database failed.
pub async fn list(
    executor: impl PgExecutor<'_>,
    thread_id: Uuid,
    under: &str,
) -> Result<Vec<FileInfo>> {
    let (exact, prefix) = scope(under);
    let found = sqlx::query_as!(
        FileInfo,
        r#"
        select path, octet_length(content)::int8 as "size!", is_binary, created_at, modified_at
        from mostrador.thread_files
        where thread_id = $1
          and (path = $2 or starts_with(path, $3))
        order by path
        "#,
        thread_id,
        exact,
        prefix,
    )
    .fetch_all(executor)
    .await?;
    Ok(found)
}

/// The files at `under` or below it, with their contents (what a search or a sandbox reads).
///
/// # Errors
///
/// The database failed.
pub async fn read_under(
    executor: impl PgExecutor<'_>,
    thread_id: Uuid,
    under: &str,
) -> Result<Vec<File>> {
    let (exact, prefix) = scope(under);
    let found = sqlx::query_as!(
        File,
        r#"
        select path, content, is_binary, created_at, modified_at
        from mostrador.thread_files
        where thread_id = $1
          and (path = $2 or starts_with(path, $3))
        order by path
        "#,
        thread_id,
        exact,
        prefix,
    )
    .fetch_all(executor)
    .await?;
    Ok(found)
}

/// One file, if the thread has it.
///
/// # Errors
///
/// The database failed.
pub async fn read(
    executor: impl PgExecutor<'_>,
    thread_id: Uuid,
    path: &str,
) -> Result<Option<File>> {
    let found = sqlx::query_as!(
        File,
        r#"
        select path, content, is_binary, created_at, modified_at
        from mostrador.thread_files
        where thread_id = $1 and path = $2
        "#,
        thread_id,
        path,
    )
    .fetch_optional(executor)
    .await?;
    Ok(found)
}

/// What a fenced write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// Files deleted (the paths named and everything below them).
    pub deleted: u64,
    /// The thread's files' bytes after the write.
    pub total_bytes: i64,
}

/// Writes `files` and deletes `deleted` (each path and everything below it) in one transaction,
/// while `lease` holds the thread's run, unless the thread's files would then pass `limit_bytes`.
///
/// # Errors
///
/// [`Error::LeaseLost`] or [`Error::Invalid`] (over the limit, or a path that is not absolute):
/// nothing was written.
pub async fn write(
    pool: &PgPool,
    lease: &Lease,
    thread_id: Uuid,
    files: &[NewFile],
    deleted: &[String],
    limit_bytes: i64,
) -> Result<Written> {
    for path in files.iter().map(|f| &f.path).chain(deleted) {
        check_path(path)?;
    }
    let mut tx = pool.begin().await?;
    // The thread's row first, as every statement that changes a thread's rows and its runs' takes
    // it (and so that the writes of one thread, parallel tool calls, are counted against the limit
    // one after the other); then the run's, as every fenced write takes it.
    sqlx::query!(
        "select 1 as one from mostrador.threads where thread_id = $1 for no key update",
        thread_id
    )
    .fetch_optional(&mut *tx)
    .await?;
    let held = sqlx::query_scalar!(
        r#"
        -- The status checked on the locked row (see `crate::db`).
        with fence as materialized (
            select status
            from mostrador.runs
            where run_id = $1 and attempt = $2 and thread_id = $3
            for key share
        )
        select exists (select 1 from fence where status = 'running') as "held!"
        "#,
        lease.run_id.0,
        lease.attempt,
        thread_id,
    )
    .fetch_one(&mut *tx)
    .await?;
    if !held {
        return Err(Error::LeaseLost {
            run_id: lease.run_id,
            attempt: lease.attempt,
        });
    }
    let patterns: Vec<String> = deleted.iter().map(|p| below(p)).collect();
    let removed = sqlx::query!(
        r#"
        delete from mostrador.thread_files
        where thread_id = $1
          and (
              path = any($2)
              or exists (select 1 from unnest($3::text[]) as p(prefix) where starts_with(path, prefix))
          )
        "#,
        thread_id,
        deleted,
        &patterns,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let contents: Vec<&[u8]> = files.iter().map(|f| f.content.as_slice()).collect();
    let binary: Vec<bool> = files.iter().map(|f| f.is_binary).collect();
    sqlx::query!(
        r#"
        insert into mostrador.thread_files (thread_id, path, content, is_binary)
        select $1, path, content, is_binary
        from unnest($2::text[], $3::bytea[], $4::bool[]) as f(path, content, is_binary)
        on conflict (thread_id, path) do update
        set content = excluded.content,
            is_binary = excluded.is_binary,
            modified_at = now()
        "#,
        thread_id,
        &paths as &[&str],
        &contents as &[&[u8]],
        &binary,
    )
    .execute(&mut *tx)
    .await?;
    let total_bytes = total(&mut *tx, thread_id).await?;
    if total_bytes > limit_bytes {
        return Err(Error::Invalid {
            field: "files",
            reason: format!(
                "the thread's files would take {total_bytes} bytes, over its limit of {limit_bytes}"
            ),
        });
    }
    tx.commit().await?;
    Ok(Written {
        deleted: removed,
        total_bytes,
    })
}

/// The bytes of a thread's files.
///
/// # Errors
///
/// The database failed.
pub async fn total(executor: impl PgExecutor<'_>, thread_id: Uuid) -> Result<i64> {
    let total = sqlx::query_scalar!(
        r#"
        select coalesce(sum(octet_length(content)), 0)::int8 as "total!"
        from mostrador.thread_files
        where thread_id = $1
        "#,
        thread_id
    )
    .fetch_one(executor)
    .await?;
    Ok(total)
}

/// Gives the thread `to` a copy of every file of `from`.
///
/// # Errors
///
/// The database failed.
pub async fn copy(executor: impl PgExecutor<'_>, from: Uuid, to: Uuid) -> Result {
    sqlx::query!(
        r#"
        insert into mostrador.thread_files
            (thread_id, path, content, is_binary, created_at, modified_at)
        select $2, path, content, is_binary, created_at, modified_at
        from mostrador.thread_files
        where thread_id = $1
        "#,
        from,
        to,
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// A path as deepagents names files: absolute, without `..` segments or NUL characters.
fn check_path(path: &str) -> Result {
    let valid = path.starts_with('/')
        && path.len() <= 4096
        && !path.contains('\0')
        && !path.split('/').any(|segment| segment == "..");
    if valid {
        Ok(())
    } else {
        Err(Error::Invalid {
            field: "path",
            reason: format!("{path:?} is not an absolute path without `..`"),
        })
    }
}

/// The path itself and the prefix of everything below it.
fn scope(under: &str) -> (&str, String) {
    (under, below(under))
}

fn below(path: &str) -> String {
    format!("{}/", path.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_scopes_itself_and_what_is_below_it() {
        assert_eq!(scope("/"), ("/", "/".to_owned()));
        assert_eq!(scope("/a/b/"), ("/a/b/", "/a/b/".to_owned()));
        assert_eq!(scope("/a/b"), ("/a/b", "/a/b/".to_owned()));
    }

    #[test]
    fn only_absolute_paths_without_parent_segments_are_written() {
        for good in ["/a", "/a/b.txt", "/.hidden", "/a..b"] {
            assert!(check_path(good).is_ok(), "{good}");
        }
        for bad in ["a", "", "/a/../b", "/..", "/a\0b"] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
    }
}
