-- Human review and appeals (contract 14): review items, the revisions of a job's decision,
-- appeals, and webhook events beyond job.completed. See docs/data-model.md.

-- One per review of a job: created with the job's result (band, sample) or with an appeal.
-- A claim that has expired is pending again: reads and claims treat `claimed` past
-- `claim_expires_at` as `pending`.
CREATE TABLE review_items (
    id                uuid        NOT NULL,
    job_id            uuid        NOT NULL,
    account_id        uuid        NOT NULL,
    -- The job's type, for the queue's display.
    job_type          text        NOT NULL,
    reasons           text[]      NOT NULL
                                  CHECK (cardinality(reasons) >= 1
                                         AND reasons <@ ARRAY['band', 'sample', 'appeal']),
    appeal_id         uuid,
    state             text        NOT NULL DEFAULT 'pending'
                                  CHECK (state IN ('pending', 'claimed', 'decided')),
    claimed_by_type   text        CHECK (claimed_by_type IN ('key', 'user')),
    claimed_by        uuid,
    claim_expires_at  timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    decided_at        timestamptz,
    PRIMARY KEY (job_id, id),
    CHECK ((claimed_by IS NULL) = (claimed_by_type IS NULL)),
    CHECK ((claimed_by IS NULL) = (claim_expires_at IS NULL)),
    CHECK (state <> 'claimed' OR claimed_by IS NOT NULL),
    CHECK ((state = 'decided') = (decided_at IS NOT NULL))
);
-- An item by its own id.
CREATE INDEX review_items_id_idx ON review_items (id);
-- The open items of an account, appeals first then oldest first: the claim's order.
CREATE INDEX review_items_open_idx ON review_items (account_id, (appeal_id IS NULL), id)
    WHERE state <> 'decided';
-- The account's listing by state.
CREATE INDEX review_items_account_idx ON review_items (account_id, state, id);

-- The human revisions of a job's decision (revision 0, the model's, is copied from the job
-- when the first human decision is written). The job row always holds the latest.
CREATE TABLE job_decisions (
    job_id         uuid        NOT NULL,
    revision       integer     NOT NULL CHECK (revision >= 0),
    account_id     uuid        NOT NULL,
    decided_by     text        NOT NULL CHECK (decided_by IN ('model', 'review', 'appeal')),
    is_prohibited  boolean     NOT NULL,
    reason         text,
    categories     jsonb,
    -- The reviewer's note: never sent in a webhook.
    note           text        CHECK (char_length(note) BETWEEN 1 AND 2000),
    reviewer_type  text        CHECK (reviewer_type IN ('key', 'user')),
    reviewer_id    uuid,
    item_id        uuid,
    decided_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, revision),
    CHECK ((decided_by = 'model') = (reviewer_id IS NULL)),
    CHECK ((reviewer_id IS NULL) = (reviewer_type IS NULL))
);
-- Whether a reviewer has decided a job before (an appeal goes to someone else).
CREATE INDEX job_decisions_reviewer_idx ON job_decisions (reviewer_id, job_id)
    WHERE reviewer_id IS NOT NULL;

CREATE TABLE appeals (
    id           uuid        NOT NULL,
    job_id       uuid        NOT NULL,
    account_id   uuid        NOT NULL,
    reason       text        NOT NULL CHECK (char_length(reason) BETWEEN 1 AND 2000),
    -- The client's own reference: the same one again answers the same appeal.
    appeal_ref   text        CHECK (char_length(appeal_ref) BETWEEN 1 AND 200),
    state        text        NOT NULL DEFAULT 'open'
                             CHECK (state IN ('open', 'upheld', 'overturned')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    decided_at   timestamptz,
    PRIMARY KEY (job_id, id),
    CHECK ((state = 'open') = (decided_at IS NULL))
);
CREATE INDEX appeals_id_idx ON appeals (id);
CREATE UNIQUE INDEX appeals_ref_idx ON appeals (job_id, appeal_ref) WHERE appeal_ref IS NOT NULL;
CREATE UNIQUE INDEX appeals_one_open_idx ON appeals (job_id) WHERE state = 'open';

ALTER TABLE jobs
    -- The number of the latest decision (0: the model's).
    ADD COLUMN revision       integer NOT NULL DEFAULT 0 CHECK (revision >= 0),
    ADD COLUMN decided_by     text    NOT NULL DEFAULT 'model'
                                      CHECK (decided_by IN ('model', 'review', 'appeal')),
    -- NULL: never reviewed; `pending` while an item is open; `decided` after.
    ADD COLUMN review_state   text    CHECK (review_state IN ('pending', 'decided')),
    ADD COLUMN review_reasons text[];

-- Several deliveries per job now (job.completed, job.revised, appeal.decided), and test pings
-- that have no job. A job completes once (its result's UPDATE only matches a job that has not
-- ended), so it still has one job.completed delivery.
ALTER TABLE deliveries
    ADD COLUMN event text NOT NULL DEFAULT 'job.completed'
        CHECK (event IN ('job.completed', 'job.revised', 'appeal.decided', 'ping')),
    ALTER COLUMN job_id DROP NOT NULL,
    DROP CONSTRAINT deliveries_job_id_key,
    ADD CONSTRAINT deliveries_job_check CHECK ((event = 'ping') = (job_id IS NULL));
CREATE INDEX deliveries_job_idx ON deliveries (job_id);
