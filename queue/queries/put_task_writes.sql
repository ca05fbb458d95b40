with fence as materialized (
    select status
    from mostrador.runs
    where run_id = $7
      and attempt = $8
    for key share
),
allowed as (
    select $7::uuid is null
        or exists (select 1 from fence where status = 'running') as ok
),
input as (
    select *
    from unnest($3::text[], $4::int[], $5::text[], $6::jsonb[]) as w(task_id, idx, channel, value)
),
lengths as (
    select task_id, count(*) as n
    from input
    group by task_id
),
trimmed as (
    delete from mostrador.checkpoint_writes w
    using lengths l
    where w.thread_id = $1
      and w.checkpoint_ns = $9
      and w.checkpoint_id = $2
      and w.task_id = l.task_id
      and w.idx >= l.n
      and (select ok from allowed)
),
written as (
    insert into mostrador.checkpoint_writes (
        thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, value
    )
    select $1, $9, $2, task_id, idx, channel, value
    from input
    where (select ok from allowed)
    on conflict (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) do update
    set channel = excluded.channel,
        value = excluded.value
)
select ok as "ok!"
from allowed
