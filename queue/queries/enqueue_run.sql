-- By its id alone, then checked (see `crate::db`).
with locked as materialized (
    select graph_id, owner, deleted_at
    from mostrador.threads
    where thread_id = $2
    for no key update
),
thread as (
    select graph_id, owner
    from locked
    where deleted_at is null
),
seen as materialized (
    select
        (
            select count(*)
            from (
                select 1
                from mostrador.runs
                where status = 'pending'
                  and graph_id = $3
                  and (available_at > now()) = $15
                limit $16
            ) p
        ) as graph_pending,
        (
            select count(*)
            from (
                select 1
                from mostrador.runs
                where status = 'pending'
                  and owner = (select owner from thread)
                limit $17
            ) p
        ) as caller_pending
),
inserted as (
    insert into mostrador.runs (
        run_id, thread_id, graph_id, input, command, config, metadata,
        multitask_strategy, priority, available_at, max_attempts, trace_id, stream_mode,
        owner, webhook, streamed
    )
    select
        $1, $2, $3, $4, $5, $6, $7, $8,
        least($9::int + seen.caller_pending, 2147483647)::int,
        now() + make_interval(secs => $10), $11,
        $12, $13, thread.owner,
        $14, $20
    from thread, seen
    where (thread.graph_id is null or thread.graph_id = $3 or $21)
      and (not $18 or (seen.graph_pending < $16 and seen.caller_pending < $17))
    returning
        run_id, thread_id, graph_id, status, input, command, config, metadata,
        multitask_strategy, priority, available_at, attempt, max_attempts,
        drain_count, lease_owner, cancel_action, error, trace_id, stream_mode,
        created_at, updated_at, started_at, finished_at,
        case when not $15 then pg_notify($19, graph_id)::text end as woken
),
bound as (
    update mostrador.threads t
    set graph_id = $3,
        metadata = case
            when thread.graph_id is null then jsonb_strip_nulls(jsonb_build_object(
                'graph_id', $3::text,
                'assistant_id', $7::jsonb -> 'assistant_id'
            )) || t.metadata
            -- Rebound by a run of another graph: the metadata names the new one.
            else t.metadata || jsonb_strip_nulls(jsonb_build_object(
                'graph_id', $3::text,
                'assistant_id', $7::jsonb -> 'assistant_id'
            ))
        end,
        updated_at = now()
    from thread
    where t.thread_id = $2
      and (thread.graph_id is null or thread.graph_id <> $3)
      and exists (select 1 from inserted)
)
select
    run_id as "run_id!: RunId",
    thread_id as "thread_id!: ThreadId",
    graph_id as "graph_id!",
    status as "status!: RunStatus",
    input,
    command,
    config as "config!",
    metadata as "metadata!",
    multitask_strategy as "multitask_strategy!: MultitaskStrategy",
    priority as "priority!",
    available_at as "available_at!",
    attempt as "attempt!",
    max_attempts as "max_attempts!",
    drain_count as "drain_count!",
    lease_owner as "lease_owner: WorkerId",
    cancel_action as "cancel_action: CancelAction",
    error,
    trace_id,
    stream_mode as "stream_mode!",
    created_at as "created_at!",
    updated_at as "updated_at!",
    started_at,
    finished_at
from inserted
