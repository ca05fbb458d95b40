-- Where the e2e graphs record each start and finish of a node (see lib.rs).
create table if not exists e2e_executions (
    id bigint generated always as identity primary key,
    thread_id uuid not null,
    node text not null,
    task text not null,
    phase text not null check (phase in ('start', 'finish')),
    pid integer not null,
    at timestamptz not null default clock_timestamp()
);
