-- Job leases: who holds a `processing` job, and until when.
--
-- A worker's claim writes a fresh token per delivery and a lease; the worker renews the lease
-- while it works on the job. A claim or result run again after its reply was lost recognises
-- its own token (shared/src/db/jobs.rs), and the rescuer puts back on the queue a `processing`
-- job whose lease ran out (its worker is gone and Redis may have lost its entry).
ALTER TABLE jobs
    -- The delivery that claimed the job last, or the one that ended it. NULL while queued.
    ADD COLUMN claim_token  uuid,
    -- While `processing`: the holder renews this; once it has passed, the job is rescued.
    ADD COLUMN locked_until timestamptz;

-- Jobs taken before this migration have no lease yet: give them an hour to finish.
UPDATE jobs SET locked_until = now() + interval '1 hour' WHERE status = 'processing';

-- The rescuer's scan: processing jobs by lease (few rows: at most the fleet's concurrency).
CREATE INDEX jobs_processing_lease_idx ON jobs (locked_until) WHERE status = 'processing';
