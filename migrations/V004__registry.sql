-- Shared Registry entries. `identifier` is HMAC-SHA256(APP_REGISTRY_KEY, the client's SHA-256
-- bytes), never the client's hash. `expired` is not stored: it is derived from `expires_at`.
CREATE TABLE registry_entries (
    id               uuid        PRIMARY KEY,
    account_id       uuid        NOT NULL REFERENCES accounts (id),
    identifier_type  text        NOT NULL DEFAULT 'email' CHECK (identifier_type IN ('email')),
    identifier       bytea       NOT NULL CHECK (length(identifier) = 32),
    category         text        NOT NULL CHECK (category IN (
                                     'payment_fraud', 'prohibited_content', 'ban_evasion')),
    member_case_ref  text        NOT NULL CHECK (char_length(member_case_ref) BETWEEN 1 AND 200),
    status           text        NOT NULL DEFAULT 'active'
                                 CHECK (status IN ('active', 'disputed', 'revoked')),
    -- Who revoked it: the member, or an operator upholding a dispute (then a re-report is
    -- refused with 409).
    revoked_by       text        CHECK (revoked_by IN ('member', 'dispute')),
    revoke_reason    text        CHECK (char_length(revoke_reason) BETWEEN 1 AND 200),
    revoked_at       timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    -- When the member last reported it (created or refreshed).
    reported_at      timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL,
    UNIQUE (account_id, identifier, category),
    CHECK ((status = 'revoked') = (revoked_at IS NOT NULL)),
    CHECK ((status = 'revoked') = (revoked_by IS NOT NULL)),
    CHECK ((status = 'revoked') = (revoke_reason IS NOT NULL))
);

-- Checks look entries up by identifier; the included columns let them skip the heap.
CREATE INDEX registry_entries_identifier_idx ON registry_entries (identifier)
    INCLUDE (account_id, category, status, created_at, reported_at, expires_at);
-- A member's own listing, oldest first (ids are time-ordered).
CREATE INDEX registry_entries_account_idx ON registry_entries (account_id, id);
