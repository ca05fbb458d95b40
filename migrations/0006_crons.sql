-- Scheduled runs (`/runs/crons`, `/threads/{id}/runs/crons`). Workers execute them: one of them
-- at a time holds the scheduler's advisory lock for a tick, enqueues the due crons' runs and moves
-- their `next_run_at` in the same transaction, so each tick enqueues exactly one run.
create table mostrador.crons (
    cron_id uuid primary key,
    graph_id text not null,
    -- A thread cron runs on its thread; without one, each run gets a new thread.
    thread_id uuid,
    -- Who created it: the owner (and store) of the threads it creates.
    owner text not null,
    store text,
    -- Five fields (minute hour day-of-month month day-of-week), UTC.
    schedule text not null,
    -- The runs' input, config, metadata, stream modes and multitask strategy.
    payload jsonb not null,
    metadata jsonb not null default '{}',
    on_run_completed text not null default 'keep' check (on_run_completed in ('keep', 'delete')),
    enabled boolean not null default true,
    end_time timestamptz,
    next_run_at timestamptz not null,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);

create index crons_due_idx on mostrador.crons (next_run_at) where enabled;
create index crons_owner_idx on mostrador.crons (owner, created_at desc);
