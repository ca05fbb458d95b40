with orphaned as (
    select r.run_id, r.thread_id
    from mostrador.runs r
    where r.status = 'running'
      and not exists (
          select 1
          from mostrador.workers w
          where w.worker_id = r.lease_owner
            and w.expires_at > now()
      )
),
-- Threads before runs, as every statement that changes both (see `claim`'s lock order).
-- A thread someone else holds is skipped with its run, until the next sweep.
threads_locked as (
    select t.thread_id
    from mostrador.threads t
    where t.thread_id in (select thread_id from orphaned)
    order by t.thread_id
    for no key update of t skip locked
),
expired as (
    select r.run_id, r.attempt - r.drain_count >= r.max_attempts as last_attempt
    from mostrador.runs r
    where r.run_id in (select run_id from orphaned)
      and r.status = 'running'
      and r.thread_id = any(array(select thread_id from threads_locked))
    for update of r skip locked
),
swept as (
    update mostrador.runs r
    set status = case
            when e.last_attempt then 'error'
            else 'pending'
        end::mostrador.run_status,
        lease_owner = null,
        finished_at = case when e.last_attempt then now() end,
        error = case
            when e.last_attempt then jsonb_build_object(
                'error', 'LeaseExpired',
                'message', format(
                    'the worker running attempt %s of %s stopped heartbeating',
                    r.attempt,
                    r.max_attempts
                )
            )
            else r.error
        end,
        event_seq = r.event_seq + case when e.last_attempt then 2 else 0 end,
        updated_at = now()
    from expired e
    where r.run_id = e.run_id
    returning r.run_id, r.thread_id, r.graph_id, r.status, r.error, r.event_seq
),
ended as (
    insert into mostrador.run_events (run_id, seq, event, data)
    select run_id, event_seq - 1, 'error', error
    from swept
    where status = 'error'
    union all
    select run_id, event_seq, 'end', '{"status": "error"}'::jsonb
    from swept
    where status = 'error'
),
rested as (
    update mostrador.threads t
    set status = 'error',
        last_activity_at = now(),
        state_updated_at = now(),
        updated_at = now()
    from swept s
    where t.thread_id = s.thread_id
      and s.status = 'error'
),
forgotten as (
    delete from mostrador.workers w
    where w.expires_at < now() - w.lease * 10
      and not exists (
          select 1
          from mostrador.runs r
          where r.lease_owner = w.worker_id
            and r.status = 'running'
      )
)
select
    s.run_id as "run_id!: RunId",
    s.status as "status!: RunStatus",
    case when s.status = 'pending' then pg_notify($1, s.graph_id)::text end as "woken"
from swept s
