-- API keys beside JWTs, as the official LangGraph server's clients send them (`x-api-key`, from
-- LANGGRAPH_API_KEY), or as a bearer token. A key stands for a caller exactly as a token does:
-- a subject, a role and a store. Only the SHA-256 of a key is kept (the key is shown once, when
-- it is created), so this table authenticates nobody if it leaks; a key is random enough (256
-- bits) that a plain hash cannot be reversed by guessing.
create table mostrador.api_keys (
    key_id uuid primary key,
    -- `mostrador_` and the key's first characters, in clear, so that people can tell keys apart.
    key_prefix text not null,
    -- The api finds a key by this, with one lookup of the unique index.
    key_hash bytea not null unique check (length(key_hash) = 32),
    subject text not null check (subject <> ''),
    role text not null check (role in ('customer', 'clerk', 'manager')),
    store text check (store <> ''),
    created_at timestamptz not null default now(),
    -- Never, when null.
    expires_at timestamptz,
    revoked_at timestamptz
);
