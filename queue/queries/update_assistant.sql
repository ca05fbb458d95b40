with old as (
    select *
    from mostrador.assistants
    where assistant_id = $1 and ($2::text is null or owner = $2)
    for update
),
new as (
    select
        old.assistant_id,
        (select coalesce(max(version), 0) + 1
         from mostrador.assistant_versions v
         where v.assistant_id = old.assistant_id) as version,
        coalesce($3, old.graph_id) as graph_id,
        coalesce($4, old.name) as name,
        coalesce($5, old.description) as description,
        coalesce($6, old.config) as config,
        coalesce($7, old.context) as context,
        old.metadata || coalesce($8, '{}'::jsonb) as metadata
    from old
),
versioned as (
    insert into mostrador.assistant_versions
        (assistant_id, version, graph_id, name, description, config, context, metadata)
    select assistant_id, version, graph_id, name, description, config, context, metadata
    from new
),
-- An assistant keeps its newest versions ($9 with the new one): every update adds one, and no
-- caller fills the database with them.
pruned as (
    delete from mostrador.assistant_versions v
    using new
    where v.assistant_id = new.assistant_id
      and v.version <= new.version - $9
)
update mostrador.assistants a
set version = new.version, graph_id = new.graph_id, name = new.name,
    description = new.description, config = new.config, context = new.context,
    metadata = new.metadata, updated_at = now()
from new
where a.assistant_id = new.assistant_id
returning a.assistant_id, a.graph_id, a.name, a.description, a.config, a.context,
          a.metadata, a.version, a.created_at, a.updated_at
