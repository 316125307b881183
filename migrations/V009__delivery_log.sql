-- The delivery log (contract 11): resends, recovers and the account's listing.

-- `attempts` now counts every attempt in the log (resends and recovered schedules included);
-- `schedule_attempts` counts those of the current schedule, which a recover starts afresh.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_attempts_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_attempts_check CHECK (attempts >= 0);
ALTER TABLE deliveries ADD COLUMN schedule_attempts integer NOT NULL DEFAULT 0
    CHECK (schedule_attempts >= 0 AND schedule_attempts <= attempts);
UPDATE deliveries SET schedule_attempts = attempts;
ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_attempt_check;
ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_attempt_check CHECK (attempt >= 1);

-- A resend asked for and not yet recorded: when it may be claimed (when it was asked, or the
-- end of a dispatcher's lease on it). Only a finished delivery is resent.
ALTER TABLE deliveries ADD COLUMN resend_at timestamptz;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_resend_check
    CHECK (resend_at IS NULL OR state <> 'pending');
-- Set by a recover: such a delivery's attempts use at most part of a dispatcher's slots, so a
-- large recover never delays other deliveries.
ALTER TABLE deliveries ADD COLUMN recovered boolean NOT NULL DEFAULT false;
-- The status code of the latest attempt that got a response.
ALTER TABLE deliveries ADD COLUMN last_status_code integer;

DROP INDEX deliveries_due_idx;
CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at)
    WHERE state = 'pending' AND NOT recovered;
CREATE INDEX deliveries_recovered_due_idx ON deliveries (next_attempt_at)
    WHERE state = 'pending' AND recovered;
CREATE INDEX deliveries_resend_idx ON deliveries (resend_at) WHERE resend_at IS NOT NULL;
-- The account's log, newest first; and by state (the status filter, and a recover's window).
CREATE INDEX deliveries_account_idx ON deliveries (account_id, created_at DESC, id DESC);
CREATE INDEX deliveries_account_state_idx
    ON deliveries (account_id, state, created_at DESC, id DESC);

-- A recover, as asked: the api records it, the dispatcher applies it in batches.
CREATE TABLE delivery_recoveries (
    id            uuid        PRIMARY KEY,
    account_id    uuid        NOT NULL REFERENCES accounts (id),
    since         timestamptz NOT NULL,
    until         timestamptz NOT NULL CHECK (until > since),
    -- Deliveries abandoned after this are not part of it.
    requested_at  timestamptz NOT NULL DEFAULT now(),
    -- How many deliveries it covered when asked.
    count         bigint      NOT NULL,
    applied_at    timestamptz
);
CREATE INDEX delivery_recoveries_open_idx ON delivery_recoveries (requested_at)
    WHERE applied_at IS NULL;
