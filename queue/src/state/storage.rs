//! What a thread's checkpoints occupy: their count and bytes, per table and per channel, as the
//! official server reports them (`GET /threads/{thread_id}/storage`).

use std::collections::BTreeMap;

use sqlx::PgExecutor;
use uuid::Uuid;

use crate::Result;

/// Rows and the bytes they hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub count: i64,
    pub bytes: i64,
}

/// A thread's checkpoints (every namespace): the checkpoints themselves, the values of their
/// channels (a row per version written), and the pending writes of their tasks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Storage {
    pub checkpoints: Tally,
    pub channel_values: Tally,
    /// The versions of each channel and the bytes of their values.
    pub by_channel: BTreeMap<String, Tally>,
    pub pending_writes: Tally,
}

impl Storage {
    pub fn total_bytes(&self) -> i64 {
        self.checkpoints.bytes + self.channel_values.bytes + self.pending_writes.bytes
    }
}

/// What `thread_id`'s checkpoints occupy, serialized: a value's bytes are its payload's (a
/// LangGraph graph's, serialized by LangGraph), else its JSON text's; a checkpoint's are its
/// columns' JSON text's. (Postgres may hold fewer, compressed.)
///
/// # Errors
///
/// The database failed.
pub async fn of_thread(executor: impl PgExecutor<'_>, thread_id: Uuid) -> Result<Storage> {
    let rows = sqlx::query!(
        r#"
        select 'checkpoint' as "kind!", null::text as channel, count(*) as "count!",
            coalesce(sum(
                coalesce(octet_length(saved::text), 0) + coalesce(octet_length(snapshot::text), 0)
                + octet_length(channel_versions::text) + octet_length(tasks::text)
                + octet_length(metadata::text)
            ), 0)::bigint as "bytes!"
        from mostrador.checkpoints
        where thread_id = $1
        union all
        select 'blob', channel, count(*),
            coalesce(sum(coalesce(octet_length(payload), octet_length(value::text), 0)), 0)::bigint
        from mostrador.checkpoint_blobs
        where thread_id = $1
        group by channel
        union all
        select 'write', null, count(*),
            coalesce(sum(coalesce(octet_length(payload), octet_length(value::text), 0)), 0)::bigint
        from mostrador.checkpoint_writes
        where thread_id = $1
        "#,
        thread_id,
    )
    .fetch_all(executor)
    .await?;
    let mut storage = Storage::default();
    for row in rows {
        let tally = Tally {
            count: row.count,
            bytes: row.bytes,
        };
        match (row.kind.as_str(), row.channel) {
            ("checkpoint", _) => storage.checkpoints = tally,
            ("write", _) => storage.pending_writes = tally,
            (_, channel) => {
                storage.channel_values.count += tally.count;
                storage.channel_values.bytes += tally.bytes;
                storage
                    .by_channel
                    .insert(channel.unwrap_or_default(), tally);
            }
        }
    }
    Ok(storage)
}
