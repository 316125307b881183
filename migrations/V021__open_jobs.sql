-- Updates of a job's row can be HOT (issue 40, item 5): no index of `jobs` holds a column that
-- its claim, renewal, finish or rescue changes, so Postgres writes a new version of the row on
-- its own page and no index entry at all. What the queue needs to find jobs by (their status,
-- when they were enqueued, their lease) moves to `open_jobs`, a row per job not yet ended,
-- deleted when it ends: a small table whatever `jobs` holds. See docs/data-model.md.
--
-- Run it with the fleet stopped (the `release` step): it copies the open jobs over.

CREATE TABLE open_jobs (
    job_id        uuid        PRIMARY KEY,
    account_id    uuid        NOT NULL,
    type          text        NOT NULL,
    -- The job's own `created_at` (listings page by it).
    created_at    timestamptz NOT NULL,
    -- The job's status while it is open (`jobs.status` holds the same, in the same
    -- transaction).
    status        text        NOT NULL DEFAULT 'queued'
                              CHECK (status IN ('queued', 'processing')),
    -- When it was last put on the queue; NULL when that failed (the relay enqueues it first).
    enqueued_at   timestamptz,
    -- While `processing`: the claimant's token (`jobs.claim_token` holds the same) and its
    -- lease, which the holder renews; once the lease has passed, the job is rescued.
    claim_token   uuid,
    locked_until  timestamptz,
    CHECK ((status = 'processing') = (locked_until IS NOT NULL))
);
-- The relay's scans: queued jobs of a modality, never enqueued first, then by enqueue time.
CREATE INDEX open_jobs_queued_idx ON open_jobs (type, enqueued_at NULLS FIRST, created_at, job_id)
    WHERE status = 'queued';
-- The rescuer's scan: processing jobs of a modality by lease.
CREATE INDEX open_jobs_lease_idx ON open_jobs (type, locked_until) WHERE status = 'processing';
-- An account's open jobs, oldest first (`GET /api/v1/jobs?status=queued,processing`).
CREATE INDEX open_jobs_account_idx ON open_jobs (account_id, status, created_at, job_id);

-- Jobs taken before leases existed have none: they get an hour from their last change.
INSERT INTO open_jobs (job_id, account_id, type, created_at, status, enqueued_at, claim_token,
                       locked_until)
SELECT id, account_id, type, created_at, status, enqueued_at, claim_token,
       CASE WHEN status = 'processing' THEN coalesce(locked_until, updated_at + interval '1 hour')
       END
FROM jobs WHERE status IN ('queued', 'processing');

-- The indexes holding what those updates change, and the columns now kept in `open_jobs`.
DROP INDEX jobs_account_status_idx;
DROP INDEX jobs_queued_enqueued_idx;
DROP INDEX jobs_processing_lease_idx;
ALTER TABLE jobs DROP COLUMN enqueued_at, DROP COLUMN locked_until;

-- A HOT update needs room on the row's own page: a job's row is written three times (stored,
-- claimed, ended, the last with its result), so each page of `jobs` is filled to 70 % by
-- inserts and the rest is left to the new versions. Only new pages follow a changed fillfactor;
-- partitions made from now on get it as they are made.
DO $$
DECLARE
    partition regclass;
BEGIN
    FOR partition IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'jobs'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 70)', partition);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION make_month_partition(parent text, month timestamptz) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE
    first timestamptz := date_trunc('month', month, 'UTC');
    name text := parent || '_y' || to_char(first AT TIME ZONE 'UTC', 'YYYY"m"MM');
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN NULL;
    END IF;
    BEGIN
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                       name, parent);
        -- The rows of `jobs` are updated in place (HOT): see V021.
        IF parent = 'jobs' THEN
            EXECUTE format('ALTER TABLE %I SET (fillfactor = 70)', name);
        END IF;
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                       parent, name, uuid_floor(first),
                       uuid_floor(first + interval '1 month'));
    EXCEPTION WHEN duplicate_table THEN
        -- Another process made it meanwhile.
        RETURN NULL;
    END;
    RETURN name;
END
$$;
