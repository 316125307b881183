-- Job listings filtered by type alone (the dashboard's jobs page, GET /api/v1/jobs?type=):
-- one account's jobs of one type by creation time, so an account with many jobs and few of
-- that type reads only those instead of walking all its jobs.
CREATE INDEX jobs_account_type_created_idx ON jobs (account_id, type, created_at, id);
