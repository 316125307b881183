-- Accounts (organisations) and their plan.
CREATE TABLE accounts (
    id                 uuid        PRIMARY KEY,
    name               text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    status             text        NOT NULL DEFAULT 'active'
                                   CHECK (status IN ('active', 'terminated')),
    rate_per_minute    integer     NOT NULL DEFAULT 60 CHECK (rate_per_minute > 0),
    check_quota_daily  integer     NOT NULL DEFAULT 10000 CHECK (check_quota_daily >= 0),
    nsfw_check         boolean     NOT NULL DEFAULT true,
    registry_member    boolean     NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL DEFAULT now(),
    terminated_at      timestamptz,
    CHECK ((status = 'terminated') = (terminated_at IS NOT NULL))
);
