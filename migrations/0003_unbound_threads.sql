-- A thread may be created before any run names its graph (the `langgraph-sdk` creates threads
-- without one); its first run binds it. Retention applies per graph, so threads that never ran
-- have no graph's policy: `mostrador retention` must treat them on their own.
alter table mostrador.threads
    alter column graph_id drop not null;

-- Thread search: a caller sees the threads it owns and, as a manager, those of its store.
create index threads_owner_idx
    on mostrador.threads (owner, created_at desc)
    where deleted_at is null;
create index threads_store_idx
    on mostrador.threads (store, created_at desc)
    where deleted_at is null;
