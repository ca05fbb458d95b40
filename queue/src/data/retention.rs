//! Retention: whole threads idle longer than their graph's policy (`retention_policies`, data an
//! operator edits) are deleted: runs, events, checkpoints, blobs, writes and files, one thread per
//! transaction. The thread's row stays, marked `deleted_at` and `purged_at`, so traces and
//! business rows that point at it still resolve. Threads the api deleted are purged the same way.
//!
//! Candidates come from the index `threads_retention_idx (graph_id, last_activity_at,
//! thread_id)` in bounded, keyset-paginated batches (a range scan that stops at the batch's
//! limit), never from a scan or from JSON. A thread with a pending or
//! running run is skipped: retention takes the thread's row lock, which enqueueing takes too, and
//! checks under it. A thread waiting on an interrupt (a human's approval) is not idle: retention
//! spares it; only its own time to live or the api deletes it.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::{Error, Result};

/// A retention policy: threads of `graph_id` idle longer than `days` go. `_unbound` is the
/// policy of threads that never ran (they have no graph).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub graph_id: String,
    pub days: i32,
}

/// The graph id of the policy for threads without a graph.
pub const UNBOUND: &str = "_unbound";

/// The graph id of the policy for graphs without one of their own (Python graphs).
pub const DEFAULT: &str = "_default";

/// A thread retention may delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub thread_id: Uuid,
    pub graph_id: Option<String>,
    pub last_activity_at: DateTime<Utc>,
}

/// Where the next batch starts: after this `(last_activity_at, thread_id)`.
pub type Cursor = Option<(DateTime<Utc>, Uuid)>;

/// The policies, of one graph or of all: each graph's own, and `_default`'s for every graph
/// with threads and no policy of its own (in place of the `_default` row itself).
///
/// # Errors
///
/// The database failed.
pub async fn policies(pool: &PgPool, graph_id: Option<&str>) -> Result<Vec<Policy>> {
    let mut policies = sqlx::query_as!(
        Policy,
        r#"
        select graph_id, days
        from mostrador.retention_policies
        where $1::text is null or graph_id = $1 or graph_id = '_default'
        order by graph_id
        "#,
        graph_id
    )
    .fetch_all(pool)
    .await?;
    let Some(at) = policies
        .iter()
        .position(|policy| policy.graph_id == DEFAULT)
    else {
        return Ok(policies);
    };
    let default = policies.remove(at);
    let unpoliced = match graph_id {
        Some(graph_id) if policies.is_empty() => vec![graph_id.to_owned()],
        Some(_) => Vec::new(),
        None => unpoliced_graphs(pool).await?,
    };
    policies.extend(unpoliced.into_iter().map(|graph_id| Policy {
        graph_id,
        days: default.days,
    }));
    Ok(policies)
}

/// The graphs that have threads and no policy of their own, found by skipping through the
/// retention index one graph at a time (a loose index scan: as many probes as graphs, never a
/// scan of the threads).
async fn unpoliced_graphs(pool: &PgPool) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar!(
        r#"
        with recursive graphs as (
            (
                select graph_id
                from mostrador.threads
                where deleted_at is null
                  and graph_id is not null
                order by graph_id
                limit 1
            )
            union all
            select (
                select t.graph_id
                from mostrador.threads t
                where t.deleted_at is null
                  and t.graph_id > g.graph_id
                order by t.graph_id
                limit 1
            )
            from graphs g
            where g.graph_id is not null
        )
        select graph_id as "graph_id!"
        from graphs
        where graph_id is not null
          and graph_id not in (select graph_id from mostrador.retention_policies)
        "#
    )
    .fetch_all(pool)
    .await?)
}

/// Up to `limit` threads of `policy` idle longer than its days, after `cursor`, oldest first;
/// not those waiting on an interrupt (see [`Because::Idle`]).
///
/// # Errors
///
/// The database failed.
pub async fn idle(
    pool: &PgPool,
    policy: &Policy,
    cursor: Cursor,
    limit: i64,
) -> Result<Vec<Candidate>> {
    let (after_at, after_id) = cursor.unwrap_or((DateTime::<Utc>::UNIX_EPOCH, Uuid::nil()));
    let graph_id = (policy.graph_id != UNBOUND).then_some(policy.graph_id.as_str());
    // N.B. Two spellings of one range scan on `threads_retention_idx`: `graph_id = $1` and
    // `graph_id is null` (a generic plan cannot pick between them from one `is not distinct`).
    let rows = if let Some(graph_id) = graph_id {
        sqlx::query_as!(
            Candidate,
            r#"
            select thread_id, graph_id, last_activity_at
            from mostrador.threads
            where graph_id = $1
              and deleted_at is null
              and status <> 'interrupted'
              and last_activity_at < now() - make_interval(days => $2)
              and (last_activity_at, thread_id) > ($3, $4)
            order by last_activity_at, thread_id
            limit $5
            "#,
            graph_id,
            policy.days,
            after_at,
            after_id,
            limit
        )
        .fetch_all(pool)
        .await?
    } else {
        sqlx::query_as!(
            Candidate,
            r#"
            select thread_id, graph_id, last_activity_at
            from mostrador.threads
            where graph_id is null
              and deleted_at is null
              and status <> 'interrupted'
              and last_activity_at < now() - make_interval(days => $1)
              and (last_activity_at, thread_id) > ($2, $3)
            order by last_activity_at, thread_id
            limit $4
            "#,
            policy.days,
            after_at,
            after_id,
            limit
        )
        .fetch_all(pool)
        .await?
    };
    Ok(rows)
}

/// Up to `limit` threads the api deleted whose runs, events and checkpoints are still there,
/// after `cursor`.
///
/// # Errors
///
/// The database failed.
pub async fn deleted_unpurged(pool: &PgPool, cursor: Cursor, limit: i64) -> Result<Vec<Candidate>> {
    let (after_at, after_id) = cursor.unzip();
    Ok(sqlx::query_as!(
        Candidate,
        r#"
        select thread_id, graph_id, deleted_at as "last_activity_at!"
        from mostrador.threads
        where deleted_at is not null and purged_at is null
          and ($1::timestamptz is null or (deleted_at, thread_id) > ($1, $2::uuid))
        order by deleted_at, thread_id
        limit $3
        "#,
        after_at,
        after_id,
        limit
    )
    .fetch_all(pool)
    .await?)
}

/// The rows one thread's deletion removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deleted {
    pub runs: i64,
    pub events: i64,
    pub checkpoints: i64,
    pub blobs: i64,
    pub writes: i64,
}

impl std::ops::AddAssign for Deleted {
    fn add_assign(&mut self, other: Self) {
        self.runs += other.runs;
        self.events += other.events;
        self.checkpoints += other.checkpoints;
        self.blobs += other.blobs;
        self.writes += other.writes;
    }
}

/// Why a thread goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Because {
    /// The api deleted it.
    Deleted,
    /// Idle since before this time, past its graph's policy: an operator's rule, which spares a
    /// thread waiting on a human's answer (an approval may wait longer than any policy).
    Idle(DateTime<Utc>),
    /// Idle since before this time, past its own time to live: the client's rule, which holds
    /// whatever the thread waits on.
    Expired(DateTime<Utc>),
}

/// Deletes one thread whole, in one transaction; `None` (and nothing changed) when it has a
/// pending or running run, is no longer idle past the time it was listed with (a run touched
/// it since), or waits on an interrupt and goes only for being idle.
///
/// # Errors
///
/// The database failed.
pub async fn delete_thread(
    pool: &PgPool,
    thread_id: Uuid,
    because: Because,
) -> Result<Option<Deleted>> {
    let (idle_before, spare_waiting) = match because {
        Because::Deleted => (None, false),
        Because::Idle(at) => (Some(at), true),
        Because::Expired(at) => (Some(at), false),
    };
    let mut tx = pool.begin().await?;
    let deletable = sqlx::query_scalar!(
        r#"
        select not exists (
                select 1 from mostrador.runs r
                where r.thread_id = t.thread_id and r.status in ('pending', 'running')
            ) and ($2::timestamptz is null or t.deleted_at is not null or t.last_activity_at <= $2)
            and not ($3 and t.deleted_at is null and t.status = 'interrupted')
            as "deletable!"
        from mostrador.threads t
        where t.thread_id = $1 and t.purged_at is null
        for update of t
        "#,
        thread_id,
        idle_before,
        spare_waiting
    )
    .fetch_optional(&mut *tx)
    .await?;
    if deletable != Some(true) {
        return Ok(None);
    }
    let counts = sqlx::query_file!("queries/delete_thread.sql", thread_id)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Some(Deleted {
        runs: counts.runs,
        events: counts.events,
        checkpoints: counts.checkpoints,
        blobs: counts.blobs,
        writes: counts.writes,
    }))
}

/// What one pass of retention does.
#[derive(Debug, Clone, Default)]
pub struct Sweep {
    /// Only this graph's policy (and not the purge of threads the api deleted).
    pub graph: Option<String>,
    /// Threads read per statement.
    pub batch: i64,
    /// List, delete nothing.
    pub dry_run: bool,
}

/// What a pass did (or, dry, would do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    pub deleted: u64,
    /// Busy (a pending or running run), touched since listed, or waiting on an interrupt.
    pub skipped: u64,
    pub rows: Deleted,
}

/// What a pass over expired times to live did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expired {
    /// Threads deleted whole.
    pub deleted: u64,
    /// Threads pruned to their latest checkpoint (`keep_latest`).
    pub pruned: u64,
}

/// Applies the times to live that expired (threads idle `ttl_minutes` or more), up to `limit`
/// threads, longest idle first: a `delete` thread is deleted whole (as retention deletes one,
/// skipped while it has a run pending or running, or was touched since it was listed); a
/// `keep_latest` one keeps only its latest checkpoint, once until its next activity. Safe on
/// every worker at once.
///
/// # Errors
///
/// The database failed.
pub async fn expire(pool: &PgPool, limit: i64) -> Result<Expired> {
    let due = sqlx::query!(
        r#"
        select thread_id, last_activity_at, ttl_strategy = 'keep_latest' as "keep_latest!"
        from mostrador.threads
        where ttl_minutes is not null
          and deleted_at is null
          and last_activity_at < now() - make_interval(secs => ttl_minutes * 60)
          and (ttl_applied_at is null or ttl_applied_at < last_activity_at)
        order by last_activity_at, thread_id
        limit $1
        "#,
        limit,
    )
    .fetch_all(pool)
    .await?;
    let mut expired = Expired::default();
    for thread in due {
        if !thread.keep_latest {
            if delete_thread(
                pool,
                thread.thread_id,
                Because::Expired(thread.last_activity_at),
            )
            .await?
            .is_some()
            {
                expired.deleted += 1;
            }
            continue;
        }
        // As `POST /threads/prune` with `keep_latest` (a value goes only when no kept
        // checkpoint names it).
        crate::state::checkpoint::prune(pool, thread.thread_id, 1).await?;
        sqlx::query!(
            "update mostrador.threads set ttl_applied_at = now() where thread_id = $1",
            thread.thread_id,
        )
        .execute(pool)
        .await?;
        expired.pruned += 1;
    }
    Ok(expired)
}

/// One pass: every policy's idle threads, then threads the api deleted, in batches of
/// `sweep.batch`; `dry` sees each thread a dry run would delete.
///
/// # Errors
///
/// [`Error::Invalid`] for a graph without a policy or a batch outside 1..=10,000; the database
/// failed.
pub async fn sweep(
    pool: &PgPool,
    sweep: &Sweep,
    mut dry: impl FnMut(&Candidate),
) -> Result<Report> {
    if !(1..=10_000).contains(&sweep.batch) {
        return Err(Error::Invalid {
            field: "batch",
            reason: "must be from 1 to 10,000".into(),
        });
    }
    let policies = policies(pool, sweep.graph.as_deref()).await?;
    if let (Some(graph), true) = (&sweep.graph, policies.is_empty()) {
        return Err(Error::Invalid {
            field: "graph",
            reason: format!("no retention policy for {graph:?} (see mostrador.retention_policies)"),
        });
    }
    let mut report = Report::default();
    for policy in &policies {
        let mut cursor: Cursor = None;
        loop {
            let batch = idle(pool, policy, cursor, sweep.batch).await?;
            for candidate in &batch {
                let because = Because::Idle(candidate.last_activity_at);
                apply(pool, sweep, candidate, because, &mut report, &mut dry).await?;
            }
            match next(&batch, sweep.batch) {
                Some(after) => cursor = Some(after),
                None => break,
            }
        }
    }
    if sweep.graph.is_none() {
        let mut cursor: Cursor = None;
        loop {
            let batch = deleted_unpurged(pool, cursor, sweep.batch).await?;
            for candidate in &batch {
                apply(
                    pool,
                    sweep,
                    candidate,
                    Because::Deleted,
                    &mut report,
                    &mut dry,
                )
                .await?;
            }
            match next(&batch, sweep.batch) {
                Some(after) => cursor = Some(after),
                None => break,
            }
        }
    }
    Ok(report)
}

async fn apply(
    pool: &PgPool,
    sweep: &Sweep,
    candidate: &Candidate,
    because: Because,
    report: &mut Report,
    dry: &mut impl FnMut(&Candidate),
) -> Result<()> {
    if sweep.dry_run {
        dry(candidate);
        report.deleted += 1;
        return Ok(());
    }
    match delete_thread(pool, candidate.thread_id, because).await? {
        Some(rows) => {
            report.deleted += 1;
            report.rows += rows;
        }
        None => report.skipped += 1,
    }
    Ok(())
}

/// The cursor after a full batch; `None` after the last one.
fn next(batch: &[Candidate], limit: i64) -> Cursor {
    let last = batch.last()?;
    (batch.len() as i64 == limit).then_some((last.last_activity_at, last.thread_id))
}
