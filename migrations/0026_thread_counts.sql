-- How many threads each owner has (not deleted), so that creating one can be held to a quota per
-- caller without counting them: triggers keep the count, so no path that creates or deletes a
-- thread can forget to. Each statement adds to one of eight rows per owner, chosen at random, so
-- that one owner's concurrent creations seldom wait on each other's row; the owner's count is
-- their sum.
create table mostrador.thread_counts (
    owner text not null,
    shard smallint not null,
    threads bigint not null,
    primary key (owner, shard)
);

insert into mostrador.thread_counts (owner, shard, threads)
select owner, 0, count(*)
from mostrador.threads
where deleted_at is null
group by owner;

create function mostrador.threads_created() returns trigger
language plpgsql as $$
begin
    insert into mostrador.thread_counts as c (owner, shard, threads)
    select owner, floor(random() * 8)::smallint, count(*)
    from created
    where deleted_at is null
    group by owner
    order by owner
    on conflict (owner, shard) do update set threads = c.threads + excluded.threads;
    return null;
end
$$;

create trigger threads_created after insert on mostrador.threads
    referencing new table as created
    for each statement execute function mostrador.threads_created();

create function mostrador.thread_deleted() returns trigger
language plpgsql as $$
begin
    insert into mostrador.thread_counts as c (owner, shard, threads)
    values (old.owner, floor(random() * 8)::smallint, -1)
    on conflict (owner, shard) do update set threads = c.threads - 1;
    return null;
end
$$;

create trigger thread_deleted after update of deleted_at on mostrador.threads
    for each row when (old.deleted_at is null and new.deleted_at is not null)
    execute function mostrador.thread_deleted();

-- Refuses (SQLSTATE MQ001) a statement that would give `owner` more than `quota` threads, adding
-- `adding`; a null quota holds always. Counted without a lock: concurrent creations can pass the
-- quota by as many as run at once.
create function mostrador.hold_thread_quota(owner text, adding bigint, quota bigint) returns boolean
language plpgsql stable as $$
declare
    held bigint;
begin
    if quota is null then
        return true;
    end if;
    select coalesce(sum(c.threads), 0) into held
    from mostrador.thread_counts c
    where c.owner = hold_thread_quota.owner;
    if held + adding > quota then
        raise exception 'a caller has at most % threads: delete some first', quota
            using errcode = 'MQ001';
    end if;
    return true;
end
$$;
