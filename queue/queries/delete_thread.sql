with runs as (
    delete from mostrador.runs where thread_id = $1 returning run_id
),
events as (
    delete from mostrador.run_events
    where run_id = any(array(select run_id from mostrador.runs where thread_id = $1))
    returning 1
),
writes as (
    delete from mostrador.checkpoint_writes where thread_id = $1 returning 1
),
blobs as (
    delete from mostrador.checkpoint_blobs where thread_id = $1 returning 1
),
checkpoints as (
    delete from mostrador.checkpoints where thread_id = $1 returning 1
),
files as (
    delete from mostrador.thread_files where thread_id = $1
),
marked as (
    update mostrador.threads
    set deleted_at = coalesce(deleted_at, now()), purged_at = now(), updated_at = now()
    where thread_id = $1
)
select
    (select count(*) from runs) as "runs!",
    (select count(*) from events) as "events!",
    (select count(*) from checkpoints) as "checkpoints!",
    (select count(*) from blobs) as "blobs!",
    (select count(*) from writes) as "writes!"
