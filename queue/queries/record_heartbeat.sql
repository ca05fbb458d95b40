with beat as (
    insert into mostrador.workers (worker_id, name, graphs, lease, expires_at)
    values ($1, $2, $3, make_interval(secs => $4), now() + make_interval(secs => $4))
    on conflict (worker_id) do update
    set heartbeat_at = now(),
        expires_at = excluded.expires_at
),
-- Runs the database says the worker holds and it does not, untouched for a whole
-- lease (a run just claimed is not yet among `held`): their end, which the worker saw
-- written, is not in this database (a failover to a standby that was behind).
-- Disowned, the sweep gives them back as it gives back a lost worker's.
disowned as (
    update mostrador.runs r
    set lease_owner = null
    where r.run_id in (
        select o.run_id
        from mostrador.runs o
        where o.lease_owner = $1
          and o.status = 'running'
          and o.run_id <> all($5::uuid[])
          and o.updated_at < now() - make_interval(secs => $4)
        for update skip locked
    )
)
select
    h.run_id as "run_id!: RunId",
    h.attempt as "attempt!",
    coalesce(r.status = 'running' and r.lease_owner = $1, false) as "held!",
    r.cancel_action as "cancel_action: CancelAction"
from unnest($5::uuid[], $6::int[]) as h(run_id, attempt)
-- By its id alone, then checked (see `crate::db`).
left join lateral (
    select r.status, r.lease_owner, r.cancel_action
    from mostrador.runs r
    where r.run_id = h.run_id
      and r.attempt = h.attempt
    offset 0
) r on true
