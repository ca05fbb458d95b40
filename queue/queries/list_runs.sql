select
    run_id as "run_id: RunId",
    thread_id as "thread_id: ThreadId",
    graph_id,
    status as "status: RunStatus",
    input,
    command,
    config,
    metadata,
    multitask_strategy as "multitask_strategy: MultitaskStrategy",
    priority,
    available_at,
    attempt,
    max_attempts,
    drain_count,
    lease_owner as "lease_owner: WorkerId",
    cancel_action as "cancel_action: CancelAction",
    error,
    trace_id,
    stream_mode,
    created_at,
    updated_at,
    started_at,
    finished_at
from mostrador.runs
where thread_id = $1
  and ($2::mostrador.run_status is null or status = $2)
  -- A Python thread's state update is queued as a run, but it is not one of its runs.
  and not coalesce(command ? 'update_state', false)
order by created_at desc, run_id desc
limit $3
offset $4
