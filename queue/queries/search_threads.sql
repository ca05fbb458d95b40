select
    s.thread_id as "thread_id!: ThreadId",
    s.graph_id,
    s.owner as "owner!",
    s.tenant,
    s.status as "status!: ThreadStatus",
    s.metadata as "metadata!",
    s.created_at as "created_at!",
    s.updated_at as "updated_at!",
    s.state_updated_at as "state_updated_at!"
from (
    select
        t.thread_id,
        t.graph_id,
        t.owner,
        t.tenant,
        case
            when exists (
                select 1
                from mostrador.runs r
                where r.thread_id = t.thread_id
                  and r.status in ('pending', 'running')
            ) then 'busy'
            else t.status
        end as status,
        t.metadata,
        t.created_at,
        t.updated_at,
        coalesce(t.state_updated_at, t.last_activity_at) as state_updated_at
    from mostrador.threads t
    where t.deleted_at is null
      and ($1::text is null or t.owner = $1 or ($2::text is not null and t.tenant = $2
          and ($10::text[] is null or t.graph_id = any($10))))
      and ($12::jsonb is null or mostrador.auth_admits(t.metadata, $12))
      and ($3::jsonb is null or t.metadata @> $3)
      and ($4::uuid[] is null or t.thread_id = any($4))
      and ($11::jsonb is null or mostrador.thread_values(t.thread_id) @> $11)
) s
where ($5::mostrador.thread_status is null or s.status = $5)
order by
    case when $9 and $8 <> 'thread_id' and $8 <> 'status' then
        case $8
            when 'created_at' then s.created_at
            when 'updated_at' then s.updated_at
            else s.state_updated_at
        end
    end asc,
    case when not $9 and $8 <> 'thread_id' and $8 <> 'status' then
        case $8
            when 'created_at' then s.created_at
            when 'updated_at' then s.updated_at
            else s.state_updated_at
        end
    end desc,
    case when $9 and $8 = 'status' then s.status::text end asc,
    case when not $9 and $8 = 'status' then s.status::text end desc,
    case when $9 then s.thread_id end asc,
    s.thread_id desc
limit $6
offset $7
