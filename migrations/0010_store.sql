-- The Store: long-term memory of graphs and clients, as the official server's `/store` routes and
-- LangGraph's `BaseStore` see it (items by namespace and key, searched by namespace prefix).
-- Every item belongs to a caller (`owner`, a subject): a client reads and writes its own, and a
-- graph run those of its thread's owner, so one caller never reads another's memories.
create table mostrador.store_items (
    owner text not null,
    -- Labels, outermost first (non-empty, no periods, as the official server requires).
    namespace text[] not null check (cardinality(namespace) > 0),
    key text not null,
    value jsonb not null,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    -- Minutes an item lives after it was written or last read (`ttl`); never expires when null.
    ttl_minutes double precision check (ttl_minutes > 0),
    expires_at timestamptz,
    primary key (owner, namespace, key)
);

create index store_items_expires_idx on mostrador.store_items (expires_at)
    where expires_at is not null;
