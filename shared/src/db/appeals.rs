//! The `appeals` table (contract 14): appeals of a job's decision, each decided by a reviewer
//! who has not decided the job before.

use time::OffsetDateTime;
use tokio_postgres::Row;

use super::{DbError, GenericClient};
use crate::domain::{AccountId, AppealId, AppealState, JobId};

/// A stored appeal.
#[derive(Debug, Clone, PartialEq)]
pub struct Appeal {
    /// Its id.
    pub id: AppealId,
    /// The job.
    pub job_id: JobId,
    /// The end user's reason.
    pub reason: String,
    /// The client's reference.
    pub appeal_ref: Option<String>,
    /// Where it stands.
    pub state: AppealState,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it was decided.
    pub decided_at: Option<OffsetDateTime>,
}

const COLUMNS: &str = "id, job_id, reason, appeal_ref, state, created_at, decided_at";

impl Appeal {
    fn from_row(row: &Row) -> Result<Self, DbError> {
        Ok(Self {
            id: AppealId(row.try_get("id")?),
            job_id: JobId(row.try_get("job_id")?),
            reason: row.try_get("reason")?,
            appeal_ref: row.try_get("appeal_ref")?,
            state: super::parse_word(row, "state")?,
            created_at: row.try_get("created_at")?,
            decided_at: row.try_get("decided_at")?,
        })
    }
}

/// The appeal of `job` with reference `appeal_ref`, if any.
pub async fn by_ref(
    client: &impl GenericClient,
    job: JobId,
    appeal_ref: &str,
) -> Result<Option<Appeal>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM appeals WHERE job_id = $1 AND appeal_ref = $2"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&job.0, &appeal_ref])
        .await?
        .as_ref()
        .map(Appeal::from_row)
        .transpose()
}

/// Whether `job` has an open appeal.
pub async fn has_open(client: &impl GenericClient, job: JobId) -> Result<bool, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM appeals WHERE job_id = $1 AND state = 'open')",
        )
        .await?;
    Ok(client.query_one(&stmt, &[&job.0]).await?.get(0))
}

/// Stores an open appeal of `account`'s `job`.
pub async fn insert(
    client: &impl GenericClient,
    account: AccountId,
    job: JobId,
    reason: &str,
    appeal_ref: Option<&str>,
) -> Result<Appeal, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO appeals (id, job_id, account_id, reason, appeal_ref) \
             VALUES ($1, $2, $3, $4, $5) RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client
        .query_one(
            &stmt,
            &[&AppealId::new().0, &job.0, &account.0, &reason, &appeal_ref],
        )
        .await?;
    Appeal::from_row(&row)
}

/// One appeal of `account`, unless its job is below `floor` (past retention).
pub async fn get(
    client: &impl GenericClient,
    account: AccountId,
    id: AppealId,
    floor: uuid::Uuid,
) -> Result<Option<Appeal>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM appeals WHERE account_id = $1 AND id = $2 AND job_id >= $3"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&account.0, &id.0, &floor])
        .await?
        .as_ref()
        .map(Appeal::from_row)
        .transpose()
}

/// Decides appeal `id` of `job` as `state`.
pub async fn decide(
    client: &impl GenericClient,
    job: JobId,
    id: AppealId,
    state: AppealState,
) -> Result<Appeal, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "UPDATE appeals SET state = $3, decided_at = now() \
             WHERE job_id = $1 AND id = $2 RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client
        .query_one(&stmt, &[&job.0, &id.0, &state.as_str()])
        .await?;
    Appeal::from_row(&row)
}
