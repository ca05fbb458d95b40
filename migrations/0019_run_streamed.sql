-- Whether a client streams the run's events as they come from its start (`runs.stream`): the
-- worker then writes the run's first event at once. A run nobody streams (a wait, a background
-- run, a batch, a cron's) has its first events written with the next flush or its end, whichever
-- comes first: a short run's events and its end are then one commit, not two. A client that
-- joins such a run later sees its events at most one flush interval late.
alter table mostrador.runs
    add column streamed boolean not null default false;
