//! The `webhook_endpoints` and `webhook_secrets` tables.
//!
//! Every account has one active signing secret: it is made on first need (first listing,
//! reveal or delivery), so accounts can be created without the encryption key at hand.
//! Rotation gives the old secret an expiry (`grace`), and it keeps signing until then. At most
//! [`MAX_EXPIRING`] rotated-out secrets sign beside the active one: each signature is one more
//! part of the header, and rotating 150 times would otherwise make a 7 KB header.

use std::time::Duration;

use time::OffsetDateTime;
use tokio_postgres::Row;
use uuid::Uuid;

use super::{
    audit_events::{self, Actor, Target},
    DbError, GenericClient,
};
use crate::{
    crypto::{CryptoError, SealingKey},
    domain::{AccountId, AuditAction, SecretStatus},
    signing,
};

/// A webhook table operation failed.
#[derive(Debug, thiserror::Error)]
pub enum WebhookStoreError {
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// Sealing or opening a secret failed.
    #[error(transparent)]
    Crypto(#[from] CryptoError),
}

impl From<tokio_postgres::Error> for WebhookStoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        WebhookStoreError::Db(e.into())
    }
}

/// How long a rotated-out secret keeps signing (the api's rotate and the dashboard's).
pub const ROTATION_GRACE_HOURS: u64 = 24;

/// How many rotated-out secrets keep signing at once; a rotation ends the oldest beyond it.
pub const MAX_EXPIRING: i64 = 10;

/// Sets the account's global URL and records it in the audit log (`webhook.url_set`);
/// returns when it was set. Run it in a transaction.
pub async fn set_url(
    client: &impl GenericClient,
    account: AccountId,
    actor: Actor,
    url: &str,
) -> Result<OffsetDateTime, DbError> {
    let previous = client
        .prepare_cached("SELECT url FROM webhook_endpoints WHERE account_id = $1 FOR UPDATE")
        .await?;
    let before: Option<String> = client
        .query_opt(&previous, &[&account.0])
        .await?
        .map(|r| r.get(0));
    // A new URL starts `active` with no history; setting the same URL again keeps its state.
    let stmt = client
        .prepare_cached(
            "INSERT INTO webhook_endpoints (account_id, url) VALUES ($1, $2) \
             ON CONFLICT (account_id) DO UPDATE SET url = EXCLUDED.url, updated_at = now(), \
                 state = CASE WHEN $3 THEN 'active' ELSE webhook_endpoints.state END, \
                 disabled_reason = CASE WHEN $3 THEN NULL \
                                        ELSE webhook_endpoints.disabled_reason END, \
                 failing_since = CASE WHEN $3 THEN NULL ELSE webhook_endpoints.failing_since END, \
                 failures_since = CASE WHEN $3 THEN 0 ELSE webhook_endpoints.failures_since END, \
                 warned_at = CASE WHEN $3 THEN NULL ELSE webhook_endpoints.warned_at END \
             RETURNING updated_at",
        )
        .await?;
    let changed = before.as_deref().is_some_and(|b| b != url);
    let updated_at = client
        .query_one(&stmt, &[&account.0, &url, &changed])
        .await?
        .get(0);
    audit_events::record(
        client,
        account,
        actor,
        AuditAction::WebhookUrlSet,
        &Target::whole("webhook_url"),
        serde_json::json!({ "url": url }),
    )
    .await?;
    Ok(updated_at)
}

/// The account's global URL, if any.
pub async fn get_url(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Option<String>, DbError> {
    let stmt = client
        .prepare_cached("SELECT url FROM webhook_endpoints WHERE account_id = $1")
        .await?;
    Ok(client
        .query_opt(&stmt, &[&account.0])
        .await?
        .map(|r| r.get(0)))
}

/// Clears the account's global URL (whether or not one was set); a URL cleared is recorded in
/// the audit log (`webhook.url_cleared`). Run it in a transaction.
pub async fn clear_url(
    client: &impl GenericClient,
    account: AccountId,
    actor: Actor,
) -> Result<(), DbError> {
    let stmt = client
        .prepare_cached("DELETE FROM webhook_endpoints WHERE account_id = $1 RETURNING url")
        .await?;
    if let Some(row) = client.query_opt(&stmt, &[&account.0]).await? {
        let url: String = row.get(0);
        audit_events::record(
            client,
            account,
            actor,
            AuditAction::WebhookUrlCleared,
            &Target::whole("webhook_url"),
            serde_json::json!({ "url": url }),
        )
        .await?;
    }
    Ok(())
}

/// A signing secret's metadata (never its value).
#[derive(Debug, Clone)]
pub struct SecretMeta {
    /// Its id.
    pub id: Uuid,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it stops signing (`None` for the active secret).
    pub expires_at: Option<OffsetDateTime>,
}

impl SecretMeta {
    /// `expiring` once rotated out (it has an expiry), else `active`.
    pub fn status(&self) -> SecretStatus {
        if self.expires_at.is_some() {
            SecretStatus::Expiring
        } else {
            SecretStatus::Active
        }
    }
}

/// A signing secret with its value.
#[derive(Debug, Clone)]
pub struct SigningSecret {
    /// Its metadata.
    pub meta: SecretMeta,
    /// The `whsec_` value.
    pub secret: String,
}

fn context(account: AccountId, id: Uuid) -> Vec<u8> {
    [account.0.as_bytes().as_slice(), id.as_bytes().as_slice()].concat()
}

fn open(
    key: &SealingKey,
    account: AccountId,
    row: &Row,
) -> Result<SigningSecret, WebhookStoreError> {
    let meta = SecretMeta {
        id: row.get("id"),
        created_at: row.get("created_at"),
        expires_at: row.get("expires_at"),
    };
    let plain = key.open(
        &context(account, meta.id),
        row.get("nonce"),
        row.get("sealed"),
    )?;
    let secret = String::from_utf8(plain).map_err(|_| CryptoError::Open)?;
    Ok(SigningSecret { meta, secret })
}

async fn insert_active(
    client: &impl GenericClient,
    key: &SealingKey,
    account: AccountId,
) -> Result<u64, WebhookStoreError> {
    let id = Uuid::now_v7();
    let secret = signing::generate_secret()?;
    let (nonce, sealed) = key.seal(&context(account, id), secret.as_bytes())?;
    let stmt = client
        .prepare_cached(
            "INSERT INTO webhook_secrets (id, account_id, nonce, sealed) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (account_id) WHERE expires_at IS NULL DO NOTHING",
        )
        .await?;
    Ok(client
        .execute(&stmt, &[&id, &account.0, &nonce.as_slice(), &sealed])
        .await?)
}

/// The secrets that sign now (the active one first, then expiring ones), making the active
/// one if the account has none yet.
pub async fn signing_secrets(
    client: &impl GenericClient,
    key: &SealingKey,
    account: AccountId,
) -> Result<Vec<SigningSecret>, WebhookStoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT id, created_at, expires_at, nonce, sealed FROM webhook_secrets \
             WHERE account_id = $1 AND (expires_at IS NULL OR expires_at > now()) \
             ORDER BY expires_at IS NOT NULL, created_at DESC",
        )
        .await?;
    let mut rows = client.query(&stmt, &[&account.0]).await?;
    let has_active = rows
        .first()
        .is_some_and(|r| r.get::<_, Option<OffsetDateTime>>("expires_at").is_none());
    if !has_active {
        insert_active(client, key, account).await?;
        rows = client.query(&stmt, &[&account.0]).await?;
    }
    rows.iter().map(|row| open(key, account, row)).collect()
}

/// Rotates: the active secret expires after `grace` and a new active one is made; rotated-out
/// secrets beyond the newest [`MAX_EXPIRING`] stop signing now. Recorded in the audit log
/// (`webhook.secret_rotated`). Run it in a transaction.
pub async fn rotate(
    client: &impl GenericClient,
    key: &SealingKey,
    account: AccountId,
    actor: Actor,
    grace: Duration,
) -> Result<SigningSecret, WebhookStoreError> {
    let stmt = client
        .prepare_cached(
            "UPDATE webhook_secrets SET expires_at = now() + make_interval(secs => $2) \
             WHERE account_id = $1 AND expires_at IS NULL",
        )
        .await?;
    client
        .execute(&stmt, &[&account.0, &grace.as_secs_f64()])
        .await?;
    let stmt = client
        .prepare_cached(
            "UPDATE webhook_secrets SET expires_at = now() \
             WHERE account_id = $1 AND expires_at > now() AND id NOT IN ( \
               SELECT id FROM webhook_secrets WHERE account_id = $1 AND expires_at > now() \
               ORDER BY created_at DESC LIMIT $2)",
        )
        .await?;
    client.execute(&stmt, &[&account.0, &MAX_EXPIRING]).await?;
    insert_active(client, key, account).await?;
    let secrets = signing_secrets(client, key, account).await?;
    let active = secrets
        .into_iter()
        .next()
        .ok_or(WebhookStoreError::Crypto(CryptoError::Open))?;
    audit_events::record(
        client,
        account,
        actor,
        AuditAction::WebhookSecretRotated,
        &Target::new("webhook_secret", active.meta.id),
        serde_json::json!({ "grace_seconds": grace.as_secs() }),
    )
    .await?;
    Ok(active)
}
