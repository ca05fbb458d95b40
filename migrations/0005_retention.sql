-- Retention (`mostrador retention`) deletes a thread's runs, events and checkpoints and keeps its
-- row, marked: `deleted_at` (as the api's delete does) and `purged_at` once nothing else of it is
-- left. Threads the api deleted are purged by the same pass, found through this index.
alter table mostrador.threads
    add column purged_at timestamptz;

create index threads_unpurged_idx
    on mostrador.threads (deleted_at, thread_id)
    where deleted_at is not null and purged_at is null;

-- Retention reads idle threads oldest first, in keyset batches: with the thread id in the index,
-- a batch is a range scan that stops after its limit, with no sort.
drop index mostrador.threads_retention_idx;
create index threads_retention_idx
    on mostrador.threads (graph_id, last_activity_at, thread_id)
    where deleted_at is null;

-- Threads created and never run have no graph, hence no graph's policy: this one.
insert into mostrador.retention_policies (graph_id, days)
values ('_unbound', 7);
