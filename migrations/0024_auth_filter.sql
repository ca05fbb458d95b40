-- Whether `metadata` passes the filter a project's auth handler returned (`auth.path`), as the
-- official server matches it: every key equal (`{"owner": "ana"}`, `{"owner": {"$eq": "ana"}}`),
-- a list holding a value or each of several (`{"tags": {"$contains": "x"}}`), `$or` / `$and` over
-- groups of these. The api checks a filter's shape before it reaches a query (two levels of
-- `$or` / `$and` at most, each over two groups or more) and matches a single row with the same
-- rule in Rust (`api/src/custom_auth/filter.rs`); searches and counts filter here, in the query.
create function mostrador.auth_admits(metadata jsonb, filter jsonb) returns boolean
language plpgsql immutable parallel safe as $$
declare
    key text;
    wanted jsonb;
    operator text;
    operand jsonb;
begin
    if filter is null then
        return true;
    end if;
    for key, wanted in select * from jsonb_each(filter) loop
        if key = '$or' then
            if not exists (
                select 1 from jsonb_array_elements(wanted) g(filter)
                where mostrador.auth_admits(metadata, g.filter)
            ) then
                return false;
            end if;
        elsif key = '$and' then
            if exists (
                select 1 from jsonb_array_elements(wanted) g(filter)
                where not mostrador.auth_admits(metadata, g.filter)
            ) then
                return false;
            end if;
        elsif jsonb_typeof(wanted) = 'object' then
            select o.key, o.value into operator, operand from jsonb_each(wanted) o limit 1;
            if operator = '$eq' then
                if metadata -> key is distinct from operand then
                    return false;
                end if;
            elsif operator = '$contains' then
                if jsonb_typeof(metadata -> key) is distinct from 'array' then
                    return false;
                end if;
                if exists (
                    select 1
                    from jsonb_array_elements(
                        case when jsonb_typeof(operand) = 'array' then operand
                             else jsonb_build_array(operand) end
                    ) w(element)
                    where not exists (
                        select 1 from jsonb_array_elements(metadata -> key) m(element)
                        where m.element = w.element
                    )
                ) then
                    return false;
                end if;
            end if;
        elsif metadata -> key is distinct from wanted then
            return false;
        end if;
    end loop;
    return true;
end
$$;
