-- The data lifecycle (contract 15): the big tables partitioned by month of their UUIDv7 ids,
-- what partitioning forbids moved out first (idempotency keys, usage counts), content that can
-- be erased, and the bookkeeping of the lifecycle runs. See docs/data-model.md.
--
-- Every existing row is moved over (INSERT ... SELECT into the partitioned table, then the old
-- table is dropped), in this migration's one transaction: run it with the fleet stopped (the
-- `release` step); it takes as long as copying the tables.

-- The least UUIDv7 of the millisecond `at`: its 48 time bits, then zeros (a partition bound,
-- and the id bound of a time bound). shared::domain::id_floor computes the same.
CREATE FUNCTION uuid_floor(at timestamptz) RETURNS uuid
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM at) * 1000)::bigint), 12, '0')
            || repeat('0', 20))::uuid
$$;

-- A UUIDv7 made at `at` (a random one with `at`'s 48 time bits and version 7), for rows
-- written in SQL: backfills, fixtures, benchmarks. The services make their ids in Rust.
CREATE FUNCTION uuid_v7(at timestamptz DEFAULT clock_timestamp()) RETURNS uuid
    LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
                                          PLACING substring(int8send(floor(extract(epoch FROM at)
                                                                           * 1000)::bigint)
                                                            FROM 3)
                                          FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;

-- Makes the partition of `parent` for the UTC month holding `month`: `<parent>_yYYYYmMM`,
-- from the month's first millisecond to the next month's. Returns its name, or NULL when it
-- existed already. The partition is made apart and attached (SHARE UPDATE EXCLUSIVE on the
-- parent: reads and writes go on), never created in place (ACCESS EXCLUSIVE: it would wait
-- behind a streaming export and stop every statement behind it).
CREATE FUNCTION make_month_partition(parent text, month timestamptz) RETURNS text
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

-- Moves `name` over to a table partitioned by range of `key`, keeping its columns, defaults,
-- NOT NULL and CHECK constraints: partitions for every month its rows' ids fall in (only those:
-- months without rows get none) and for the current month and the next two, then every row.
-- Indexes and keys are made afterwards.
CREATE FUNCTION partition_by_month(name text, key text) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    month timestamptz;
BEGIN
    EXECUTE format('ALTER TABLE %I RENAME TO %I', name, name || '_unpartitioned');
    EXECUTE format(
        'CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (%I)',
        name, name || '_unpartitioned', key);
    -- The months of the ids (UUIDv7: their first 48 bits are milliseconds since the epoch).
    FOR month IN EXECUTE format(
        'SELECT DISTINCT date_trunc(''month'', to_timestamp((''x'' || replace(%I::text, ''-'', ''''))::bit(48)::bigint / 1000.0), ''UTC'') FROM %I',
        key, name || '_unpartitioned')
    LOOP
        PERFORM make_month_partition(name, month);
    END LOOP;
    month := date_trunc('month', now(), 'UTC');
    WHILE month <= now() + interval '2 months' LOOP
        PERFORM make_month_partition(name, month);
        month := month + interval '1 month';
    END LOOP;
    EXECUTE format('INSERT INTO %I SELECT * FROM %I', name, name || '_unpartitioned');
    EXECUTE format('DROP TABLE %I CASCADE', name || '_unpartitioned');
END
$$;

-- What partitioning forbids moves out first: the idempotency keys' uniqueness (it spans every
-- partition) to a table of their own, kept 24 hours.
CREATE TABLE idempotency_keys (
    account_id   uuid        NOT NULL REFERENCES accounts (id),
    key          text        NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 255),
    fingerprint  bytea       NOT NULL CHECK (octet_length(fingerprint) = 32),
    job_id       uuid        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
INSERT INTO idempotency_keys (account_id, key, fingerprint, job_id, created_at)
SELECT account_id, idempotency_key, request_fingerprint, id, created_at
FROM jobs WHERE idempotency_key IS NOT NULL;
ALTER TABLE jobs DROP COLUMN idempotency_key, DROP COLUMN request_fingerprint;

-- Usage counts that outlive the jobs: per account, minute and type (kept 2 days, for the hour
-- and day periods) and per account, UTC day and type (kept 2 years), counted in the
-- submission's own transaction. Concurrent submissions spread over `shard`s (a read sums
-- them), so two batches of one account rarely wait for each other's commit.
CREATE TABLE usage_minutes (
    account_id  uuid        NOT NULL,
    minute      timestamptz NOT NULL,
    type        text        NOT NULL,
    shard       smallint    NOT NULL DEFAULT 0,
    count       integer     NOT NULL CHECK (count >= 0),
    PRIMARY KEY (account_id, minute, type, shard)
);
CREATE TABLE usage_days (
    account_id  uuid     NOT NULL,
    day         date     NOT NULL,
    type        text     NOT NULL,
    shard       smallint NOT NULL DEFAULT 0,
    count       bigint   NOT NULL CHECK (count >= 0),
    PRIMARY KEY (account_id, day, type, shard)
);
CREATE INDEX usage_minutes_minute_idx ON usage_minutes (minute);
CREATE INDEX usage_days_day_idx ON usage_days (day);
INSERT INTO usage_minutes (account_id, minute, type, count)
SELECT account_id, date_trunc('minute', created_at), type, count(*)
FROM jobs WHERE created_at >= now() - interval '2 days' GROUP BY 1, 2, 3;
INSERT INTO usage_days (account_id, day, type, count)
SELECT account_id, (created_at AT TIME ZONE 'UTC')::date, type, count(*)
FROM jobs GROUP BY 1, 2, 3;

-- Content can be erased (by retention, or on request): the decision stays.
ALTER TABLE jobs ALTER COLUMN content DROP NOT NULL,
    ADD COLUMN content_erased_at timestamptz,
    ADD CONSTRAINT jobs_content_erased CHECK ((content IS NULL) = (content_erased_at IS NOT NULL));

-- The big tables, partitioned by month of their ids (a job's rows by the job's).
SELECT partition_by_month('jobs', 'id');
-- No foreign keys on the partitioned tables: detaching or dropping a partition would take
-- locks on the tables they reference (accounts, api_keys), which every request reads. Rows are
-- only ever written for an authenticated account and its key.
ALTER TABLE jobs ADD PRIMARY KEY (id);
CREATE INDEX jobs_account_created_idx ON jobs (account_id, created_at, id);
CREATE INDEX jobs_account_status_idx ON jobs (account_id, status, created_at, id);
CREATE INDEX jobs_account_type_created_idx ON jobs (account_id, type, created_at, id);
CREATE INDEX jobs_queued_enqueued_idx ON jobs (enqueued_at NULLS FIRST, created_at)
    WHERE status = 'queued';
CREATE INDEX jobs_processing_lease_idx ON jobs (locked_until) WHERE status = 'processing';
CREATE INDEX jobs_api_key_created_idx ON jobs (api_key_id, created_at DESC)
    WHERE api_key_id IS NOT NULL;

SELECT partition_by_month('job_scores', 'job_id');
ALTER TABLE job_scores ADD PRIMARY KEY (job_id);
CREATE INDEX job_scores_account_idx ON job_scores (account_id, job_id);

SELECT partition_by_month('review_items', 'job_id');
ALTER TABLE review_items ADD PRIMARY KEY (job_id, id);
CREATE INDEX review_items_id_idx ON review_items (id);
CREATE INDEX review_items_open_idx ON review_items (account_id, (appeal_id IS NULL), id)
    WHERE state <> 'decided';
CREATE INDEX review_items_account_idx ON review_items (account_id, state, id);

SELECT partition_by_month('job_decisions', 'job_id');
ALTER TABLE job_decisions ADD PRIMARY KEY (job_id, revision);
CREATE INDEX job_decisions_reviewer_idx ON job_decisions (reviewer_id, job_id)
    WHERE reviewer_id IS NOT NULL;

SELECT partition_by_month('appeals', 'job_id');
ALTER TABLE appeals ADD PRIMARY KEY (job_id, id);
CREATE INDEX appeals_id_idx ON appeals (id);
CREATE UNIQUE INDEX appeals_ref_idx ON appeals (job_id, appeal_ref) WHERE appeal_ref IS NOT NULL;
CREATE UNIQUE INDEX appeals_one_open_idx ON appeals (job_id) WHERE state = 'open';

SELECT partition_by_month('deliveries', 'id');
ALTER TABLE deliveries ADD PRIMARY KEY (id);
CREATE INDEX deliveries_job_idx ON deliveries (job_id);
CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at)
    WHERE state = 'pending' AND NOT recovered;
CREATE INDEX deliveries_recovered_due_idx ON deliveries (next_attempt_at)
    WHERE state = 'pending' AND recovered;
CREATE INDEX deliveries_resend_idx ON deliveries (resend_at) WHERE resend_at IS NOT NULL;
CREATE INDEX deliveries_account_idx ON deliveries (account_id, created_at DESC, id DESC);
CREATE INDEX deliveries_account_state_idx
    ON deliveries (account_id, state, created_at DESC, id DESC);

SELECT partition_by_month('delivery_attempts', 'delivery_id');
ALTER TABLE delivery_attempts ADD PRIMARY KEY (delivery_id, attempt);

SELECT partition_by_month('audit_events', 'id');
ALTER TABLE audit_events ADD PRIMARY KEY (id);
CREATE INDEX audit_events_account_idx ON audit_events (account_id, id);
CREATE INDEX audit_events_account_action_idx ON audit_events (account_id, action, id);
-- Row triggers on a partitioned table are cloned onto every partition, present and future;
-- TRUNCATE of the table truncates its partitions, refused by the statement trigger.
CREATE TRIGGER audit_events_no_change BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

DROP FUNCTION partition_by_month(text, text);

-- One process at a time runs a maintenance task: it holds the task's lease until `until`.
CREATE TABLE maintenance_leases (
    name    text        PRIMARY KEY,
    holder  uuid        NOT NULL,
    until   timestamptz NOT NULL
);

-- Where the lifecycle stands: content of jobs with ids below `content_erased_before` is
-- erased (retention works up from there, a batch at a time).
CREATE TABLE lifecycle_state (
    singleton              boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    content_erased_before  uuid    NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000'
);
INSERT INTO lifecycle_state DEFAULT VALUES;

-- Each lifecycle run, as it ended.
CREATE TABLE lifecycle_runs (
    id                  uuid        PRIMARY KEY,
    as_of               timestamptz NOT NULL,
    started_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz,
    partitions_made     text[]      NOT NULL DEFAULT '{}',
    partitions_dropped  text[]      NOT NULL DEFAULT '{}',
    contents_erased     bigint      NOT NULL DEFAULT 0,
    usage_rows_purged   bigint      NOT NULL DEFAULT 0
);
