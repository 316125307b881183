//! Read-only reports over one account's `jobs`: the CSV export and the usage series. Both
//! select by `jobs_account_created_idx` (`account_id, created_at, id`).

use std::collections::HashMap;

use time::OffsetDateTime;
use tokio_postgres::{types::ToSql, Row, RowStream};

use super::{DbError, GenericClient};
use crate::domain::{AccountId, ApiKeyId, JobId};

/// One job as the export shows it.
#[derive(Debug, Clone)]
pub struct ExportRow {
    /// The job.
    pub job_id: JobId,
    /// Its stored type (including historical values).
    pub job_type: String,
    /// Its status.
    pub status: String,
    /// The decision; `None` until decided.
    pub is_prohibited: Option<bool>,
    /// When it was submitted.
    pub created_at: OffsetDateTime,
    /// When it finished.
    pub completed_at: Option<OffsetDateTime>,
    /// The key it was submitted with (none from the dashboard or before key attribution).
    pub api_key_id: Option<ApiKeyId>,
    /// The submitted text or media URL; empty once erased.
    pub prompt: String,
    /// The reason, only when prohibited.
    pub reason: Option<String>,
    /// The NSFW label, only when the NSFW check ran on a finished job.
    pub category_nsfw: Option<bool>,
}

impl ExportRow {
    /// Maps a row of [`export_rows`].
    pub fn from_row(row: &Row) -> Result<Self, DbError> {
        Ok(Self {
            job_id: JobId(row.try_get(0)?),
            job_type: row.try_get(1)?,
            status: row.try_get(2)?,
            is_prohibited: row.try_get(3)?,
            created_at: row.try_get(4)?,
            completed_at: row.try_get(5)?,
            api_key_id: row.try_get::<_, Option<uuid::Uuid>>(6)?.map(ApiKeyId),
            prompt: row.try_get(7)?,
            reason: row.try_get(8)?,
            category_nsfw: row.try_get(9)?,
        })
    }
}

/// Streams `account`'s jobs created in `[from, to)` with ids from `floor` on (the retention
/// floor), ordered by `created_at` then id. Rows
/// arrive as the client reads them (the connection applies backpressure), so memory stays
/// flat; the client must stay checked out until the stream ends.
pub async fn export_rows(
    client: &impl GenericClient,
    account: AccountId,
    from: OffsetDateTime,
    to: OffsetDateTime,
    floor: uuid::Uuid,
) -> Result<RowStream, DbError> {
    let statement = client
        .prepare_cached(
            "SELECT id, type, status, is_prohibited, created_at, completed_at, api_key_id,
                    coalesce(content, ''),
                    CASE WHEN is_prohibited THEN reason END,
                    CASE WHEN status = 'completed'
                              AND nsfw_checked IS TRUE
                              AND type NOT IN ('text', 'chat', 'audio', 'generate')
                              AND jsonb_typeof(categories -> 'nsfw') = 'boolean'
                         THEN (categories -> 'nsfw')::boolean END
             FROM jobs
             WHERE account_id = $1 AND created_at >= $2 AND created_at < $3
               AND id >= $4 AND id < $5
             ORDER BY created_at, id",
        )
        .await?;
    // The ids bound the window too, a day wider (ids are made by the api's clock, created_at
    // by Postgres's), so only its partitions are read; and never below the retention floor.
    let lower = crate::domain::id_floor(from - time::Duration::DAY).max(floor);
    let upper = crate::domain::id_floor(to + time::Duration::DAY);
    let params: [&(dyn ToSql + Sync); 5] = [&account.0, &from, &to, &lower, &upper];
    Ok(client.query_raw(&statement, params).await?)
}

/// The names of `account`'s named keys that are not deleted, as the export shows them.
pub async fn key_names(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<HashMap<ApiKeyId, String>, DbError> {
    let statement = client
        .prepare_cached(
            "SELECT id, name FROM api_keys
             WHERE account_id = $1 AND deleted_at IS NULL AND name IS NOT NULL",
        )
        .await?;
    client
        .query(&statement, &[&account.0])
        .await?
        .iter()
        .map(|row| Ok((ApiKeyId(row.try_get(0)?), row.try_get(1)?)))
        .collect()
}

/// Jobs of one type submitted in one bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeCount {
    /// The bucket's start (UTC).
    pub bucket: OffsetDateTime,
    /// The stored job type.
    pub job_type: String,
    /// How many.
    pub count: i64,
}

/// Counts `account`'s jobs created in `[from, to)` per type and per UTC `unit` bucket
/// (`minute`, `hour` or `day`), from the usage counts kept beside the jobs (`usage_minutes`
/// for minutes and hours, two days of them; `usage_days` for days, two years), so the answer
/// stays the same once the jobs are removed. Empty buckets are absent.
pub async fn volume(
    client: &impl GenericClient,
    account: AccountId,
    unit: &str,
    from: OffsetDateTime,
    to: OffsetDateTime,
) -> Result<Vec<VolumeCount>, DbError> {
    let statement = if unit == "day" {
        client
            .prepare_cached(
                "SELECT (day::timestamp AT TIME ZONE 'UTC') AS bucket, type, sum(count)::int8
                 FROM usage_days
                 WHERE account_id = $1 AND day >= ($2 AT TIME ZONE 'UTC')::date
                   AND day < ($3 AT TIME ZONE 'UTC')::date
                 GROUP BY bucket, type",
            )
            .await?
    } else {
        client
            .prepare_cached(
                "SELECT date_trunc($4, minute, 'UTC') AS bucket, type, sum(count)::int8
                 FROM usage_minutes
                 WHERE account_id = $1 AND minute >= $2 AND minute < $3
                 GROUP BY bucket, type",
            )
            .await?
    };
    let rows = if unit == "day" {
        client.query(&statement, &[&account.0, &from, &to]).await?
    } else {
        client
            .query(&statement, &[&account.0, &from, &to, &unit])
            .await?
    };
    rows.iter()
        .map(|row| {
            Ok(VolumeCount {
                bucket: row.try_get(0)?,
                job_type: row.try_get(1)?,
                count: row.try_get(2)?,
            })
        })
        .collect()
}
