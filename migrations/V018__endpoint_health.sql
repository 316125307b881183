-- Webhook endpoint health (contract 17): the account URL's state kept by the dispatcher from
-- its attempts, deliveries held while the URL is disabled or paused, and the outbox of the
-- operator's notices. See docs/data-model.md, "Endpoint health (V018)".

ALTER TABLE webhook_endpoints
    ADD COLUMN state text NOT NULL DEFAULT 'active'
        CHECK (state IN ('active', 'failing', 'disabled', 'paused')),
    ADD COLUMN disabled_reason text CHECK (disabled_reason IN ('auto', 'gone', 'manual')),
    -- The first failed attempt with no 2xx after it.
    ADD COLUMN failing_since timestamptz,
    -- Failed attempts since `failing_since`.
    ADD COLUMN failures_since integer NOT NULL DEFAULT 0 CHECK (failures_since >= 0),
    ADD COLUMN last_success_at timestamptz,
    ADD COLUMN last_failure_at timestamptz,
    ADD COLUMN last_failure_status_code integer,
    ADD COLUMN last_failure_error text,
    -- The last `endpoint.failing` notice sent on entering `failing` (at most one a day).
    ADD COLUMN failing_noticed_at timestamptz,
    -- When the warning before `disable_at` was sent, for the current `failing_since`.
    ADD COLUMN warned_at timestamptz,
    ADD CONSTRAINT webhook_endpoints_disabled_check
        CHECK ((state = 'disabled') = (disabled_reason IS NOT NULL)),
    ADD CONSTRAINT webhook_endpoints_failing_check
        CHECK (state <> 'failing' OR failing_since IS NOT NULL);
-- The dispatcher's sweep (time-based disable, the warning before it).
CREATE INDEX webhook_endpoints_failing_idx ON webhook_endpoints (failing_since)
    WHERE state = 'failing';

-- `deliveries` is partitioned (V017): a constraint or column changed on the parent changes
-- every partition, present and future.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_state_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_state_check
    CHECK (state IN ('pending', 'delivered', 'abandoned', 'undeliverable', 'held'));
-- Whether the target is the account's URL (which has a state); a per-request `webhook_url`
-- has none.
ALTER TABLE deliveries ADD COLUMN to_account_url boolean NOT NULL DEFAULT false;
-- When a delivery was held (the URL disabled or paused): abandoned after APP_WEBHOOK_HOLD_S.
ALTER TABLE deliveries ADD COLUMN held_at timestamptz;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_held_check
    CHECK ((state = 'held') = (held_at IS NOT NULL));
UPDATE deliveries d SET to_account_url = true
WHERE d.job_id IS NULL
   OR EXISTS (SELECT FROM jobs j WHERE j.id = d.job_id AND j.webhook_url IS NULL);
CREATE INDEX deliveries_held_idx ON deliveries (held_at) WHERE state = 'held';

-- Signed notices to APP_OPERATOR_WEBHOOK_URL, sent by the dispatcher on the delivery schedule.
CREATE TABLE operator_notices (
    id               uuid        PRIMARY KEY,
    account_id       uuid        NOT NULL REFERENCES accounts (id),
    event            text        NOT NULL CHECK (event IN ('endpoint.failing', 'endpoint.disabled',
                                                           'endpoint.enabled',
                                                           'endpoint.recovered')),
    body             bytea       NOT NULL,
    state            text        NOT NULL DEFAULT 'pending'
                                 CHECK (state IN ('pending', 'delivered', 'abandoned')),
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at  timestamptz DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    CHECK ((state = 'pending') = (next_attempt_at IS NOT NULL))
);
CREATE INDEX operator_notices_due_idx ON operator_notices (next_attempt_at)
    WHERE state = 'pending';
