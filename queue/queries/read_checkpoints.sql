select
    c.checkpoint_id,
    c.parent_checkpoint_id,
    c.step,
    c.channel_versions,
    c.tasks,
    c.metadata,
    c.created_at,
    coalesce(
        (
            select jsonb_object_agg(b.channel, b.value)
            from jsonb_each_text(c.channel_versions) as v(channel, version)
            join mostrador.checkpoint_blobs b
              on b.thread_id = c.thread_id
             and b.checkpoint_ns = c.checkpoint_ns
             and b.channel = v.channel
             and b.version = v.version::bigint
        ),
        '{}'
    ) as "values!",
    coalesce(
        (
            select jsonb_agg(jsonb_build_array(w.task_id, w.channel, w.value) order by w.task_id, w.idx)
            from mostrador.checkpoint_writes w
            where w.thread_id = c.thread_id
              and w.checkpoint_ns = c.checkpoint_ns
              and w.checkpoint_id = c.checkpoint_id
        ),
        '[]'
    ) as "writes!"
from mostrador.checkpoints c
where c.thread_id = $1
  and c.checkpoint_ns = $5
  and ($2::uuid is null or c.checkpoint_id = $2)
  and (
      $4::uuid is null
      or c.step < (
          select step
          from mostrador.checkpoints
          where thread_id = $1
            and checkpoint_ns = $5
            and checkpoint_id = $4
      )
  )
order by c.step desc
limit $3
