//! The `audit_events` table (contract 13): who changed what, and when. Append-only: Postgres
//! refuses `UPDATE`, `DELETE` and `TRUNCATE` on it (a trigger), and nothing here tries.
//!
//! [`record`] is called in the transaction of the change it records, by the shared function
//! that makes the change wherever it is asked for (the api, the dashboard, `modctl`), so a
//! change and its event land together or not at all.

use serde::Serialize;
use time::OffsetDateTime;
use tokio_postgres::{types::Json, Row};
use uuid::Uuid;

use super::{DbError, GenericClient};
use crate::domain::{
    id_floor, AccountId, ActorType, ApiKeyId, AuditAction, DashboardUserId, JobId,
};

/// Who made a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// An API key.
    Key(ApiKeyId),
    /// A dashboard user.
    User(DashboardUserId),
    /// An operator (`modctl`), or the service itself.
    Operator,
}

impl Actor {
    /// The actor's type.
    pub fn kind(self) -> ActorType {
        match self {
            Actor::Key(_) => ActorType::Key,
            Actor::User(_) => ActorType::User,
            Actor::Operator => ActorType::Operator,
        }
    }

    /// The key's or user's id; `None` for an operator.
    pub fn id(self) -> Option<Uuid> {
        match self {
            Actor::Key(id) => Some(id.0),
            Actor::User(id) => Some(id.0),
            Actor::Operator => None,
        }
    }
}

/// What changed: a type (`policy_version`, `key`, `job`, ...) and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// What kind of thing.
    pub kind: &'static str,
    /// Its id, when it has one (the account's webhook URL has none).
    pub id: Option<String>,
}

impl Target {
    /// A target of `kind` with id `id`.
    pub fn new(kind: &'static str, id: impl ToString) -> Self {
        Self {
            kind,
            id: Some(id.to_string()),
        }
    }

    /// A target of `kind` without an id of its own.
    pub fn whole(kind: &'static str) -> Self {
        Self { kind, id: None }
    }

    /// A job.
    pub fn job(id: JobId) -> Self {
        Self::new("job", id)
    }
}

/// Records that `actor` did `action` to `target` of `account`, with `detail` (a JSON object).
/// Call it in the transaction of the change.
pub async fn record(
    client: &impl GenericClient,
    account: AccountId,
    actor: Actor,
    action: AuditAction,
    target: &Target,
    detail: impl Serialize,
) -> Result<(), DbError> {
    let detail = serde_json::to_value(detail).unwrap_or_default();
    let stmt = client
        .prepare_cached(
            "INSERT INTO audit_events (id, account_id, actor_type, actor_id, action, \
                                       target_type, target_id, detail) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .await?;
    client
        .execute(
            &stmt,
            &[
                &Uuid::now_v7(),
                &account.0,
                &actor.kind().as_str(),
                &actor.id(),
                &action.as_str(),
                &target.kind,
                &target.id,
                &Json(detail),
            ],
        )
        .await?;
    Ok(())
}

/// A recorded event.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    /// Its id (time-ordered).
    pub id: Uuid,
    /// When it happened.
    pub at: OffsetDateTime,
    /// The actor's type.
    pub actor_type: ActorType,
    /// The key's or user's id; `None` for an operator.
    pub actor_id: Option<Uuid>,
    /// What was done.
    pub action: AuditAction,
    /// What kind of thing it was done to.
    pub target_type: String,
    /// Its id.
    pub target_id: Option<String>,
    /// The details (a JSON object).
    pub detail: serde_json::Value,
}

impl AuditEvent {
    fn from_row(row: &Row) -> Result<Self, DbError> {
        Ok(Self {
            id: row.get("id"),
            at: row.get("at"),
            actor_type: super::parse_word(row, "actor_type")?,
            actor_id: row.get("actor_id"),
            action: super::parse_word(row, "action")?,
            target_type: row.get("target_type"),
            target_id: row.get("target_id"),
            detail: row.get("detail"),
        })
    }
}

/// Which events a page holds.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Only events at or after this.
    pub since: Option<OffsetDateTime>,
    /// Only events before this.
    pub until: Option<OffsetDateTime>,
    /// Only this action.
    pub action: Option<AuditAction>,
    /// Only events older than this one (the cursor: the last id of the previous page).
    pub before: Option<Uuid>,
}

/// Events of `account` matching `filter`, newest first, at most `limit`. The time bounds are
/// id bounds (ids are time-ordered), so a page reads one index range.
pub async fn page(
    client: &impl GenericClient,
    account: AccountId,
    filter: &AuditFilter,
    limit: i64,
) -> Result<Vec<AuditEvent>, DbError> {
    let lower = filter.since.map_or(Uuid::nil(), id_floor);
    let upper = match (filter.until.map(id_floor), filter.before) {
        (Some(until), Some(before)) => until.min(before),
        (until, before) => until.or(before).unwrap_or(Uuid::max()),
    };
    let columns = "id, at, actor_type, actor_id, action, target_type, target_id, detail";
    let rows = match filter.action {
        Some(action) => {
            let stmt = client
                .prepare_cached(&format!(
                    "SELECT {columns} FROM audit_events \
                     WHERE account_id = $1 AND action = $2 AND id >= $3 AND id < $4 \
                     ORDER BY id DESC LIMIT $5"
                ))
                .await?;
            client
                .query(
                    &stmt,
                    &[&account.0, &action.as_str(), &lower, &upper, &limit],
                )
                .await?
        }
        None => {
            let stmt = client
                .prepare_cached(&format!(
                    "SELECT {columns} FROM audit_events \
                     WHERE account_id = $1 AND id >= $2 AND id < $3 \
                     ORDER BY id DESC LIMIT $4"
                ))
                .await?;
            client
                .query(&stmt, &[&account.0, &lower, &upper, &limit])
                .await?
        }
    };
    rows.iter().map(AuditEvent::from_row).collect()
}
