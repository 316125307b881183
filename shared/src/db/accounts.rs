//! The `accounts` table: tenants and their plan.

use serde::Serialize;
use time::OffsetDateTime;
use tokio_postgres::Row;

use super::{
    audit_events::{self, Actor, Target},
    DbError, GenericClient,
};
use crate::domain::{AccountId, AuditAction};

/// An account and its plan.
#[derive(Debug, Clone, Serialize)]
pub struct Account {
    /// Its id.
    pub id: AccountId,
    /// A display name.
    pub name: String,
    /// Whether an administrator terminated it.
    pub terminated: bool,
    /// Requests per minute across all endpoints and keys.
    pub rate_per_minute: u32,
    /// Registry checks per UTC day.
    pub check_quota_daily: u32,
    /// Whether image and video jobs run the NSFW check.
    pub nsfw_check: bool,
    /// Whether the account is a vetted Shared Registry member.
    pub registry_member: bool,
    /// When it was created.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// Changes to an account's plan; `None` leaves a field as it is.
#[derive(Debug, Default, Clone)]
pub struct PlanUpdate {
    /// New requests-per-minute limit.
    pub rate_per_minute: Option<u32>,
    /// New daily registry check quota.
    pub check_quota_daily: Option<u32>,
    /// NSFW check on or off.
    pub nsfw_check: Option<bool>,
    /// Registry membership on or off.
    pub registry_member: Option<bool>,
}

const COLUMNS: &str = "id, name, status, rate_per_minute, check_quota_daily, nsfw_check, \
                       registry_member, created_at";

impl Account {
    fn from_row(row: &Row) -> Self {
        Self {
            id: AccountId(row.get("id")),
            name: row.get("name"),
            terminated: row.get::<_, &str>("status") == "terminated",
            rate_per_minute: row.get::<_, i32>("rate_per_minute").unsigned_abs(),
            check_quota_daily: row.get::<_, i32>("check_quota_daily").unsigned_abs(),
            nsfw_check: row.get("nsfw_check"),
            registry_member: row.get("registry_member"),
            created_at: row.get("created_at"),
        }
    }
}

/// Creates an active account with the default plan.
pub async fn insert(client: &impl GenericClient, name: &str) -> Result<Account, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO accounts (id, name) VALUES ($1, $2) RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client
        .query_one(&stmt, &[&AccountId::new().0, &name])
        .await?;
    Ok(Account::from_row(&row))
}

/// Reads one account.
pub async fn get(client: &impl GenericClient, id: AccountId) -> Result<Option<Account>, DbError> {
    let stmt = client
        .prepare_cached(&format!("SELECT {COLUMNS} FROM accounts WHERE id = $1"))
        .await?;
    Ok(client
        .query_opt(&stmt, &[&id.0])
        .await?
        .as_ref()
        .map(Account::from_row))
}

/// Accounts, newest first, skipping `offset`, at most `limit` (the staff dashboard's list).
pub async fn list(
    client: &impl GenericClient,
    offset: i64,
    limit: i64,
) -> Result<Vec<Account>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM accounts ORDER BY created_at DESC, id OFFSET $1 LIMIT $2"
        ))
        .await?;
    Ok(client
        .query(&stmt, &[&offset, &limit])
        .await?
        .iter()
        .map(Account::from_row)
        .collect())
}

/// Terminates an account, recorded in the audit log (`account.terminated`). Terminating twice
/// keeps the first time. Run it in a transaction.
pub async fn terminate(
    client: &impl GenericClient,
    actor: Actor,
    id: AccountId,
) -> Result<Option<Account>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "UPDATE accounts SET status = 'terminated', terminated_at = coalesce(terminated_at, now()) \
             WHERE id = $1 RETURNING {COLUMNS}"
        ))
        .await?;
    let Some(account) = client
        .query_opt(&stmt, &[&id.0])
        .await?
        .as_ref()
        .map(Account::from_row)
    else {
        return Ok(None);
    };
    audit_events::record(
        client,
        id,
        actor,
        AuditAction::AccountTerminated,
        &Target::new("account", id),
        serde_json::json!({}),
    )
    .await?;
    Ok(Some(account))
}

/// Applies a plan update, recorded in the audit log (`account.changed`, with the fields given).
/// Run it in a transaction.
pub async fn update_plan(
    client: &impl GenericClient,
    actor: Actor,
    id: AccountId,
    update: &PlanUpdate,
) -> Result<Option<Account>, DbError> {
    let to_i32 = |v: Option<u32>| v.map(|v| i32::try_from(v).unwrap_or(i32::MAX));
    let stmt = client
        .prepare_cached(&format!(
            "UPDATE accounts SET \
               rate_per_minute = coalesce($2, rate_per_minute), \
               check_quota_daily = coalesce($3, check_quota_daily), \
               nsfw_check = coalesce($4, nsfw_check), \
               registry_member = coalesce($5, registry_member) \
             WHERE id = $1 RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client
        .query_opt(
            &stmt,
            &[
                &id.0,
                &to_i32(update.rate_per_minute),
                &to_i32(update.check_quota_daily),
                &update.nsfw_check,
                &update.registry_member,
            ],
        )
        .await?;
    let Some(account) = row.as_ref().map(Account::from_row) else {
        return Ok(None);
    };
    audit_events::record(
        client,
        id,
        actor,
        AuditAction::AccountChanged,
        &Target::new("account", id),
        serde_json::json!({
            "rate_per_minute": update.rate_per_minute,
            "check_quota_daily": update.check_quota_daily,
            "nsfw_check": update.nsfw_check,
            "registry_member": update.registry_member,
        }),
    )
    .await?;
    Ok(Some(account))
}

/// What a worker reads about an account for each job: the switches its result depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingsStamp {
    /// Whether image and video jobs run the NSFW check.
    pub nsfw_check: bool,
    /// Bumped by every change to the account's custom categories or blocklist terms: matchers
    /// compiled for an older version are stale.
    pub settings_stamp: i64,
}

/// The policy stamp of `id`, or `None` when there is no such account.
pub async fn settings_stamp(
    client: &impl GenericClient,
    id: AccountId,
) -> Result<Option<SettingsStamp>, DbError> {
    let stmt = client
        .prepare_cached("SELECT nsfw_check, settings_stamp FROM accounts WHERE id = $1")
        .await?;
    Ok(client
        .query_opt(&stmt, &[&id.0])
        .await?
        .map(|row| SettingsStamp {
            nsfw_check: row.get("nsfw_check"),
            settings_stamp: row.get("settings_stamp"),
        }))
}

/// Bumps the policy version of `id` and returns the new one (`None` when there is no such
/// account). It also locks the account row until the transaction ends, which serialises
/// concurrent changes to the account's policy: every change to its custom categories or
/// blocklist calls it first, in the same transaction.
pub async fn bump_settings_stamp(
    client: &impl GenericClient,
    id: AccountId,
) -> Result<Option<i64>, DbError> {
    let stmt = client
        .prepare_cached(
            "UPDATE accounts SET settings_stamp = settings_stamp + 1 WHERE id = $1 \
             RETURNING settings_stamp",
        )
        .await?;
    Ok(client
        .query_opt(&stmt, &[&id.0])
        .await?
        .map(|row| row.get(0)))
}
