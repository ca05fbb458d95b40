-- Checkpoints of Python graphs, written by LangGraph's own engine through mostrador's saver. They
-- share the tables of the Rust engine's checkpoints, so deleting, copying, pruning and retention
-- of a thread carry them unchanged.
--
-- LangGraph serializes channel values and pending writes itself (its serde's type tag and bytes),
-- so they are kept as it wrote them; the api reads a checkpoint through the state snapshot the
-- worker computed with the graph, in the official server's JSON.

-- The checkpoint as LangGraph saved it, without its channel values (`v`, `ts`, `versions_seen`,
-- ...); null for the Rust engine's checkpoints.
alter table mostrador.checkpoints add column saved jsonb;
-- The state at this checkpoint as the api serves it (values, next, tasks, interrupts, metadata):
-- computed by the graph once the checkpoint is saved.
alter table mostrador.checkpoints add column snapshot jsonb;

alter table mostrador.checkpoint_blobs add column payload_type text;
alter table mostrador.checkpoint_blobs add column payload bytea;

alter table mostrador.checkpoint_writes add column payload_type text;
alter table mostrador.checkpoint_writes add column payload bytea;
alter table mostrador.checkpoint_writes add column task_path text not null default '';
