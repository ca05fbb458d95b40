with events as (
    select *
    from unnest($1::uuid[], $2::int[], $3::text[], $4::jsonb[]) with ordinality
        as e(run_id, attempt, event, data, ord)
),
ends as (
    select *
    from unnest(
        $5::uuid[], $6::int[], $7::mostrador.run_status[], $8::mostrador.thread_status[],
        $9::float8[], $10::bool[], $11::jsonb[], $12::text[]
    ) as i(run_id, attempt, status, thread_status, delay_secs, released, error, reason)
),
-- Each run written: how many events it gets, and its ending if it ends (with `ending`, the
-- events the ending itself logs: `error` and `end` for an error, `end` for the other
-- endings, `drained` for a release, none for a retry).
input as (
    select
        run_id,
        attempt,
        coalesce(c.n, 0) as n,
        i.status,
        i.thread_status,
        i.delay_secs,
        coalesce(i.released, false) as released,
        i.error,
        i.reason,
        case
            when i.status = 'error' then 2
            when i.status <> 'pending' or i.released then 1
            else 0
        end as ending
    from (
        select run_id, attempt, count(*) as n
        from events
        group by run_id, attempt
    ) c
    full join ends i using (run_id, attempt)
),
-- Threads before runs, in one order: the order of the statements that lock a thread, then
-- change its runs (deleting it, enqueueing with `interrupt` or `rollback`). The other
-- order deadlocks with them (see the lock order in this module's documentation).
-- N.B. Runs and threads are found by primary key through arrays, in this statement's
-- generic plan too (joined, the plan made while `runs` was small scans it whole).
threads_locked as (
    select t.thread_id
    from mostrador.threads t
    where t.thread_id = any(array(
        select r.thread_id
        from mostrador.runs r
        where r.run_id = any($5::uuid[])
    ))
    order by t.thread_id
    for no key update of t
),
-- The states Python graphs described at their checkpoints, as the api will serve them,
-- written before the events sent after them. Where a run describes a checkpoint twice,
-- the last description wins.
-- N.B. As the checkpoint writes, the fence holds each run's row lock (`for key share`)
-- for the statement, so no transition out of `running` commits between the check and
-- the write.
states as (
    select distinct on (run_id, checkpoint_id) run_id, attempt, checkpoint_id, snapshot
    from unnest($14::uuid[], $15::int[], $16::uuid[], $17::jsonb[]) with ordinality
        as d(run_id, attempt, checkpoint_id, snapshot, ord)
    order by run_id, checkpoint_id, ord desc
),
-- N.B. Each run's status is checked on the row its lock returned, not in the scan (see
-- `crate::db`).
described_locked as materialized (
    select r.run_id, r.attempt, r.thread_id, r.status
    from mostrador.runs r
    where r.run_id = any($14::uuid[])
      and (r.run_id, r.attempt) in (select run_id, attempt from states)
      -- Always true; evaluated once, before any run is locked (threads first).
      and (select count(*) from threads_locked) >= 0
    for key share
),
held as (
    select run_id, attempt, thread_id
    from described_locked
    where status = 'running'
),
-- N.B. Each checkpoint by its whole primary key: with the run's thread and the
-- checkpoint in one relation (`offset 0` keeps it one), the plan cannot probe by the
-- checkpoint's id alone, reading every thread's entries (as a generic plan made on small
-- tables did).
recorded as (
    update mostrador.checkpoints c
    set snapshot = t.snapshot
    from (
        select h.thread_id, d.checkpoint_id, d.snapshot
        from states d
        join held h on h.run_id = d.run_id and h.attempt = d.attempt
        offset 0
    ) t
    where c.thread_id = t.thread_id
      and c.checkpoint_ns = ''
      and c.checkpoint_id = t.checkpoint_id
),
-- N.B. `for update`, not the plain update's `for no key update`: an ending must wait for
-- checkpoint writes in flight, which lock `for key share` (see `checkpoint`). Events
-- alone need not.
ending_locked as materialized (
    select r.run_id, r.status
    from mostrador.runs r
    join ends i on i.run_id = r.run_id and i.attempt = r.attempt
    where r.run_id = any($5::uuid[])
      -- Always true; evaluated once, before any run is locked.
      and (select count(*) from threads_locked) >= 0
    for update of r
),
-- Runs that only get events, locked as the update locks them.
appending_locked as materialized (
    select r.run_id, r.status
    from mostrador.runs r
    join input i on i.run_id = r.run_id and i.attempt = r.attempt
    where r.run_id = any(array(select run_id from input where status is null))
      -- Always true; evaluated once, before any run is locked.
      and (select count(*) from threads_locked) >= 0
    for no key update of r
),
written as (
    update mostrador.runs r
    set status = coalesce(i.status, r.status),
        finished_at = case
            when i.status is null then r.finished_at
            when i.status = 'pending' then null
            else now()
        end,
        available_at = coalesce(now() + make_interval(secs => i.delay_secs), r.available_at),
        lease_owner = case when i.status = 'pending' then null else r.lease_owner end,
        drain_count = r.drain_count + i.released::int,
        error = coalesce(i.error, r.error),
        updated_at = case when i.status is null then r.updated_at else now() end,
        event_seq = r.event_seq + i.n + i.ending
    from input i
    where r.run_id = any(array(
            select run_id from ending_locked where status = 'running'
            union all
            select run_id from appending_locked where status = 'running'
        ))
      and r.run_id = i.run_id
      and r.attempt = i.attempt
      -- Always true; evaluated once, before any run is updated: a run this statement has
      -- updated can no longer be locked by it, and its state would go unrecorded.
      and (select count(*) from held) >= 0
    returning
        r.run_id, r.thread_id, r.graph_id, r.attempt, r.error, r.event_seq,
        r.event_seq - i.n - i.ending as base, i.status as ended, i.thread_status,
        i.released, i.reason
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
    union all
    select run_id, event_seq - 1, 'error', error
    from written
    where ended = 'error'
    union all
    select run_id, event_seq, 'end', jsonb_build_object('status', ended)
    from written
    where ended <> 'pending'
    union all
    select run_id, event_seq, 'drained', jsonb_build_object('reason', reason, 'attempt', attempt)
    from written
    where released
),
rested as (
    update mostrador.threads t
    set status = w.thread_status,
        state_updated_at = now(),
        updated_at = now(),
        -- A stateless run's thread its client let go with the run (`temporary`): deleted as
        -- the api deletes one, purged by retention's next pass.
        deleted_at = case
            when t.temporary and w.ended <> 'pending' then coalesce(t.deleted_at, now())
            else t.deleted_at
        end,
        -- The retention clock, restarted at most once a minute: unchanged, the thread's
        -- indexes are too, and the update stays on its page (migration 0018).
        last_activity_at = case
            when t.last_activity_at < now() - interval '1 minute' then now()
            else t.last_activity_at
        end
    from written w
    where t.thread_id = w.thread_id
      and w.thread_status is not null
)
select
    w.run_id as "run_id!: RunId",
    w.event_seq as "last_seq?",
    case
        -- N.B. Probed through `runs_thread_active_idx`, the one index whose predicate
        -- this one implies: as `status = 'pending'`, a generic plan made on a small table
        -- read every pending run's entry of `runs_pending_owner_idx` on every ending. (The
        -- snapshot still sees the ended run running; a thread runs one run at a time.)
        when w.released or (
            w.ended <> 'pending'
            and exists (
                select 1
                from mostrador.runs q
                where q.thread_id = w.thread_id
                  and q.status in ('pending', 'running')
                  and q.run_id <> w.run_id
            )
        ) then pg_notify($13, w.graph_id)::text
    end as "woken"
from written w
union all
-- Runs that only described states.
select h.run_id, null, null
from held h
where not exists (select 1 from written w where w.run_id = h.run_id)
