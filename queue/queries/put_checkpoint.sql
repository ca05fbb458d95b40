with fence as materialized (
    select status
    from mostrador.runs
    where run_id = $13
      and attempt = $14
    for key share
),
allowed as (
    select $13::uuid is null
        or exists (select 1 from fence where status = 'running') as ok
),
blobs as (
    insert into mostrador.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, value)
    select $1, $15, channel, version, value
    from unnest($2::text[], $3::int8[], $4::jsonb[]) as b(channel, version, value)
    where (select ok from allowed)
    on conflict do nothing
),
-- Retention counts in days: a clock at most a minute behind is exact enough, and
-- spares most supersteps a write of the thread row.
touched as (
    update mostrador.threads
    set last_activity_at = now(), state_updated_at = now()
    where thread_id = $1
      and last_activity_at < now() - interval '1 minute'
      and (select ok from allowed)
),
saved as (
    insert into mostrador.checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step,
        channel_versions, next, tasks, metadata
    )
    select $1, $15, $5, $6, $7, $8, $9, $10, $11, $12
    where (select ok from allowed)
    on conflict do nothing
)
select ok as "ok!"
from allowed
