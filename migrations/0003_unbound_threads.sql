-- A thread may be created before any run names its graph (the `langgraph-sdk` creates threads
-- without one); its first run binds it. Retention applies per graph, so threads that never ran
-- have no graph's policy: `mostrador retention` must treat them on their own.
alter table mostrador.threads
    alter column graph_id drop not null;
