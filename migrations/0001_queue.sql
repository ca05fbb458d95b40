-- The core schema: threads, runs and their event log, workers and their leases, checkpoints,
-- retention policies and tool effects. Everything lives in the `mostrador` schema; the retail
-- business tables get a schema of their own.

create schema mostrador;

create type mostrador.thread_status as enum ('idle', 'busy', 'interrupted', 'error');
create type mostrador.run_status as enum ('pending', 'running', 'success', 'error', 'timeout', 'interrupted');
create type mostrador.multitask_strategy as enum ('reject', 'interrupt', 'rollback', 'enqueue');
create type mostrador.cancel_action as enum ('interrupt', 'rollback');

-- A thread is written before any checkpoint exists: it is what authorizes everything else.
create table mostrador.threads (
    thread_id uuid primary key,
    graph_id text not null,
    owner text not null,
    store text,
    status mostrador.thread_status not null default 'idle',
    metadata jsonb not null default '{}',
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    -- A real column, so retention is an index range scan and never reads JSON.
    last_activity_at timestamptz not null default now(),
    deleted_at timestamptz
);

create index threads_retention_idx
    on mostrador.threads (graph_id, last_activity_at)
    where deleted_at is null;

-- One row per worker process start. Heartbeats extend `expires_at` with one statement per process,
-- whatever the number of runs it holds; a run's lease is its owner's lease.
create table mostrador.workers (
    worker_id uuid primary key,
    name text not null,
    graphs text[] not null,
    lease interval not null,
    started_at timestamptz not null default now(),
    heartbeat_at timestamptz not null default now(),
    expires_at timestamptz not null
);

-- N.B. No foreign keys: the runs table is the hot queue, and every enqueue and claim would pay for
-- them. `enqueue` checks the thread in its transaction instead.
create table mostrador.runs (
    run_id uuid primary key,
    -- Queue order within a thread: drawn at insert time, after the thread row is locked, so it
    -- follows the order in which enqueues committed their strategy decision.
    seq bigint generated always as identity,
    thread_id uuid not null,
    graph_id text not null,
    status mostrador.run_status not null default 'pending',
    input jsonb,
    command jsonb,
    config jsonb not null default '{}',
    metadata jsonb not null default '{}',
    multitask_strategy mostrador.multitask_strategy not null default 'reject',
    -- Lower runs first.
    priority integer not null default 0,
    available_at timestamptz not null default now(),
    -- The fencing token: incremented by every claim, never decremented. Attempts used up are
    -- `attempt - drain_count`, because a drain release gives its attempt back.
    attempt integer not null default 0,
    max_attempts integer not null default 3 check (max_attempts >= 1),
    lease_owner uuid,
    drain_count integer not null default 0,
    cancel_action mostrador.cancel_action,
    -- The last `run_events.seq` handed out; appends bump it under the run's row lock.
    event_seq bigint not null default 0,
    error jsonb,
    trace_id text,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    started_at timestamptz,
    finished_at timestamptz
) with (
    -- Room on each page so that heartbeat-free updates (event_seq, cancel_action) stay HOT.
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);

-- Serves the claim: its predicate and order are exactly the claim's, so a claim is an index range
-- scan however many finished runs the table holds.
create index runs_claim_idx
    on mostrador.runs (priority, available_at, seq)
    where status = 'pending';

-- The invariant: at most one running run per thread.
create unique index runs_one_running_per_thread
    on mostrador.runs (thread_id)
    where status = 'running';

-- A thread's unfinished runs in queue order: the claim only takes the head of each thread.
create index runs_thread_active_idx
    on mostrador.runs (thread_id, seq)
    where status in ('pending', 'running');

-- A thread's runs, newest first (listing, retention).
create index runs_thread_idx
    on mostrador.runs (thread_id, created_at desc);

-- The durable log of everything streamed for a run. `seq` is the SSE event id.
create table mostrador.run_events (
    run_id uuid not null,
    seq bigint not null,
    event text not null,
    data jsonb not null default 'null',
    created_at timestamptz not null default now(),
    primary key (run_id, seq)
);

-- One row per superstep. Every checkpoint references complete channel values through
-- `channel_versions`, so pruning old checkpoints of a thread is safe.
create table mostrador.checkpoints (
    thread_id uuid not null,
    checkpoint_ns text not null default '',
    checkpoint_id uuid not null,
    parent_checkpoint_id uuid,
    run_id uuid,
    -- Grows with every checkpoint of a thread, so "latest" never depends on a clock.
    step bigint not null,
    channel_versions jsonb not null default '{}',
    -- The nodes of the next superstep, and its tasks with their `Send` arguments.
    next text[] not null default '{}',
    tasks jsonb not null default '[]',
    metadata jsonb not null default '{}',
    created_at timestamptz not null default now(),
    primary key (thread_id, checkpoint_ns, checkpoint_id)
);

create index checkpoints_latest_idx on mostrador.checkpoints (thread_id, checkpoint_ns, step desc);
create index checkpoints_run_idx on mostrador.checkpoints (run_id);

-- A channel's value is written only when its version changes.
create table mostrador.checkpoint_blobs (
    thread_id uuid not null,
    checkpoint_ns text not null default '',
    channel text not null,
    version bigint not null,
    value jsonb,
    primary key (thread_id, checkpoint_ns, channel, version)
);

-- Pending writes: each task's writes, saved the moment it finishes.
create table mostrador.checkpoint_writes (
    thread_id uuid not null,
    checkpoint_ns text not null default '',
    checkpoint_id uuid not null,
    task_id text not null,
    idx integer not null,
    channel text not null,
    value jsonb,
    primary key (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);

-- Per-graph retention is data, not code.
create table mostrador.retention_policies (
    graph_id text primary key,
    days integer not null check (days > 0),
    updated_at timestamptz not null default now()
);

insert into mostrador.retention_policies (graph_id, days)
values ('tienda', 7), ('cliente', 90), ('compras', 30), ('fichas', 7);

-- Results of tools with external effects, by idempotency key (tool-call id or task id), so a
-- re-executed tool returns the recorded result instead of acting twice.
create table mostrador.tool_effects (
    idempotency_key text primary key,
    tool text not null,
    thread_id uuid,
    run_id uuid,
    result jsonb not null,
    created_at timestamptz not null default now()
);

-- Every event insert notifies, in the inserting transaction, so no path can log an event and forget
-- to wake its subscribers. The payload carries the whole event when it fits under Postgres' limit
-- (payloads must be shorter than 8000 bytes); otherwise only `(run_id, seq)`, and subscribers read
-- the row. Either way NOTIFY is a hint: subscribers re-read the table after any gap.
-- N.B. A statement-level trigger over the transition table: a row-level plpgsql trigger cost about
-- 60 µs per event, a third of a run's completion.
create function mostrador.notify_run_events() returns trigger
language plpgsql as $$
begin
    perform pg_notify(
        'mostrador_run_events',
        case
            when octet_length(payload) < 8000 then payload
            else json_build_object('run_id', run_id, 'seq', seq)::text
        end
    )
    from (
        select
            run_id,
            seq,
            json_build_object('run_id', run_id, 'seq', seq, 'event', event, 'data', data)::text as payload
        from appended
        order by run_id, seq
    ) events;
    return null;
end
$$;

create trigger run_events_notify
    after insert on mostrador.run_events
    referencing new table as appended
    for each statement execute function mostrador.notify_run_events();
