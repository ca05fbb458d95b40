-- The checkpoint write of a claimed run's superstep, as queue::state::checkpoint::PgCheckpointer::put_checkpoint
-- writes it: the lease's fence, one changed channel's blob, the thread's retention clock (a no-op
-- within a minute), the checkpoint. Each pgbench client writes its own thread (:client_id).
with fence as (select 1 from mostrador.runs where run_id = md5('r'||:client_id)::uuid and attempt = 1 and status = 'running' for key share),
allowed as (select exists (select 1 from fence) as ok),
blobs as (insert into mostrador.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, value)
  select md5('t'||:client_id)::uuid, '', channel, version, value
  from unnest(array['log']::text[], array[(extract(epoch from clock_timestamp())*1000000)::int8], array['["a","b","c"]'::jsonb]) as b(channel, version, value)
  where (select ok from allowed) on conflict do nothing),
touched as (update mostrador.threads set last_activity_at = now() where thread_id = md5('t'||:client_id)::uuid and last_activity_at < now() - interval '1 minute' and (select ok from allowed)),
saved as (insert into mostrador.checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, channel_versions, next, tasks, metadata)
  select md5('t'||:client_id)::uuid, '', gen_random_uuid(), null, md5('r'||:client_id)::uuid, 1, '{"log": 3, "__start__": 1}'::jsonb, array['n2'], '[]'::jsonb, '{"source":"loop","step":1}'::jsonb
  where (select ok from allowed) on conflict do nothing)
select ok from allowed;
