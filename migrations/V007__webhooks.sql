-- The account's global webhook URL (one per account; deleting the row clears it).
CREATE TABLE webhook_endpoints (
    account_id  uuid        PRIMARY KEY REFERENCES accounts (id),
    url         text        NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Signing secrets, sealed with AES-256-GCM under APP_ENCRYPTION_KEY. The active secret has
-- no expiry; a rotated-out secret keeps signing until its expires_at.
CREATE TABLE webhook_secrets (
    id          uuid        PRIMARY KEY,
    account_id  uuid        NOT NULL REFERENCES accounts (id),
    nonce       bytea       NOT NULL CHECK (length(nonce) = 12),
    sealed      bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz
);
CREATE UNIQUE INDEX webhook_secrets_one_active_idx ON webhook_secrets (account_id)
    WHERE expires_at IS NULL;
CREATE INDEX webhook_secrets_account_idx ON webhook_secrets (account_id, created_at);

-- One delivery per job that has a target when it completes; the body bytes are fixed then
-- and sent unchanged on every attempt.
CREATE TABLE deliveries (
    id               uuid        PRIMARY KEY,
    job_id           uuid        NOT NULL UNIQUE REFERENCES jobs (id),
    account_id       uuid        NOT NULL REFERENCES accounts (id),
    target_url       text        NOT NULL,
    body             bytea       NOT NULL,
    state            text        NOT NULL DEFAULT 'pending'
                                 CHECK (state IN ('pending', 'delivered', 'abandoned',
                                                  'undeliverable')),
    -- Attempts started so far (claiming an attempt counts it).
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts BETWEEN 0 AND 12),
    -- When the next attempt is due by the schedule.
    scheduled_at     timestamptz NOT NULL DEFAULT now(),
    -- When the row may next be claimed: the schedule, or the end of a dispatcher's lease.
    next_attempt_at  timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    CHECK ((state = 'pending') = (next_attempt_at IS NOT NULL))
);
CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at) WHERE state = 'pending';

-- Every attempt, as it ended.
CREATE TABLE delivery_attempts (
    delivery_id    uuid        NOT NULL REFERENCES deliveries (id),
    attempt        integer     NOT NULL CHECK (attempt BETWEEN 1 AND 12),
    scheduled_at   timestamptz NOT NULL,
    started_at     timestamptz NOT NULL,
    duration_ms    integer     NOT NULL,
    status_code    integer,
    error          text,
    -- At most 2 KB of the response body.
    response_body  text,
    PRIMARY KEY (delivery_id, attempt)
);
