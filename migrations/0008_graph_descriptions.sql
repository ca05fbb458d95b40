-- What the api serves about each Python graph (`assistants.get_schemas`, `get_graph`,
-- `get_subgraphs`), as a worker's runner described it with LangGraph once the graphs loaded: the
-- api runs no Python. A worker that starts describes its graphs again (the newest code wins).
create table mostrador.graph_descriptions (
    graph_id text primary key,
    description jsonb not null,
    described_at timestamptz not null default now()
);
