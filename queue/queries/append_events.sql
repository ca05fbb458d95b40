with events as (
    select *
    from unnest($1::uuid[], $2::int[], $3::text[], $4::jsonb[]) with ordinality
        as e(run_id, attempt, event, data, ord)
),
counts as (
    select run_id, attempt, count(*) as n
    from events
    group by run_id, attempt
),
-- Locked as the update locks them, then checked (see `crate::db`).
locked as materialized (
    select r.run_id, r.status
    from mostrador.runs r
    join counts c on c.run_id = r.run_id and c.attempt = r.attempt
    where r.run_id = any($1::uuid[])
    for no key update of r
),
written as (
    update mostrador.runs r
    set event_seq = r.event_seq + c.n
    from counts c
    where r.run_id = any(array(select run_id from locked where status = 'running'))
      and r.run_id = c.run_id
      and r.attempt = c.attempt
    returning r.run_id, r.event_seq, r.event_seq - c.n as base
),
logged as (
    insert into mostrador.run_events (run_id, seq, event, data)
    select
        e.run_id,
        w.base + row_number() over (partition by e.run_id order by e.ord),
        e.event,
        e.data
    from events e
    join written w on w.run_id = e.run_id
)
select run_id as "run_id!: RunId", event_seq as "last_seq!"
from written
