-- Moderation jobs. Postgres is the source of truth; Redis only carries work.
CREATE TABLE jobs (
    id             uuid        PRIMARY KEY,
    account_id     uuid        NOT NULL REFERENCES accounts (id),
    -- NULL for jobs from the dashboard and for jobs from before key attribution.
    api_key_id     uuid        REFERENCES api_keys (id),
    -- The modality; it picks the queue. Chat jobs are `text`. The other values are historical
    -- or special and only appear in exports.
    type           text        NOT NULL CHECK (type IN (
                                   'text', 'image', 'video', 'audio', 'chat', 'pre', 'post',
                                   'generate', 'companion_chat', 'companion_retarget',
                                   'companion_media_tag')),
    status         text        NOT NULL DEFAULT 'queued'
                               CHECK (status IN ('queued', 'processing', 'completed', 'failed')),
    stage          text        NOT NULL DEFAULT 'queued'
                               CHECK (stage IN ('queued', 'fetching', 'transcribing',
                                                'classifying', 'done', 'failed')),
    -- How many times a worker has taken the job (at most 5, then it fails).
    attempts       integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- The submitted text (a chat as `role: content` lines) or the media URL.
    content        text        NOT NULL,
    -- A chat's messages as submitted, for classifiers that take roles.
    messages       jsonb,
    webhook_url    text,
    is_prohibited  boolean,
    reason         text,
    categories     jsonb,
    -- Whether the NSFW check ran (NULL until decided, and for kinds that never run it).
    nsfw_checked   boolean,
    error_code     text,
    error_message  text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    -- When the job was last put on the queue; NULL until the first enqueue succeeds. The
    -- relay re-enqueues queued jobs whose enqueue is missing or stale.
    enqueued_at    timestamptz,
    completed_at   timestamptz,
    CHECK ((status IN ('completed', 'failed')) = (completed_at IS NOT NULL)),
    CHECK (status <> 'completed' OR is_prohibited IS NOT NULL),
    CHECK (reason IS NULL OR is_prohibited)
);

-- Export windows and usage series: one account's jobs by creation time.
CREATE INDEX jobs_account_created_idx ON jobs (account_id, created_at, id);
-- Outstanding-job listings by status, oldest first.
CREATE INDEX jobs_account_status_idx ON jobs (account_id, status, created_at, id);
-- The relay's scan for queued jobs that may be missing from the queue.
CREATE INDEX jobs_queued_enqueued_idx ON jobs (enqueued_at NULLS FIRST, created_at)
    WHERE status = 'queued';
