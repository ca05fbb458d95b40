select
    r.run_id as "run_id: RunId",
    r.thread_id as "thread_id: ThreadId",
    r.graph_id,
    r.status as "status: RunStatus",
    r.input,
    r.command,
    r.config,
    r.metadata,
    r.multitask_strategy as "multitask_strategy: MultitaskStrategy",
    r.priority,
    r.available_at,
    r.attempt,
    r.max_attempts,
    r.drain_count,
    r.lease_owner as "lease_owner: WorkerId",
    r.cancel_action as "cancel_action: CancelAction",
    r.error,
    r.trace_id,
    r.stream_mode,
    r.created_at,
    r.updated_at,
    r.started_at,
    r.finished_at
from mostrador.runs r
join mostrador.threads t on t.thread_id = r.thread_id
where t.deleted_at is null
  and ($1::text is null or t.owner = $1 or ($2::text is not null and t.tenant = $2
      and ($5::text[] is null or t.graph_id = any($5))))
  and ($6::jsonb is null or mostrador.auth_admits(t.metadata, $6))
  and ($3::mostrador.run_status is null or r.status = $3)
order by r.created_at desc, r.run_id desc
limit $4
