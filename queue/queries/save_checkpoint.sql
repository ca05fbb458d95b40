with fence as materialized (
    select status
    from mostrador.runs
    where run_id = $1
      and attempt = $2
    for key share
),
allowed as (
    select exists (select 1 from fence where status = 'running') as ok
),
written as (
    insert into mostrador.checkpoint_writes (
        thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel,
        payload_type, payload
    )
    select $3, ns, checkpoint_id, task_id, task_path, idx, channel, kind, bytes
    from unnest(
        $4::text[], $5::uuid[], $6::text[], $7::text[], $8::int4[], $9::text[],
        $10::text[], $11::bytea[]
    ) as w(ns, checkpoint_id, task_id, task_path, idx, channel, kind, bytes)
    where (select ok from allowed)
    on conflict (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) do update
    set channel = excluded.channel,
        payload_type = excluded.payload_type,
        payload = excluded.payload
    where excluded.idx < 0
),
blobs as (
    insert into mostrador.checkpoint_blobs (
        thread_id, checkpoint_ns, channel, version, payload_type, payload
    )
    select $3, $12, channel, version, kind, bytes
    from unnest($13::text[], $14::int8[], $15::text[], $16::bytea[])
        as b(channel, version, kind, bytes)
    where (select ok from allowed)
    on conflict do nothing
),
touched as (
    update mostrador.threads
    set last_activity_at = now(), state_updated_at = now()
    where thread_id = $3
      and $17::uuid is not null
      and last_activity_at < now() - interval '1 minute'
      and (select ok from allowed)
),
saved as (
    insert into mostrador.checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step,
        channel_versions, saved, metadata
    )
    select $3, $12, $17, $18, $1,
        coalesce(
            (
                select max(step)
                from mostrador.checkpoints
                where thread_id = $3
                  and checkpoint_ns = $12
            ),
            -1
        ) + 1,
        $19, $20, $21
    where $17::uuid is not null
      and (select ok from allowed)
    on conflict (thread_id, checkpoint_ns, checkpoint_id) do update
    set saved = excluded.saved,
        metadata = excluded.metadata,
        channel_versions = excluded.channel_versions
)
select ok as "ok!"
from allowed
