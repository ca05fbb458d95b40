-- The Store's semantic index (`store.index` of a project's langgraph.json): each item's embedded
-- fields, one vector per field (a field holding several texts gives one per text, `field.0`, ...),
-- as LangGraph's stores keep them. A put replaces its item's vectors; they go with their item.
--
-- A vector is never changed once written: a put inserts new rows (new ids) and deletes the old,
-- so a process may keep a vector it has read under its id for as long as it likes. A search
-- scores every candidate's vectors exactly (no approximate index: pgvector is not assumed).
create table mostrador.store_vectors (
    id bigint generated always as identity primary key,
    owner text not null,
    namespace text[] not null,
    key text not null,
    -- The path of the value it embeds (`$` for the whole value, `text`, `tags.0`, ...).
    field text not null,
    -- Little-endian 32-bit floats, as many as the index's dims.
    vector bytea not null check (octet_length(vector) > 0 and octet_length(vector) % 4 = 0),
    foreign key (owner, namespace, key)
        references mostrador.store_items (owner, namespace, key) on delete cascade
);

create index store_vectors_item_idx on mostrador.store_vectors (owner, namespace, key);
