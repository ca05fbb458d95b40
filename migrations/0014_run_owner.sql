-- Each caller's share of the queue: a run records its thread's owner when it is enqueued, and the
-- pending runs of one owner are counted through this index (at most the share's rows), so one
-- caller cannot fill a graph's queue for everyone. Runs enqueued before this migration have none
-- and count for no one.
alter table mostrador.runs add column owner text;

create index runs_pending_owner_idx
    on mostrador.runs (owner)
    where status = 'pending';
