-- The Store's semantic index (`store.index` of a project's langgraph.json): each item's embedded
-- fields, as LangGraph's stores keep them (a field holding several texts gives one vector per
-- text, `field.0`, ...), kept in the item's row, so a search selects its candidates from one
-- table and a put, a delete or an expiry takes the vectors with the item.
--
-- An embedding is never changed once written: a put that embeds gives it a new `embedding_id`,
-- so a process may keep the vectors it has read under that id for as long as it likes. A search
-- scores every candidate's vectors exactly (no approximate index: pgvector is not assumed).
create sequence mostrador.store_embedding_ids;

alter table mostrador.store_items
    -- The vectors, little-endian 32-bit floats, one after another, all of one length.
    add column embedding bytea,
    -- The path of the value each embeds (`$` for the whole value, `text`, `tags.0`, ...).
    add column embedded_fields text[],
    add column embedding_id bigint,
    add constraint store_items_embedding_check check (
        (embedding is null) = (embedded_fields is null)
        and (embedding is null) = (embedding_id is null)
        and (embedding is null or (
            cardinality(embedded_fields) > 0
            and octet_length(embedding) > 0
            and octet_length(embedding) % (4 * cardinality(embedded_fields)) = 0
        ))
    );

create unique index store_items_embedding_idx on mostrador.store_items (embedding_id);

-- How often each owner's items changed (a put, a delete, an expiry swept, a read refreshing a time
-- to live): a process that listed an owner's candidates for a semantic search under a generation
-- answers from that list while the generation holds, instead of scanning the items again. Every
-- statement that changes items bumps it, through these triggers, so no path can forget to; owners
-- are locked in order, so two statements over several owners never wait for each other in a
-- cycle.
create table mostrador.store_generations (
    owner text primary key,
    generation bigint not null
);

create function mostrador.store_items_changed() returns trigger
language plpgsql as $$
begin
    insert into mostrador.store_generations as g (owner, generation)
    select owner, 1 from changed group by owner order by owner
    on conflict (owner) do update set generation = g.generation + 1;
    return null;
end
$$;

create trigger store_items_inserted after insert on mostrador.store_items
    referencing new table as changed
    for each statement execute function mostrador.store_items_changed();
create trigger store_items_updated after update on mostrador.store_items
    referencing new table as changed
    for each statement execute function mostrador.store_items_changed();
create trigger store_items_deleted after delete on mostrador.store_items
    referencing old table as changed
    for each statement execute function mostrador.store_items_changed();
