-- A thread's time to live, as the official server has it (`ttl` when a thread is created or
-- updated, or `checkpointer.ttl.default_ttl` of a langgraph.json): once idle `ttl_minutes`, the
-- thread is deleted (`delete`) or keeps only its latest checkpoint (`keep_latest`, noted in
-- `ttl_applied_at` until its next activity). Workers sweep the expired ones.
alter table mostrador.threads
    add column ttl_minutes double precision check (ttl_minutes > 0),
    add column ttl_strategy text not null default 'delete'
        check (ttl_strategy in ('delete', 'keep_latest')),
    add column ttl_applied_at timestamptz;

-- The sweep reads threads with a time to live, longest idle first: only they are in the index.
create index threads_ttl_idx
    on mostrador.threads (last_activity_at, thread_id)
    where ttl_minutes is not null and deleted_at is null;
