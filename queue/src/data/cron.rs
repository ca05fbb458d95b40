//! Scheduled runs. A cron is a run template (graph, payload, thread or not) and a five-field
//! schedule, read in UTC or in the IANA time zone it names. Workers call [`tick`] every few seconds; one of them at a time wins the scheduler's
//! transaction-scoped advisory lock and, in that same transaction, enqueues one run per due cron
//! and moves each cron's `next_run_at` past now. So however many workers tick, each tick of a
//! cron enqueues exactly one run; ticks missed while no worker ran are caught up by one run, not
//! by a burst.

mod schedule;

use chrono::{DateTime, Utc};
use mostrador_graph::StreamMode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use crate::data::api_keys::ApiKeyId;
use crate::run::enqueue::{QueueLimit, enqueue_on};
use crate::run::{MultitaskStrategy, NewRun, RunConfig};
use crate::thread::{self, NewThread, ThreadId};
use crate::{Error, Result};

pub use schedule::{Schedule, zone};

/// The advisory lock key of the scheduler ("mostrador cron" in ASCII, folded into an i64).
const SCHEDULER_LOCK: i64 = 0x6d6f_7374_6372_6f6e;

/// Due crons handled per tick at most (the rest wait for the next tick).
const TICK_BATCH: i64 = 100;

/// What each run of a cron is made of, stored as the cron's `payload` (the official server's
/// name, which clients read). What is `None` the run does not set: its graph's or its assistant's
/// holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunTemplate {
    /// Written `null` when none, as the official server writes it.
    #[serde(default)]
    pub input: Option<Value>,
    /// The runs' config, acting for the cron's maker; its assistant's (as it is at each run)
    /// under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<RunConfig>,
    /// The runs' own context, over their assistant's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Map<String, Value>>,
    /// The runs' metadata (each run adds its `cron_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// None: `enqueue`. Written `null` when none, as the official server writes it.
    #[serde(default)]
    pub multitask_strategy: Option<MultitaskStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_mode: Option<Vec<StreamMode>>,
    /// Where each run's end is announced; checked against the allow-list when the cron was made,
    /// and again by the sender.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// An assistant its maker created, whose config each run takes as it is then; none: the
    /// graph's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_id: Option<Uuid>,
}

impl RunTemplate {
    /// Reads a template as stored.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`]: a key holds what a run cannot take.
    pub fn from_value(payload: Value) -> Result<Self> {
        serde_json::from_value(payload).map_err(|err| Error::Invalid {
            field: "payload",
            reason: err.to_string(),
        })
    }

    /// As stored and shown.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a template is JSON: string keys, JSON values")
    }

    /// This template with what `change` sets over it.
    #[must_use]
    pub fn with(self, change: RunTemplate) -> Self {
        Self {
            input: change.input.or(self.input),
            config: change.config.or(self.config),
            context: change.context.or(self.context),
            metadata: change.metadata.or(self.metadata),
            multitask_strategy: change.multitask_strategy.or(self.multitask_strategy),
            stream_mode: change.stream_mode.or(self.stream_mode),
            webhook: change.webhook.or(self.webhook),
            assistant_id: change.assistant_id.or(self.assistant_id),
        }
    }
}

/// A cron as the `langgraph-sdk` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Cron {
    pub cron_id: Uuid,
    pub graph_id: String,
    pub thread_id: Option<Uuid>,
    pub owner: String,
    pub tenant: Option<String>,
    pub schedule: String,
    /// The IANA time zone the schedule is read in; `None`: UTC.
    pub timezone: Option<String>,
    /// Its [`RunTemplate`] as stored: what each run is made of.
    pub payload: Value,
    pub metadata: Value,
    pub on_run_completed: String,
    pub enabled: bool,
    pub end_time: Option<DateTime<Utc>>,
    pub next_run_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What a caller decides about a new cron.
#[derive(Debug, Clone)]
pub struct NewCron {
    pub graph_id: String,
    pub thread_id: Option<ThreadId>,
    pub owner: String,
    pub tenant: Option<String>,
    pub schedule: String,
    pub timezone: Option<String>,
    pub payload: RunTemplate,
    pub metadata: Value,
    pub enabled: bool,
    pub end_time: Option<DateTime<Utc>>,
    /// `delete`: a stateless cron's thread goes when its run ends; `keep`.
    pub on_run_completed: String,
    /// The API key its maker called with, if they did: the cron stops when it is revoked or
    /// expires.
    pub api_key: Option<ApiKeyId>,
}

/// Creates a cron; its first run is at the schedule's next minute.
///
/// # Errors
///
/// [`Error::Invalid`] for a schedule that does not parse or never fires, an unknown time zone,
/// metadata that is not an object, or an owner who has `max_per_owner` crons already
/// (enabled or not: a disabled one is enabled again without asking).
pub async fn create(
    executor: impl PgExecutor<'_>,
    new: &NewCron,
    max_per_owner: i64,
) -> Result<Cron> {
    let schedule = Schedule::parse(&new.schedule).map_err(|reason| Error::Invalid {
        field: "schedule",
        reason,
    })?;
    if !new.metadata.is_object() {
        return Err(Error::Invalid {
            field: "metadata",
            reason: "must be an object".into(),
        });
    }
    let zone = zone(new.timezone.as_deref()).map_err(|reason| Error::Invalid {
        field: "timezone",
        reason,
    })?;
    let next_run_at = schedule
        .next_after(Utc::now(), zone)
        .expect("a parsed schedule fires");
    // The owner's crons, enabled or not, are counted without a lock: concurrent creations can
    // pass the bound by about as many as run at once, as the queue's limit can.
    let created = sqlx::query_as!(
        Cron,
        r#"
        insert into mostrador.crons
            (cron_id, graph_id, thread_id, owner, tenant, schedule, payload, metadata, enabled,
             end_time, next_run_at, timezone, on_run_completed, api_key_id)
        select $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $13, $14, $15
        where (
            select count(*) from mostrador.crons where owner = $4
        ) < $12
        returning cron_id, graph_id, thread_id, owner, tenant, schedule, timezone, payload,
            metadata, on_run_completed, enabled, end_time, next_run_at, created_at, updated_at
        "#,
        Uuid::now_v7(),
        new.graph_id,
        new.thread_id.map(|id| id.0),
        new.owner,
        new.tenant,
        new.schedule
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        new.payload.to_value(),
        new.metadata,
        new.enabled,
        new.end_time,
        next_run_at,
        max_per_owner,
        new.timezone,
        new.on_run_completed,
        new.api_key.map(|key| key.0),
    )
    .fetch_optional(executor)
    .await?;
    created.ok_or_else(|| Error::Invalid {
        field: "crons",
        reason: format!("a caller has at most {max_per_owner} crons: delete one first"),
    })
}

/// Which assistant's crons a search asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfAssistant {
    /// A graph's own assistant: the graph's crons not on an assistant a caller created.
    Graph(String),
    /// An assistant a caller created (the crons whose payload names it).
    Created(Uuid),
}

/// What a search of a caller's crons asks for, besides its page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CronFilter {
    pub assistant: Option<OfAssistant>,
    pub thread_id: Option<Uuid>,
    pub enabled: Option<bool>,
    /// Crons whose metadata contains this object's keys and values.
    pub metadata: Option<Value>,
    /// Crons whose metadata passes this filter of a project's auth handler
    /// (`mostrador.auth_admits`).
    pub auth_filter: Option<Value>,
}

impl CronFilter {
    /// The assistant as the statements filter by it: a graph id, or a created assistant's id.
    fn assistant_columns(&self) -> (Option<&str>, Option<String>) {
        match &self.assistant {
            None => (None, None),
            Some(OfAssistant::Graph(graph_id)) => (Some(graph_id), None),
            Some(OfAssistant::Created(assistant_id)) => (None, Some(assistant_id.to_string())),
        }
    }
}

/// A caller's crons (optionally of one assistant, one thread, enabled or not, with some
/// metadata), oldest first.
///
/// # Errors
///
/// [`Error::Invalid`] for a limit outside 1..=1000 or a negative offset.
pub async fn search(
    executor: impl PgExecutor<'_>,
    owner: Option<&str>,
    filter: &CronFilter,
    limit: i64,
    offset: i64,
) -> Result<Vec<Cron>> {
    let (graph_id, created) = filter.assistant_columns();
    if !(1..=1000).contains(&limit) || offset < 0 {
        return Err(Error::Invalid {
            field: "limit",
            reason: "limit must be from 1 to 1000 and offset not negative".into(),
        });
    }
    Ok(sqlx::query_as!(
        Cron,
        r#"
        select cron_id, graph_id, thread_id, owner, tenant, schedule, timezone, payload,
            metadata, on_run_completed, enabled, end_time, next_run_at, created_at, updated_at
        from mostrador.crons
        where ($1::text is null or owner = $1)
          and ($2::text is null or (graph_id = $2 and payload->>'assistant_id' is null))
          and ($7::text is null or payload->>'assistant_id' = $7)
          and ($3::uuid is null or thread_id = $3)
          and ($4::boolean is null or enabled = $4)
          and ($8::jsonb is null or metadata @> $8)
          and ($9::jsonb is null or mostrador.auth_admits(metadata, $9))
        order by created_at, cron_id
        limit $5 offset $6
        "#,
        owner,
        graph_id,
        filter.thread_id,
        filter.enabled,
        limit,
        offset,
        created,
        filter.metadata,
        filter.auth_filter,
    )
    .fetch_all(executor)
    .await?)
}

/// How many crons of `owner` [`search`] finds.
///
/// # Errors
///
/// The database failed.
pub async fn count(
    executor: impl PgExecutor<'_>,
    owner: Option<&str>,
    filter: &CronFilter,
) -> Result<i64> {
    let (graph_id, created) = filter.assistant_columns();
    Ok(sqlx::query_scalar!(
        r#"
        select count(*) as "count!"
        from mostrador.crons
        where ($1::text is null or owner = $1)
          and ($2::text is null or (graph_id = $2 and payload->>'assistant_id' is null))
          and ($5::text is null or payload->>'assistant_id' = $5)
          and ($3::uuid is null or thread_id = $3)
          and ($4::boolean is null or enabled = $4)
          and ($6::jsonb is null or metadata @> $6)
          and ($7::jsonb is null or mostrador.auth_admits(metadata, $7))
        "#,
        owner,
        graph_id,
        filter.thread_id,
        filter.enabled,
        created,
        filter.metadata,
        filter.auth_filter,
    )
    .fetch_one(executor)
    .await?)
}

/// Deletes a cron of `owner`; `false` when there is none (someone else's included).
///
/// # Errors
///
/// The database failed.
pub async fn delete(
    executor: impl PgExecutor<'_>,
    cron_id: Uuid,
    owner: Option<&str>,
) -> Result<bool> {
    let deleted = sqlx::query!(
        "delete from mostrador.crons where cron_id = $1 and ($2::text is null or owner = $2)",
        cron_id,
        owner
    )
    .execute(executor)
    .await?;
    Ok(deleted.rows_affected() == 1)
}

/// A cron of `owner` (`None` when there is none, someone else's included).
///
/// # Errors
///
/// The database failed.
pub async fn get(
    executor: impl PgExecutor<'_>,
    cron_id: Uuid,
    owner: Option<&str>,
) -> Result<Option<Cron>> {
    Ok(sqlx::query_as!(
        Cron,
        r#"
        select cron_id, graph_id, thread_id, owner, tenant, schedule, timezone, payload,
            metadata, on_run_completed, enabled, end_time, next_run_at, created_at, updated_at
        from mostrador.crons
        where cron_id = $1 and ($2::text is null or owner = $2)
        "#,
        cron_id,
        owner
    )
    .fetch_optional(executor)
    .await?)
}

/// What [`update`] changes; what is `None` (or empty) stays as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CronUpdate {
    pub schedule: Option<String>,
    pub timezone: Option<String>,
    /// `Some(None)` clears the end time.
    pub end_time: Option<Option<DateTime<Utc>>>,
    pub enabled: Option<bool>,
    /// What it sets over the runs' template.
    pub payload: RunTemplate,
    /// Keys set over the cron's metadata's.
    pub metadata: Map<String, Value>,
    pub on_run_completed: Option<String>,
}

/// Changes a cron of `owner`, in one transaction holding its row; `None` when there is none. A
/// new schedule or time zone, or enabling it again, moves its next run to the schedule's next
/// minute from now. The cron is from then on bound to `api_key`, the change's credential (none
/// for a token): the last credential that vouched for it.
///
/// # Errors
///
/// [`Error::Invalid`] as [`create`] says.
pub async fn update<'a>(
    db: impl sqlx::Acquire<'a, Database = sqlx::Postgres>,
    cron_id: Uuid,
    owner: Option<&str>,
    api_key: Option<ApiKeyId>,
    change: &CronUpdate,
) -> Result<Option<Cron>> {
    let invalid = |field: &'static str| move |reason: String| Error::Invalid { field, reason };
    let schedule_text = change
        .schedule
        .as_deref()
        .map(|text| text.split_whitespace().collect::<Vec<_>>().join(" "));
    let mut tx = db.begin().await?;
    let Some(cron) = sqlx::query_as!(
        Cron,
        r#"
        select cron_id, graph_id, thread_id, owner, tenant, schedule, timezone, payload,
            metadata, on_run_completed, enabled, end_time, next_run_at, created_at, updated_at
        from mostrador.crons
        where cron_id = $1 and ($2::text is null or owner = $2)
        for update
        "#,
        cron_id,
        owner
    )
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(None);
    };
    let schedule_text = schedule_text.unwrap_or_else(|| cron.schedule.clone());
    let timezone = change.timezone.clone().or_else(|| cron.timezone.clone());
    let schedule = Schedule::parse(&schedule_text).map_err(invalid("schedule"))?;
    let zone = zone(timezone.as_deref()).map_err(invalid("timezone"))?;
    let enabled = change.enabled.unwrap_or(cron.enabled);
    let enabling = enabled && !cron.enabled;
    let next_run_at = if change.schedule.is_some() || change.timezone.is_some() || enabling {
        schedule
            .next_after(Utc::now(), zone)
            .expect("a parsed schedule fires")
    } else {
        cron.next_run_at
    };
    let payload = RunTemplate::from_value(cron.payload)?
        .with(change.payload.clone())
        .to_value();
    let mut metadata = cron.metadata;
    if let Some(object) = metadata.as_object_mut() {
        object.extend(change.metadata.clone());
    }
    let end_time = change.end_time.unwrap_or(cron.end_time);
    let updated = sqlx::query_as!(
        Cron,
        r#"
        update mostrador.crons
        set schedule = $2, timezone = $3, enabled = $4, next_run_at = $5, payload = $6,
            metadata = $7, end_time = $8, on_run_completed = coalesce($9, on_run_completed),
            api_key_id = $10, updated_at = now()
        where cron_id = $1
        returning cron_id, graph_id, thread_id, owner, tenant, schedule, timezone, payload,
            metadata, on_run_completed, enabled, end_time, next_run_at, created_at, updated_at
        "#,
        cron_id,
        schedule_text,
        timezone,
        enabled,
        next_run_at,
        payload,
        metadata,
        end_time,
        change.on_run_completed,
        api_key.map(|key| key.0),
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some(updated))
}

/// One scheduler tick: if this caller wins the scheduler's lock, enqueues one run per due cron
/// and moves the crons on; returns the runs enqueued (0 when another worker holds the lock).
/// A cron whose thread is gone, whose end time passed, or whose API key was revoked or expired,
/// is disabled; one whose graph is over
/// `limit` (the pending runs clients' runs are held to) waits for the next tick; one with the `reject` strategy whose thread is busy
/// skips this run. No cron holds back the others.
///
/// # Errors
///
/// The database failed.
pub async fn tick(pool: &PgPool, limit: Option<QueueLimit>) -> Result<usize> {
    let mut tx = pool.begin().await?;
    let leader = sqlx::query_scalar!(
        r#"select pg_try_advisory_xact_lock($1) as "leader!""#,
        SCHEDULER_LOCK
    )
    .fetch_one(&mut *tx)
    .await?;
    if !leader {
        return Ok(0);
    }
    // A credential taken back schedules nothing more (revoking a key disables its crons at once;
    // an expiry is seen here).
    let stopped = sqlx::query!(
        r#"
        update mostrador.crons c
        set enabled = false, updated_at = now()
        from mostrador.api_keys k
        where c.enabled and c.next_run_at <= now()
          and k.key_id = c.api_key_id
          and (k.revoked_at is not null or k.expires_at <= now())
        "#
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if stopped > 0 {
        tracing::info!(
            crons = stopped,
            "crons whose API key expired or was revoked: disabled"
        );
    }
    let due = sqlx::query_as!(
        Cron,
        r#"
        select cron_id, graph_id, thread_id, owner, tenant, schedule, timezone, payload,
            metadata, on_run_completed, enabled, end_time, next_run_at, created_at, updated_at
        from mostrador.crons
        where enabled and next_run_at <= now()
        order by next_run_at
        limit $1
        for update skip locked
        "#,
        TICK_BATCH
    )
    .fetch_all(&mut *tx)
    .await?;
    let now = Utc::now();
    let mut enqueued = 0;
    for cron in due {
        if cron.end_time.is_some_and(|end| end < cron.next_run_at) {
            disable(&mut *tx, cron.cron_id).await?;
            continue;
        }
        let mut attempt = sqlx::Connection::begin(&mut *tx).await?;
        match enqueue_for(&mut attempt, &cron, limit).await {
            Ok(()) => {
                attempt.commit().await?;
                enqueued += 1;
            }
            Err(Error::Backpressure { .. } | Error::CallerShare { .. }) => {
                // The graph's queue is full, or the cron's owner has their share of it: this
                // tick's run waits for the next tick.
                attempt.rollback().await?;
                continue;
            }
            Err(Error::Conflict { .. }) => {
                // `reject` on a busy thread: this occurrence is refused, as a client's run would
                // be, and the cron moves on to the next.
                attempt.rollback().await?;
                tracing::info!(cron_id = %cron.cron_id, "the cron's thread is busy: skipping this run");
            }
            Err(
                err @ (Error::ThreadNotFound(_)
                | Error::GraphMismatch { .. }
                | Error::Invalid { .. }),
            ) => {
                attempt.rollback().await?;
                tracing::warn!(cron_id = %cron.cron_id, error = %err, "the cron cannot run: disabling it");
                disable(&mut *tx, cron.cron_id).await?;
                continue;
            }
            Err(err) => return Err(err),
        }
        let next = Schedule::parse(&cron.schedule)
            .ok()
            .zip(zone(cron.timezone.as_deref()).ok())
            .and_then(|(schedule, zone)| schedule.next_after(now, zone));
        sqlx::query!(
            r#"
            update mostrador.crons
            set next_run_at = coalesce($2, next_run_at), enabled = enabled and $2 is not null,
                updated_at = now()
            where cron_id = $1
            "#,
            cron.cron_id,
            next
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(enqueued)
}

async fn disable(executor: impl PgExecutor<'_>, cron_id: Uuid) -> Result<()> {
    sqlx::query!(
        "update mostrador.crons set enabled = false, updated_at = now() where cron_id = $1",
        cron_id
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// Enqueues the cron's run: on its thread, or on a new thread of its owner.
async fn enqueue_for(
    tx: &mut sqlx::PgConnection,
    cron: &Cron,
    limit: Option<QueueLimit>,
) -> Result<()> {
    let thread_id = match cron.thread_id {
        Some(id) => ThreadId(id),
        None => {
            let mut new = NewThread::new(&cron.graph_id, &cron.owner);
            new.tenant.clone_from(&cron.tenant);
            new.metadata = serde_json::json!({"cron_id": cron.cron_id});
            // Deleted when its run ends, unless the cron keeps its runs' threads.
            new.temporary = cron.on_run_completed == "delete";
            thread::create(&mut *tx, &new).await?.thread_id
        }
    };
    let template = RunTemplate::from_value(cron.payload.clone())?;
    let mut new = NewRun::new(thread_id, &cron.graph_id);
    new.input = template.input.filter(|input| !input.is_null());
    let mut config = template
        .config
        .map_or(Value::Null, |config| config.to_value());
    let mut metadata = template.metadata.unwrap_or_default();
    metadata.insert("cron_id".into(), serde_json::json!(cron.cron_id));
    let mut assistant_context = Value::Null;
    // A cron on an assistant its maker created: its runs take the assistant's config as it is
    // now, under theirs, as a client's run on it does.
    if let Some(id) = template.assistant_id {
        let Some(assistant) = crate::data::assistants::get(&mut *tx, Some(&cron.owner), id).await?
        else {
            return Err(Error::Invalid {
                field: "assistant_id",
                reason: format!("the cron's assistant {id} is gone"),
            });
        };
        config = crate::data::assistants::config_under(&assistant.config, config);
        metadata.insert(
            "assistant_id".into(),
            serde_json::json!(assistant.assistant_id),
        );
        assistant_context = assistant.context;
    }
    new.config = RunConfig::from_value(config)?;
    new.config.context = crate::data::assistants::context_under(
        &assistant_context,
        template.context.unwrap_or_default(),
    );
    new.metadata = Value::Object(metadata);
    new.multitask_strategy = template
        .multitask_strategy
        .unwrap_or(MultitaskStrategy::Enqueue);
    if let Some(modes) = template.stream_mode.filter(|modes| !modes.is_empty()) {
        new.stream_mode = modes;
    }
    new.webhook = template.webhook;
    enqueue_on(&mut *tx, &new, limit).await?;
    Ok(())
}
