-- People who sign in to the web dashboard. Each belongs to one account; staff users also see
-- the operators' pages. Only an Argon2id hash of the password is stored (PHC string).
CREATE TABLE dashboard_users (
    id             uuid        PRIMARY KEY,
    account_id     uuid        NOT NULL REFERENCES accounts (id),
    email          text        NOT NULL CHECK (length(email) BETWEEN 3 AND 320),
    password_hash  text        NOT NULL CHECK (password_hash LIKE '$argon2id$%'),
    staff          boolean     NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT now(),
    disabled_at    timestamptz
);

-- Addresses are matched without regard to case.
CREATE UNIQUE INDEX dashboard_users_email_idx ON dashboard_users (lower(email));

-- "Last used" of a key on the dashboard's key list: the newest job submitted with it.
CREATE INDEX jobs_api_key_created_idx ON jobs (api_key_id, created_at DESC)
    WHERE api_key_id IS NOT NULL;
