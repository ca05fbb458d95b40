-- Callers are a subject, a tenant and roles, as the api's authorization policy names them; a
-- thread, a cron and an API key keep the tenant of the caller who made them. "store" was the
-- retail app's word for a tenant, and a key's single role one of the retail app's three.
alter table mostrador.threads rename column store to tenant;
alter table mostrador.crons rename column store to tenant;
alter table mostrador.api_keys rename column store to tenant;
alter table mostrador.api_keys add column roles text[] not null default '{}'
    check (array_position(roles, '') is null and array_position(roles, null) is null);
update mostrador.api_keys set roles = array[role];
alter table mostrador.api_keys drop column role;
alter index mostrador.threads_store_idx rename to threads_tenant_idx;
