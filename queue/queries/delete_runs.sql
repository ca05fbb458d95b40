with deleted as (
    delete from mostrador.runs
    where run_id = any($1)
      and thread_id = $2
      and status = $3
      and ($4::int is null or attempt = $4)
    returning run_id
),
deleted_events as (
    delete from mostrador.run_events e
    using deleted d
    where e.run_id = d.run_id
),
-- The run's checkpoints in its thread only: a copy of the thread holds checkpoints with
-- the same run id, which are the copy's.
deleted_writes as (
    delete from mostrador.checkpoint_writes w
    using mostrador.checkpoints c, deleted d
    where c.run_id = d.run_id
      and c.thread_id = $2
      and w.thread_id = c.thread_id
      and w.checkpoint_ns = c.checkpoint_ns
      and w.checkpoint_id = c.checkpoint_id
),
deleted_checkpoints as (
    delete from mostrador.checkpoints c
    using deleted d
    where c.run_id = d.run_id
      and c.thread_id = $2
),
notified as (
    select run_id, pg_notify($5, json_build_object('run_id', run_id)::text)
    from deleted
)
select run_id as "run_id!: RunId"
from notified
