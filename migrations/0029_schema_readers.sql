-- Which releases may serve this schema. A migration only adds (expand): a table, a column that is
-- nullable or has a default, an index, a value; it never drops, renames or retypes what an earlier
-- release reads or writes. So a binary whose newest migration is older than the database's serves
-- it, as the previous release does while the next one rolls out or after a rollback.
-- A migration that removes something (contract) lands a release after the code stopped using it,
-- and raises `oldest_migration` to the newest migration of the first release that no longer uses
-- it, saying why: a binary that knows no migration that new then refuses to start, naming the
-- reason, instead of failing on a missing column mid-run.
create table mostrador.schema_readers (
    only_row boolean primary key default true check (only_row),
    -- A binary serves this schema only if its newest migration is at least this one.
    oldest_migration bigint not null,
    why text not null
);

insert into mostrador.schema_readers (oldest_migration, why)
values (0, 'no migration has removed anything a release reads or writes');
