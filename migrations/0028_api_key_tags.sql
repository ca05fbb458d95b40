-- A secret of this deployment's that API keys carry a tag of (an HMAC of their random part), so
-- that a guessed key is refused without a query: only a key this deployment made, or one made
-- before keys had tags, is looked up. 244 random bits from PostgreSQL's strong random source.
create table mostrador.api_key_secret (
    only_row boolean primary key default true check (only_row),
    secret bytea not null check (octet_length(secret) = 32)
);

insert into mostrador.api_key_secret (secret)
values (uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));

-- Keys made from now on carry a tag; the ones before do not, and are still looked up while any of
-- them is active.
alter table mostrador.api_keys add column tagged boolean not null default false;
