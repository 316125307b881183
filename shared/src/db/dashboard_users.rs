//! The `dashboard_users` table: people who sign in to the web dashboard.

use time::OffsetDateTime;
use tokio_postgres::Row;

use super::{
    audit_events::{self, Actor, Target},
    DbError, GenericClient,
};
use crate::domain::{AccountId, AuditAction, DashboardUserId};

/// A dashboard user with what a session needs of its account.
#[derive(Debug, Clone)]
pub struct DashboardUser {
    /// Its id.
    pub id: DashboardUserId,
    /// The account it acts for.
    pub account_id: AccountId,
    /// The sign-in address, as entered.
    pub email: String,
    /// The Argon2id PHC string.
    pub password_hash: String,
    /// Whether it also sees the staff pages (`admin:config`).
    pub staff: bool,
    /// When it was disabled, if it was.
    pub disabled_at: Option<OffsetDateTime>,
    /// Whether its account is terminated.
    pub account_terminated: bool,
    /// Whether its account is a vetted registry member.
    pub registry_member: bool,
}

impl DashboardUser {
    fn from_row(row: &Row) -> Self {
        Self {
            id: DashboardUserId(row.get("id")),
            account_id: AccountId(row.get("account_id")),
            email: row.get("email"),
            password_hash: row.get("password_hash"),
            staff: row.get("staff"),
            disabled_at: row.get("disabled_at"),
            account_terminated: row.get::<_, &str>("status") == "terminated",
            registry_member: row.get("registry_member"),
        }
    }

    /// Whether it may sign in and keep its sessions.
    pub fn is_active(&self) -> bool {
        self.disabled_at.is_none() && !self.account_terminated
    }
}

const SELECT: &str = "SELECT u.id, u.account_id, u.email, u.password_hash, u.staff, \
                      u.disabled_at, a.status, a.registry_member \
                      FROM dashboard_users u JOIN accounts a ON a.id = u.account_id";

/// Whether an insert failed because the address is taken.
pub fn is_duplicate_email(err: &DbError) -> bool {
    matches!(err, DbError::Query(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION))
}

/// Stores a new user of `account`, recorded in the audit log (`user.created`);
/// `password_hash` must be an Argon2id PHC string. Run it in a transaction.
pub async fn insert(
    client: &impl GenericClient,
    actor: Actor,
    account: AccountId,
    email: &str,
    password_hash: &str,
    staff: bool,
) -> Result<DashboardUserId, DbError> {
    let id = DashboardUserId::new();
    let stmt = client
        .prepare_cached(
            "INSERT INTO dashboard_users (id, account_id, email, password_hash, staff) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .await?;
    client
        .execute(&stmt, &[&id.0, &account.0, &email, &password_hash, &staff])
        .await?;
    audit_events::record(
        client,
        account,
        actor,
        AuditAction::UserCreated,
        &Target::new("user", id),
        serde_json::json!({ "email": email, "staff": staff }),
    )
    .await?;
    Ok(id)
}

/// The user signing in as `email` (any case).
pub async fn find_by_email(
    client: &impl GenericClient,
    email: &str,
) -> Result<Option<DashboardUser>, DbError> {
    let stmt = client
        .prepare_cached(&format!("{SELECT} WHERE lower(u.email) = lower($1)"))
        .await?;
    Ok(client
        .query_opt(&stmt, &[&email])
        .await?
        .as_ref()
        .map(DashboardUser::from_row))
}

/// One user by id.
pub async fn get(
    client: &impl GenericClient,
    id: DashboardUserId,
) -> Result<Option<DashboardUser>, DbError> {
    let stmt = client
        .prepare_cached(&format!("{SELECT} WHERE u.id = $1"))
        .await?;
    Ok(client
        .query_opt(&stmt, &[&id.0])
        .await?
        .as_ref()
        .map(DashboardUser::from_row))
}

/// Disables a user, recorded in the audit log (`user.disabled`): it can no longer sign in, and
/// its sessions end at their next request. `false` when no such user exists. Run it in a
/// transaction.
pub async fn disable(
    client: &impl GenericClient,
    actor: Actor,
    id: DashboardUserId,
) -> Result<bool, DbError> {
    let stmt = client
        .prepare_cached(
            "UPDATE dashboard_users SET disabled_at = coalesce(disabled_at, now()) WHERE id = $1 \
             RETURNING account_id",
        )
        .await?;
    let Some(row) = client.query_opt(&stmt, &[&id.0]).await? else {
        return Ok(false);
    };
    audit_events::record(
        client,
        AccountId(row.get(0)),
        actor,
        AuditAction::UserDisabled,
        &Target::new("user", id),
        serde_json::json!({}),
    )
    .await?;
    Ok(true)
}
