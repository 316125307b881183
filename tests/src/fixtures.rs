//! Rows written straight into the test database, for tests of reads (export, usage) that must
//! not depend on the submission endpoints.

use moderation_shared::{db::Pool, domain::AccountId, lifecycle};
use time::OffsetDateTime;
use uuid::Uuid;

/// A UUIDv7 made at `at` whose other bits are `tail`: ids sort by time, then by `tail`.
pub fn id_at(at: OffsetDateTime, tail: u128) -> Uuid {
    let millis = u64::try_from(at.unix_timestamp_nanos() / 1_000_000).expect("after 1970");
    uuid::Builder::from_unix_timestamp_millis(
        millis,
        &tail.to_be_bytes()[6..].try_into().expect("ten bytes"),
    )
    .into_uuid()
}

/// Makes the month partitions holding `at` (and the next), for rows written at past instants.
pub async fn ensure_partitions(pool: &Pool, at: OffsetDateTime) {
    let client = pool.get().await.expect("connect");
    lifecycle::ensure_partitions(&client, at, 2)
        .await
        .expect("make the month partitions");
}

/// A job row to insert; [`JobRow::new`] gives a queued job, the builders finish it.
#[derive(Debug, Clone)]
pub struct JobRow {
    /// `jobs.id`.
    pub id: Uuid,
    /// `jobs.account_id`.
    pub account: AccountId,
    /// `jobs.api_key_id`.
    pub api_key_id: Option<Uuid>,
    /// `jobs.type`.
    pub job_type: &'static str,
    /// `jobs.status`.
    pub status: &'static str,
    /// `jobs.content`: the prompt or media URL.
    pub content: String,
    /// `jobs.is_prohibited`.
    pub is_prohibited: Option<bool>,
    /// `jobs.reason`.
    pub reason: Option<String>,
    /// `jobs.categories`.
    pub categories: Option<serde_json::Value>,
    /// `jobs.nsfw_checked`.
    pub nsfw_checked: Option<bool>,
    /// `jobs.created_at`.
    pub created_at: OffsetDateTime,
    /// `jobs.completed_at`.
    pub completed_at: Option<OffsetDateTime>,
}

impl JobRow {
    /// A queued job of `job_type` with a random UUIDv7 of `created_at`.
    pub fn new(
        account: AccountId,
        job_type: &'static str,
        content: &str,
        created_at: OffsetDateTime,
    ) -> Self {
        Self {
            id: id_at(created_at, Uuid::new_v4().as_u128()),
            account,
            api_key_id: None,
            job_type,
            status: "queued",
            content: content.to_owned(),
            is_prohibited: None,
            reason: None,
            categories: None,
            nsfw_checked: None,
            created_at,
            completed_at: None,
        }
    }

    /// With the id of its `created_at` whose other bits are `n`: fixed, and ordered by `n`
    /// among jobs made at one instant.
    pub fn seq(mut self, n: u128) -> Self {
        self.id = id_at(self.created_at, n);
        self
    }

    /// Submitted with this key.
    pub fn key(mut self, key: &str) -> Self {
        self.api_key_id = Some(key.parse().expect("fixture key id"));
        self
    }

    /// In this unfinished status (`queued` or `processing`).
    pub fn status(mut self, status: &'static str) -> Self {
        self.status = status;
        self
    }

    /// Completed `at` with this decision (and reason when prohibited).
    pub fn completed(mut self, at: OffsetDateTime, prohibited: bool, reason: Option<&str>) -> Self {
        self.status = "completed";
        self.completed_at = Some(at);
        self.is_prohibited = Some(prohibited);
        self.reason = reason.map(str::to_owned);
        self
    }

    /// Failed `at`.
    pub fn failed(mut self, at: OffsetDateTime) -> Self {
        self.status = "failed";
        self.completed_at = Some(at);
        self
    }

    /// With these categories and whether the NSFW check ran.
    pub fn categories(mut self, categories: serde_json::Value, nsfw_checked: bool) -> Self {
        self.categories = Some(categories);
        self.nsfw_checked = Some(nsfw_checked);
        self
    }

    /// Inserts the row (making its month's partition when it is in the past), with its row of
    /// `open_jobs` while queued, and counts it in the account's usage, as a submission does.
    pub async fn insert(&self, pool: &Pool) {
        ensure_partitions(pool, self.created_at).await;
        let client = pool.get().await.expect("connect");
        client
            .execute(
                "INSERT INTO jobs (id, account_id, api_key_id, type, status, content,
                                   is_prohibited, reason, categories, nsfw_checked,
                                   created_at, updated_at, completed_at,
                                   stage)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12,
                         CASE WHEN $5 = 'completed' THEN 'done'
                              WHEN $5 = 'failed' THEN 'failed' ELSE 'queued' END)",
                &[
                    &self.id,
                    &self.account.0,
                    &self.api_key_id,
                    &self.job_type,
                    &self.status,
                    &self.content,
                    &self.is_prohibited,
                    &self.reason,
                    &self.categories,
                    &self.nsfw_checked,
                    &self.created_at,
                    &self.completed_at,
                ],
            )
            .await
            .expect("insert fixture job");
        // An open job has its row of `open_jobs`, never enqueued (the relay's to enqueue).
        client
            .execute(
                "INSERT INTO open_jobs (job_id, account_id, type, created_at)
                 SELECT id, account_id, type, created_at FROM jobs
                 WHERE id = $1 AND status = 'queued'",
                &[&self.id],
            )
            .await
            .expect("insert fixture job's open row");
        client
            .execute(
                "WITH m AS (INSERT INTO usage_minutes (account_id, minute, type, count)
                            VALUES ($1, date_trunc('minute', $3::timestamptz), $2, 1)
                            ON CONFLICT (account_id, minute, type, shard)
                            DO UPDATE SET count = usage_minutes.count + 1)
                 INSERT INTO usage_days (account_id, day, type, count)
                 VALUES ($1, ($3::timestamptz AT TIME ZONE 'UTC')::date, $2, 1)
                 ON CONFLICT (account_id, day, type, shard)
                 DO UPDATE SET count = usage_days.count + 1",
                &[&self.account.0, &self.job_type, &self.created_at],
            )
            .await
            .expect("count the fixture job's usage");
    }
}

/// Inserts an API key row with a fixed id (its value is never usable), optionally named and
/// optionally deleted.
pub async fn insert_key(
    pool: &Pool,
    id: &str,
    account: AccountId,
    name: Option<&str>,
    deleted: bool,
) {
    let id: Uuid = id.parse().expect("fixture key id");
    let hash = Uuid::new_v4().as_bytes().repeat(2);
    let client = pool.get().await.expect("connect");
    client
        .execute(
            "INSERT INTO api_keys (id, account_id, name, prefix, key_hash, scopes, deleted_at)
             VALUES ($1, $2, $3, 'fixture0', $4, ARRAY['job:read'],
                     CASE WHEN $5 THEN now() END)",
            &[&id, &account.0, &name, &hash, &deleted],
        )
        .await
        .expect("insert fixture key");
}
