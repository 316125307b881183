-- API keys. Only the SHA-256 of the full key is stored; the prefix is shown to people.
CREATE TABLE api_keys (
    id          uuid        PRIMARY KEY,
    account_id  uuid        NOT NULL REFERENCES accounts (id),
    name        text        CHECK (name IS NULL OR length(name) BETWEEN 1 AND 200),
    prefix      text        NOT NULL CHECK (prefix ~ '^[a-z0-9]{8}$'),
    key_hash    bytea       NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    scopes      text[]      NOT NULL,
    enabled     boolean     NOT NULL DEFAULT true,
    expires_at  timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz,
    -- admin:config is reserved for staff dashboard sessions and never issued to a key.
    CHECK (NOT ('admin:config' = ANY (scopes)))
);

CREATE INDEX api_keys_account_idx ON api_keys (account_id);
