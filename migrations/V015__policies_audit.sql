-- Policies an account tunes (contract 13): versions of per-category thresholds and modes, the
-- model scores they are applied to, and the audit log. See docs/data-model.md.

-- The stamp a worker caches an account's settings under: bumped in the transaction of every
-- change to its custom categories, blocklist, NSFW check or active and shadow policy versions.
ALTER TABLE accounts RENAME COLUMN policy_version TO settings_stamp;

-- Immutable versions of an account's policy; only `status` and `activated_at` ever change.
CREATE TABLE policy_versions (
    account_id    uuid        NOT NULL REFERENCES accounts (id),
    version       integer     NOT NULL CHECK (version >= 1),
    status        text        NOT NULL CHECK (status IN ('draft', 'shadow', 'active', 'retired')),
    note          text        CHECK (char_length(note) <= 500),
    -- {"<category>": {"mode": "enforce"|"observe"|"off", "block_at": n, "review_at": n|null}}
    categories    jsonb       NOT NULL,
    -- {"sample_rate": n}
    review        jsonb       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    activated_at  timestamptz,
    PRIMARY KEY (account_id, version),
    CHECK (status NOT IN ('active', 'retired') OR activated_at IS NOT NULL)
);
-- At most one active and one shadow version per account, whatever runs concurrently.
CREATE UNIQUE INDEX policy_versions_one_active_idx ON policy_versions (account_id)
    WHERE status = 'active';
CREATE UNIQUE INDEX policy_versions_one_shadow_idx ON policy_versions (account_id)
    WHERE status = 'shadow';

-- The model files a worker loaded: {"<model>": "<sha256 of its files>"}; jobs point here.
CREATE TABLE model_sets (
    id          text        PRIMARY KEY CHECK (id ~ '^[0-9a-f]{16}$'),
    models      jsonb       NOT NULL,
    first_seen  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE jobs
    -- The active policy version that decided it (NULL before policies, and for failed jobs).
    ADD COLUMN policy_version integer,
    -- The shadow version's decision, when one ran: {"policy_version", "is_prohibited",
    -- "categories"?}.
    ADD COLUMN shadow         jsonb,
    -- The built-in models that scored it.
    ADD COLUMN model_set      text,
    -- The detected language of a text or an audio job's speech (ISO 639-1).
    ADD COLUMN language       text CHECK (language ~ '^[a-z]{2}$');

-- What the impact preview re-applies a policy version to: one narrow row per completed job.
CREATE TABLE job_scores (
    job_id          uuid     NOT NULL PRIMARY KEY,
    account_id      uuid     NOT NULL,
    -- The model's decision (revision 0).
    prohibited      boolean  NOT NULL,
    -- Rejected by a list, a keyword category, a hash bank or a model server, whatever the
    -- policy says.
    listed          boolean  NOT NULL,
    policy_version  integer,
    -- The scores in thousandths (0 to 1000), as stored in jobs.scores and decided on.
    harassment      smallint,
    hate            smallint,
    violence        smallint,
    self_harm       smallint,
    sexual          smallint,
    nsfw            smallint,
    -- {"<custom name>": thousandths}, only when a custom category was scored.
    custom          jsonb
);
CREATE INDEX job_scores_account_idx ON job_scores (account_id, job_id);

-- The audit log: append-only (a trigger refuses UPDATE, DELETE and TRUNCATE whoever connects).
CREATE TABLE audit_events (
    id           uuid        NOT NULL PRIMARY KEY,
    account_id   uuid        NOT NULL,
    at           timestamptz NOT NULL DEFAULT now(),
    actor_type   text        NOT NULL CHECK (actor_type IN ('key', 'user', 'operator')),
    actor_id     uuid,
    action       text        NOT NULL CHECK (action ~ '^[a-z_]+\.[a-z_]+$'),
    target_type  text        NOT NULL,
    target_id    text,
    detail       jsonb       NOT NULL DEFAULT '{}',
    CHECK ((actor_type = 'operator') = (actor_id IS NULL))
);
CREATE INDEX audit_events_account_idx ON audit_events (account_id, id);
CREATE INDEX audit_events_account_action_idx ON audit_events (account_id, action, id);

CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_events_no_change BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
