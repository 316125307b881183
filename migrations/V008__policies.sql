-- An account's own policy: custom categories and blocklist terms; and the hash banks of known
-- media, global or per account.

-- Bumped in the same transaction as every change to the account's custom categories or
-- blocklist terms, so a worker knows when the matchers it compiled and cached are stale.
ALTER TABLE accounts ADD COLUMN policy_version bigint NOT NULL DEFAULT 0;

CREATE TABLE custom_categories (
    id           uuid        PRIMARY KEY,
    account_id   uuid        NOT NULL REFERENCES accounts (id),
    -- The key of its result under `categories.custom`.
    name         text        NOT NULL CHECK (name ~ '^[a-z0-9_]{1,64}$'),
    -- The policy text given to a model.
    description  text        NOT NULL CHECK (char_length(description) BETWEEN 1 AND 2000),
    -- Terms the local classifier matches; may be empty.
    keywords     text[]      NOT NULL DEFAULT '{}',
    enabled      boolean     NOT NULL DEFAULT true,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, name)
);

-- An account's terms, added to the service's global list. Stored as submitted (trimmed); the
-- matcher normalises them.
CREATE TABLE blocklist_terms (
    account_id  uuid        NOT NULL REFERENCES accounts (id),
    term        text        NOT NULL CHECK (char_length(term) BETWEEN 1 AND 100),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, term)
);

-- Known media: the exact SHA-256 of the bytes, and for images the PDQ perceptual hash.
CREATE TABLE hash_bank (
    id          uuid        PRIMARY KEY,
    -- NULL: the service's global bank, checked for every account.
    account_id  uuid        REFERENCES accounts (id),
    -- `nsfw`, `underage`, `ai_adult_general` or the name of one of the account's custom
    -- categories.
    category    text        NOT NULL CHECK (category ~ '^[a-z0-9_]{1,64}$'),
    sha256      bytea       CHECK (octet_length(sha256) = 32),
    pdq         bytea       CHECK (octet_length(pdq) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (sha256 IS NOT NULL OR pdq IS NOT NULL)
);

-- Adding the same entry again finds the first one instead of making a twin.
CREATE UNIQUE INDEX hash_bank_entry_key ON hash_bank (account_id, category, sha256, pdq)
    NULLS NOT DISTINCT;
-- Exact lookups of a file's SHA-256; the included columns let them skip the heap.
CREATE INDEX hash_bank_sha256_idx ON hash_bank (sha256) INCLUDE (account_id, category)
    WHERE sha256 IS NOT NULL;
-- The perceptual entries a worker compares an image with: the global ones and an account's.
CREATE INDEX hash_bank_pdq_idx ON hash_bank (account_id) INCLUDE (category, pdq)
    WHERE pdq IS NOT NULL;
