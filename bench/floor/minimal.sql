-- The least a fenced checkpoint write can be: the lease's fence (the run's row, locked against a
-- concurrent sweep, as every fenced write locks it) and one checkpoint row, its values inline; no
-- blob, no retention clock. Each pgbench client writes its own thread (:client_id).
with fence as (select 1 from mostrador.runs where run_id = md5('r'||:client_id)::uuid and attempt = 1 and status = 'running' for key share)
insert into mostrador.checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, channel_versions, next, tasks, metadata)
select md5('t'||:client_id)::uuid, '', gen_random_uuid(), null, md5('r'||:client_id)::uuid, 1, '{"log": ["a","b","c"]}'::jsonb, array['n2'], '[]'::jsonb, '{"source":"loop","step":1}'::jsonb
where exists (select 1 from fence);
