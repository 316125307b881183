-- Idempotent submissions: a job submitted with an `Idempotency-Key` keeps the key and the
-- SHA-256 of its validated request for 24 hours. Within them the same key of the same account
-- answers the same job (same request) or 409 (another request). Past them the key is cleared,
-- by the api when a new submission reuses it and by the workers' periodic purge.
ALTER TABLE jobs
    ADD COLUMN idempotency_key     text,
    ADD COLUMN request_fingerprint bytea,
    ADD CONSTRAINT jobs_idempotency_key_with_fingerprint
        CHECK ((idempotency_key IS NULL) = (request_fingerprint IS NULL)),
    ADD CONSTRAINT jobs_idempotency_key_length
        CHECK (octet_length(idempotency_key) BETWEEN 1 AND 255),
    ADD CONSTRAINT jobs_request_fingerprint_length
        CHECK (request_fingerprint IS NULL OR octet_length(request_fingerprint) = 32);

-- One job per account and key: concurrent submissions with one key create one job.
CREATE UNIQUE INDEX jobs_account_idempotency_key_idx ON jobs (account_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- The purge's scan for keys past their 24 hours.
CREATE INDEX jobs_idempotency_created_idx ON jobs (created_at)
    WHERE idempotency_key IS NOT NULL;
