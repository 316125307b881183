//! The `job_decisions` table (contract 14): the human revisions of a job's decision. Revision
//! 0, the model's, is written from the job when the first human decision is; a job never
//! reviewed has no row, and its one decision is the job's own.

use time::OffsetDateTime;
use tokio_postgres::{types::Json, Row};
use uuid::Uuid;

use super::{audit_events::Actor, DbError, GenericClient};
use crate::domain::{AccountId, ActorType, DecidedBy, JobId, ReviewItemId};

/// A stored revision.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionRow {
    /// Its number (0: the model's).
    pub revision: i32,
    /// Who decided.
    pub decided_by: DecidedBy,
    /// Whether it rejects the job.
    pub is_prohibited: bool,
    /// Why, when it rejects.
    pub reason: Option<String>,
    /// The job's categories under it.
    pub categories: Option<serde_json::Value>,
    /// The reviewer's note.
    pub note: Option<String>,
    /// The reviewer (none for the model's).
    pub reviewer: Option<(ActorType, Uuid)>,
    /// When.
    pub decided_at: OffsetDateTime,
}

impl DecisionRow {
    fn from_row(row: &Row) -> Result<Self, DbError> {
        let reviewer = match (
            super::parse_optional_word::<ActorType>(row, "reviewer_type")?,
            row.try_get::<_, Option<Uuid>>("reviewer_id")?,
        ) {
            (Some(kind), Some(id)) => Some((kind, id)),
            _ => None,
        };
        Ok(Self {
            revision: row.try_get("revision")?,
            decided_by: super::parse_word(row, "decided_by")?,
            is_prohibited: row.try_get("is_prohibited")?,
            reason: row.try_get("reason")?,
            categories: row.try_get("categories")?,
            note: row.try_get("note")?,
            reviewer,
            decided_at: row.try_get("decided_at")?,
        })
    }
}

/// Every stored revision of `job`, oldest first.
pub async fn list(client: &impl GenericClient, job: JobId) -> Result<Vec<DecisionRow>, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT revision, decided_by, is_prohibited, reason, categories, note, \
                    reviewer_type, reviewer_id, decided_at \
             FROM job_decisions WHERE job_id = $1 ORDER BY revision",
        )
        .await?;
    client
        .query(&stmt, &[&job.0])
        .await?
        .iter()
        .map(DecisionRow::from_row)
        .collect()
}

/// A revision to store.
#[derive(Debug, Clone)]
pub struct NewDecision<'a> {
    /// Its number.
    pub revision: i32,
    /// Who decided.
    pub decided_by: DecidedBy,
    /// Whether it rejects.
    pub is_prohibited: bool,
    /// Why, when it rejects.
    pub reason: Option<&'a str>,
    /// The categories under it.
    pub categories: Option<&'a serde_json::Value>,
    /// The reviewer's note.
    pub note: Option<&'a str>,
    /// The reviewer (`None` for the model's revision 0).
    pub reviewer: Option<Actor>,
    /// The item decided.
    pub item: Option<ReviewItemId>,
    /// When (`None`: now).
    pub decided_at: Option<OffsetDateTime>,
}

/// Stores a revision of `job`.
pub async fn insert(
    client: &impl GenericClient,
    account: AccountId,
    job: JobId,
    decision: &NewDecision<'_>,
) -> Result<(), DbError> {
    let stmt = client
        .prepare_cached(
            "INSERT INTO job_decisions (job_id, revision, account_id, decided_by, is_prohibited, \
                                        reason, categories, note, reviewer_type, reviewer_id, \
                                        item_id, decided_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, coalesce($12, now()))",
        )
        .await?;
    client
        .execute(
            &stmt,
            &[
                &job.0,
                &decision.revision,
                &account.0,
                &decision.decided_by.as_str(),
                &decision.is_prohibited,
                &decision.reason,
                &decision.categories.map(Json),
                &decision.note,
                &decision.reviewer.map(|r| r.kind().as_str()),
                &decision.reviewer.and_then(Actor::id),
                &decision.item.map(|i| i.0),
                &decision.decided_at,
            ],
        )
        .await?;
    Ok(())
}

/// Whether `reviewer` has decided `job` before.
pub async fn has_decided(
    client: &impl GenericClient,
    job: JobId,
    reviewer: Actor,
) -> Result<bool, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM job_decisions WHERE reviewer_id = $1 AND job_id = $2)",
        )
        .await?;
    Ok(client
        .query_one(&stmt, &[&reviewer.id(), &job.0])
        .await?
        .get(0))
}
