//! The `api_keys` table.

use serde::Serialize;
use time::OffsetDateTime;
use tokio_postgres::Row;

use super::{
    audit_events::{self, Actor, Target},
    DbError, GenericClient,
};
use crate::domain::{AccountId, ApiKeyId, AuditAction, Scope};

/// A stored key (never its value).
#[derive(Debug, Clone, Serialize)]
pub struct ApiKey {
    /// Its id.
    pub key_id: ApiKeyId,
    /// The owning account.
    pub account_id: AccountId,
    /// An optional display name.
    pub name: Option<String>,
    /// The 8-character prefix shown to people.
    pub prefix: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
    /// Whether it may be used.
    pub enabled: bool,
    /// When it stops working, if ever.
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
    /// When it was created.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When it was deleted, if it was.
    #[serde(with = "time::serde::rfc3339::option")]
    pub deleted_at: Option<OffsetDateTime>,
}

/// What a new key is made of.
#[derive(Debug)]
pub struct NewApiKey<'a> {
    /// The owning account.
    pub account_id: AccountId,
    /// An optional display name.
    pub name: Option<&'a str>,
    /// Its display prefix.
    pub prefix: &'a str,
    /// SHA-256 of the full key.
    pub hash: &'a [u8; 32],
    /// Granted scopes (never `admin:config`; the table refuses it too).
    pub scopes: &'a [Scope],
    /// When it stops working, if ever.
    pub expires_at: Option<OffsetDateTime>,
}

/// The facts authentication needs about a presented key, with its account.
#[derive(Debug, Clone)]
pub struct KeyPrincipal {
    /// The key's id.
    pub key_id: ApiKeyId,
    /// The owning account.
    pub account_id: AccountId,
    /// Granted scopes that this build knows.
    pub scopes: Vec<Scope>,
    /// Whether the key is enabled.
    pub enabled: bool,
    /// When the key stops working, if ever.
    pub expires_at: Option<OffsetDateTime>,
    /// Whether the key was deleted.
    pub deleted: bool,
    /// Whether the account was terminated.
    pub account_terminated: bool,
    /// The account's requests-per-minute limit.
    pub rate_per_minute: u32,
    /// The account's daily registry check quota.
    pub check_quota_daily: u32,
    /// Whether the account's NSFW check is on.
    pub nsfw_check: bool,
    /// Whether the account is a registry member.
    pub registry_member: bool,
}

const COLUMNS: &str =
    "id, account_id, name, prefix, scopes, enabled, expires_at, created_at, deleted_at";

impl ApiKey {
    fn from_row(row: &Row) -> Self {
        Self {
            key_id: ApiKeyId(row.get("id")),
            account_id: AccountId(row.get("account_id")),
            name: row.get("name"),
            prefix: row.get("prefix"),
            scopes: row.get("scopes"),
            enabled: row.get("enabled"),
            expires_at: row.get("expires_at"),
            created_at: row.get("created_at"),
            deleted_at: row.get("deleted_at"),
        }
    }
}

/// Stores a new key.
pub async fn insert(client: &impl GenericClient, key: &NewApiKey<'_>) -> Result<ApiKey, DbError> {
    let scopes: Vec<&str> = key.scopes.iter().map(|s| s.as_str()).collect();
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO api_keys (id, account_id, name, prefix, key_hash, scopes, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client
        .query_one(
            &stmt,
            &[
                &ApiKeyId::new().0,
                &key.account_id.0,
                &key.name,
                &key.prefix,
                &key.hash.as_slice(),
                &scopes,
                &key.expires_at,
            ],
        )
        .await?;
    Ok(ApiKey::from_row(&row))
}

/// Enables or disables a key that is not deleted, recorded in the audit log (`key.enabled`,
/// `key.disabled`). Run it in a transaction.
pub async fn set_enabled(
    client: &impl GenericClient,
    actor: Actor,
    id: ApiKeyId,
    enabled: bool,
) -> Result<Option<ApiKey>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "UPDATE api_keys SET enabled = $2 WHERE id = $1 AND deleted_at IS NULL \
             RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client.query_opt(&stmt, &[&id.0, &enabled]).await?;
    let action = if enabled {
        AuditAction::KeyEnabled
    } else {
        AuditAction::KeyDisabled
    };
    audited(client, actor, action, row, serde_json::json!({})).await
}

/// Deletes a key, recorded in the audit log (`key.deleted`). The row stays, so jobs keep their
/// `api_key_id`; its name stops resolving. Run it in a transaction.
pub async fn delete(
    client: &impl GenericClient,
    actor: Actor,
    id: ApiKeyId,
) -> Result<Option<ApiKey>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "UPDATE api_keys SET deleted_at = coalesce(deleted_at, now()), enabled = false \
             WHERE id = $1 RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client.query_opt(&stmt, &[&id.0]).await?;
    audited(
        client,
        actor,
        AuditAction::KeyDeleted,
        row,
        serde_json::json!({}),
    )
    .await
}

/// Renames a key that is not deleted, recorded in the audit log (`key.renamed`). Run it in a
/// transaction.
pub async fn rename(
    client: &impl GenericClient,
    actor: Actor,
    id: ApiKeyId,
    name: &str,
) -> Result<Option<ApiKey>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "UPDATE api_keys SET name = $2 WHERE id = $1 AND deleted_at IS NULL RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client.query_opt(&stmt, &[&id.0, &name]).await?;
    audited(
        client,
        actor,
        AuditAction::KeyRenamed,
        row,
        serde_json::json!({ "name": name }),
    )
    .await
}

/// The key of `row`, its change recorded in the audit log as `action`.
async fn audited(
    client: &impl GenericClient,
    actor: Actor,
    action: AuditAction,
    row: Option<Row>,
    detail: serde_json::Value,
) -> Result<Option<ApiKey>, DbError> {
    let Some(key) = row.as_ref().map(ApiKey::from_row) else {
        return Ok(None);
    };
    audit_events::record(
        client,
        key.account_id,
        actor,
        action,
        &Target::new("key", key.key_id),
        detail,
    )
    .await?;
    Ok(Some(key))
}

/// A key of `account` on the dashboard's list: the key and when it was last used.
#[derive(Debug, Clone)]
pub struct ListedKey {
    /// The key.
    pub key: ApiKey,
    /// When a job was last submitted with it, if ever.
    pub last_used_at: Option<OffsetDateTime>,
}

/// The keys of `account` that are not deleted, newest first, with when each was last used
/// (its newest job).
pub async fn list(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Vec<ListedKey>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS}, \
                    (SELECT max(j.created_at) FROM jobs j WHERE j.api_key_id = k.id) AS last_used_at \
             FROM api_keys k WHERE account_id = $1 AND deleted_at IS NULL \
             ORDER BY created_at DESC, id"
        ))
        .await?;
    Ok(client
        .query(&stmt, &[&account.0])
        .await?
        .iter()
        .map(|row| ListedKey {
            key: ApiKey::from_row(row),
            last_used_at: row.get("last_used_at"),
        })
        .collect())
}

/// Whether key `id` belongs to `account` and is not deleted.
pub async fn is_owned(
    client: &impl GenericClient,
    account: AccountId,
    id: ApiKeyId,
) -> Result<bool, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT EXISTS (SELECT FROM api_keys \
             WHERE id = $1 AND account_id = $2 AND deleted_at IS NULL)",
        )
        .await?;
    Ok(client.query_one(&stmt, &[&id.0, &account.0]).await?.get(0))
}

/// Looks a presented key up by its hash, with its account.
pub async fn find_principal(
    client: &impl GenericClient,
    hash: &[u8; 32],
) -> Result<Option<KeyPrincipal>, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT k.id, k.account_id, k.scopes, k.enabled, k.expires_at, \
                    k.deleted_at IS NOT NULL AS deleted, a.status, a.rate_per_minute, \
                    a.check_quota_daily, a.nsfw_check, a.registry_member \
             FROM api_keys k JOIN accounts a ON a.id = k.account_id \
             WHERE k.key_hash = $1",
        )
        .await?;
    let row = client.query_opt(&stmt, &[&hash.as_slice()]).await?;
    Ok(row.map(|row| KeyPrincipal {
        key_id: ApiKeyId(row.get("id")),
        account_id: AccountId(row.get("account_id")),
        scopes: row
            .get::<_, Vec<String>>("scopes")
            .iter()
            .filter_map(|s| s.parse().ok())
            .collect(),
        enabled: row.get("enabled"),
        expires_at: row.get("expires_at"),
        deleted: row.get("deleted"),
        account_terminated: row.get::<_, &str>("status") == "terminated",
        rate_per_minute: row.get::<_, i32>("rate_per_minute").unsigned_abs(),
        check_quota_daily: row.get::<_, i32>("check_quota_daily").unsigned_abs(),
        nsfw_check: row.get("nsfw_check"),
        registry_member: row.get("registry_member"),
    }))
}
