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
