-- Assistants as configured instances of a graph, as the official server keeps them: each update
-- is a new version, and one version is the latest (the assistant's row holds it). Every graph
-- also has its own assistant, which is code, not a row. An assistant belongs to the caller who
-- created it (`owner`, a subject), the only one who sees, runs, changes or deletes it.
create table mostrador.assistants (
    assistant_id uuid primary key,
    owner text not null,
    graph_id text not null,
    name text not null,
    description text,
    config jsonb not null default '{}',
    context jsonb not null default '{}',
    metadata jsonb not null default '{}',
    version integer not null default 1,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);

create index assistants_owner_idx on mostrador.assistants (owner, created_at);

create table mostrador.assistant_versions (
    assistant_id uuid not null references mostrador.assistants on delete cascade,
    version integer not null,
    graph_id text not null,
    name text not null,
    description text,
    config jsonb not null default '{}',
    context jsonb not null default '{}',
    metadata jsonb not null default '{}',
    created_at timestamptz not null default now(),
    primary key (assistant_id, version)
);
