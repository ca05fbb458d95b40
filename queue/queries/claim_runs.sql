with beat as (
    update mostrador.workers
    set heartbeat_at = now(),
        expires_at = now() + lease
    where worker_id = $1
    returning worker_id
),
candidate as (
    select r.run_id
    from mostrador.runs r
    where r.status = 'pending'
      and r.available_at <= now()
      and r.graph_id = any($2)
      and exists (select 1 from beat)
      and not exists (
          select 1
          from mostrador.runs e
          where e.thread_id = r.thread_id
            and e.status in ('pending', 'running')
            and e.seq < r.seq
      )
    order by r.priority, r.available_at, r.seq
    limit $3
    for update of r skip locked
),
claimed as (
    update mostrador.runs r
    set status = 'running',
        attempt = r.attempt + 1,
        lease_owner = $1,
        started_at = coalesce(r.started_at, now()),
        updated_at = now()
    -- N.B. `= any(array(...))` keeps this a primary-key lookup of the claimed rows. As a
    -- join, the generic plan (which cannot see the limit) hashes a sequential scan of
    -- all runs.
    where r.run_id = any(array(select run_id from candidate))
    returning
        r.run_id, r.attempt, r.thread_id, r.graph_id, r.input, r.command, r.config,
        r.metadata, r.max_attempts, r.drain_count, r.cancel_action, r.trace_id,
        r.stream_mode, r.streamed, r.priority, r.available_at, r.seq, r.owner
)
select
    run_id as "run_id: RunId",
    attempt,
    thread_id as "thread_id: ThreadId",
    graph_id,
    input,
    command,
    config,
    metadata,
    max_attempts,
    drain_count,
    cancel_action as "cancel_action: CancelAction",
    trace_id,
    stream_mode,
    streamed,
    -- N.B. A scalar subquery, probed per claimed run through `checkpoints_latest_idx`:
    -- as `exists`, the generic plan hashes a scan of every checkpoint.
    (
        select true
        from mostrador.checkpoints c
        where c.thread_id = claimed.thread_id
        limit 1
    ) is not null as "checkpointed!",
    -- Whose run it is, for runner processes isolated by tenant: the thread's tenant, or the
    -- owner where there is none.
    coalesce(
        (
            select coalesce(t.tenant, t.owner)
            from mostrador.threads t
            where t.thread_id = claimed.thread_id
        ),
        claimed.owner
    ) as tenant
from claimed
-- In queue order, as the candidates were chosen.
order by priority, available_at, seq
