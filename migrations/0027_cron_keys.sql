-- The API key a cron was made (or last changed) with, if it was: revoking the key, or its expiry,
-- stops the cron, so a credential taken back schedules nothing more.
alter table mostrador.crons add column api_key_id uuid;

create index crons_api_key_idx on mostrador.crons (api_key_id) where api_key_id is not null;
