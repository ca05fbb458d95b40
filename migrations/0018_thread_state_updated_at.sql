-- A run's end rewrote its thread's row with a new `last_activity_at`, a column of
-- `threads_retention_idx`: never a HOT update, so every run's end inserted an entry into each of
-- the thread's four live indexes. The two meanings the column carried are now apart:
--
-- * `last_activity_at` is the retention clock. Retention counts in days, so it is restarted at
--   most once a minute (as checkpoint writes already did), and a run's end on an active thread
--   leaves the indexed column, hence the indexes, as they were.
-- * `state_updated_at` is what the api serves and sorts by: exact, and in no index. Null on a
--   thread from before this migration until its next change; reads fall back to
--   `last_activity_at` (no rewrite of the table here).
alter table mostrador.threads
    add column state_updated_at timestamptz;
alter table mostrador.threads
    alter column state_updated_at set default now();

-- A HOT update also needs room for the new version on its page. Half of each page free means
-- every thread on it can be rewritten once before the page is pruned, even when one statement
-- ends the runs of all of them (the publisher batches endings; threads made together share
-- pages). Threads are a small part of the database beside their checkpoints and events. Applies
-- to new pages, and to old ones as they are rewritten.
alter table mostrador.threads set (fillfactor = 50);
