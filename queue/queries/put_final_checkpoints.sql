-- The final checkpoints of runs that end together (the thread's graph, nothing left to run),
-- each fenced by its run's lease as `put_checkpoint.sql` fences one: written only for a run
-- still `running` under that attempt, its row locked `for key share` for the transaction.
-- Returns the runs whose checkpoint was written.
with checkpoints as (
    select *
    from unnest(
        $1::uuid[], $2::int[], $3::uuid[], $4::uuid[], $5::uuid[], $6::int8[], $7::jsonb[],
        $8::jsonb[]
    ) as c(
        run_id, attempt, thread_id, checkpoint_id, parent_checkpoint_id, step, channel_versions,
        metadata
    )
),
-- N.B. Runs found by primary key through the array; each status is checked on the row its lock
-- returned (see `crate::db`).
fence as materialized (
    select r.run_id, r.attempt, r.status
    from mostrador.runs r
    where r.run_id = any($1::uuid[])
      and (r.run_id, r.attempt) in (select run_id, attempt from checkpoints)
    for key share
),
held as materialized (
    select c.*
    from checkpoints c
    join fence f using (run_id, attempt)
    where f.status = 'running'
),
blobs as (
    insert into mostrador.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, value)
    select h.thread_id, '', b.channel, b.version, b.value
    from unnest($9::uuid[], $10::text[], $11::int8[], $12::jsonb[])
        as b(run_id, channel, version, value)
    join held h using (run_id)
    on conflict do nothing
),
-- Retention counts in days: as for every checkpoint, the thread's clock moves at most once a
-- minute.
touched as (
    update mostrador.threads t
    set last_activity_at = now(), state_updated_at = now()
    where t.thread_id = any(array(select thread_id from held))
      and t.last_activity_at < now() - interval '1 minute'
),
saved as (
    insert into mostrador.checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step,
        channel_versions, next, tasks, metadata
    )
    select
        thread_id, '', checkpoint_id, parent_checkpoint_id, run_id, step, channel_versions,
        '{}', '[]', metadata
    from held
    on conflict do nothing
)
select run_id as "run_id!"
from held
