with input as (
    select *
    from unnest(
        $1::uuid[], $2::uuid[], $3::text[], $4::jsonb[], $5::jsonb[], $6::jsonb[],
        $7::jsonb[], $8::mostrador.multitask_strategy[], $9::int[], $10::float8[],
        $11::int[], $12::text[], $13::text[], $14::text[], $15::bool[]
    ) with ordinality as i(
        run_id, thread_id, graph_id, input, command, config, metadata,
        multitask_strategy, priority, after_secs, max_attempts, trace_id, stream_mode,
        webhook, streamed, ord
    )
)
insert into mostrador.runs (
    run_id, thread_id, graph_id, input, command, config, metadata, multitask_strategy,
    priority, available_at, max_attempts, trace_id, stream_mode, owner, webhook,
    streamed
)
select
    i.run_id, i.thread_id, i.graph_id, i.input, i.command, coalesce(i.config, '{}'),
    coalesce(i.metadata, '{}'), i.multitask_strategy, i.priority,
    now() + make_interval(secs => i.after_secs), i.max_attempts, i.trace_id,
    string_to_array(i.stream_mode, ','), t.owner, i.webhook, i.streamed
from input i
-- N.B. `offset 0` keeps this a primary-key lookup per run. Flattened into a join, the
-- generic plan of this prepared statement may probe threads by graph_id instead
-- (measured: 30 times slower with 20,000 threads of one graph).
cross join lateral (
    select t.graph_id, t.owner, t.deleted_at
    from mostrador.threads t
    where t.thread_id = i.thread_id
    offset 0
) t
where t.graph_id = i.graph_id
  and t.deleted_at is null
order by i.ord
