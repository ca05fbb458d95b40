-- A stateless run's thread that its client asked to go when the run ends (`on_completion:
-- delete`, the official default for `/runs`, `/runs/stream`, `/runs/batch`, and for crons'
-- `on_run_completed`): the statement that ends the run marks it deleted, and retention purges
-- it, as it purges threads the api deleted.
alter table mostrador.threads
    add column temporary boolean not null default false;

-- Threads of graphs that have no policy of their own (Python graphs from a `langgraph.json`)
-- are deleted after this many idle days; an operator changes it as any other policy.
insert into mostrador.retention_policies (graph_id, days)
values ('_default', 90);
