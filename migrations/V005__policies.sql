-- What an account asks the classifier to check beyond the service's own lists: its custom
-- categories, its blocklist terms, and hash banks (global or per account).

-- Bumped in the same transaction as every change to the account's custom categories or
-- blocklist, so workers know when a compiled policy they cache is out of date.
ALTER TABLE accounts ADD COLUMN policy_version bigint NOT NULL DEFAULT 0;

CREATE TABLE custom_categories (
    id           uuid        PRIMARY KEY,
    account_id   uuid        NOT NULL REFERENCES accounts (id),
    name         text        NOT NULL CHECK (name ~ '^[a-z0-9_]{1,64}$'),
    -- The policy text given to a model.
    description  text        NOT NULL CHECK (char_length(description) BETWEEN 1 AND 2000),
    -- Terms the local classifier matches.
    keywords     text[]      NOT NULL DEFAULT '{}',
    enabled      boolean     NOT NULL DEFAULT true,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, name)
);

CREATE TABLE blocklist_terms (
    account_id  uuid        NOT NULL REFERENCES accounts (id),
    term        text        NOT NULL CHECK (char_length(term) BETWEEN 1 AND 100),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, term)
);

-- Known media: exact SHA-256 for every kind, PDQ perceptual hashes for images.
CREATE TABLE hash_bank (
    id          uuid        PRIMARY KEY,
    -- NULL for the service's global bank.
    account_id  uuid        REFERENCES accounts (id),
    -- `nsfw`, `underage`, `ai_adult_general` or a custom category's name.
    category    text        NOT NULL CHECK (category ~ '^[a-z0-9_]{1,64}$'),
    sha256      bytea       CHECK (octet_length(sha256) = 32),
    pdq         bytea       CHECK (octet_length(pdq) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (sha256 IS NOT NULL OR pdq IS NOT NULL)
);

CREATE INDEX hash_bank_sha256_idx ON hash_bank (sha256) WHERE sha256 IS NOT NULL;
CREATE INDEX hash_bank_pdq_idx ON hash_bank (account_id) WHERE pdq IS NOT NULL;
