-- A thread's values as its state answers them, for searching threads by `values` (the official
-- server's `values @> $values`): its latest root checkpoint's, a Python graph's as its runner
-- described them (`snapshot`), a Rust graph's from its channels' blobs; null without one.
create function mostrador.thread_values(thread uuid) returns jsonb
language sql stable as $$
    select case
        when c.saved is not null then c.snapshot -> 'values'
        else coalesce(
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
        )
    end
    from mostrador.checkpoints c
    where c.thread_id = thread
      and c.checkpoint_ns = ''
      and (c.saved is null or c.snapshot is not null)
    order by c.step desc
    limit 1
$$;
