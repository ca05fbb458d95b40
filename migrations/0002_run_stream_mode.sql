-- The stream modes the run's client asked for (`stream_mode`): the worker stores the events of
-- these modes only. LangGraph's default is `values`.
alter table mostrador.runs
    add column stream_mode text[] not null default '{values}';
