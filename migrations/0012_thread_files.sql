-- Files of a thread's agent (deep agents' file tools and sandbox, through the worker): stored per
-- thread, beside its checkpoints and never in them, so a checkpoint stays small whatever the
-- agent keeps. They go with their thread: copied with it, deleted with it, purged by retention.
create table mostrador.thread_files (
    thread_id uuid not null references mostrador.threads (thread_id),
    -- Absolute, as deepagents' backends name files.
    path text not null check (path like '/%' and octet_length(path) <= 4096),
    content bytea not null,
    -- Bytes that are not UTF-8 text: deepagents' `base64` encoding.
    is_binary boolean not null,
    created_at timestamptz not null default now(),
    modified_at timestamptz not null default now(),
    primary key (thread_id, path)
);
