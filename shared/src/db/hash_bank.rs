//! The `hash_bank` table: known media by exact SHA-256 and, for images, PDQ perceptual hash.
//! An entry is global (`account_id` NULL) or an account's own, and names the category it flags.

use uuid::Uuid;

use super::{DbError, GenericClient};
use crate::domain::AccountId;

/// A new bank entry.
#[derive(Debug, Clone)]
pub struct NewEntry {
    /// The owning account, or `None` for the global bank.
    pub account: Option<AccountId>,
    /// `nsfw`, `underage`, `ai_adult_general` or a custom category's name.
    pub category: String,
    /// The exact hash.
    pub sha256: Option<[u8; 32]>,
    /// The perceptual hash of an image.
    pub pdq: Option<[u8; 32]>,
}

/// Stores `entry`; returns its id.
pub async fn insert(client: &impl GenericClient, entry: &NewEntry) -> Result<Uuid, DbError> {
    let stmt = client
        .prepare_cached(
            "INSERT INTO hash_bank (id, account_id, category, sha256, pdq) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .await?;
    let id = Uuid::now_v7();
    client
        .execute(
            &stmt,
            &[
                &id,
                &entry.account.map(|a| a.0),
                &entry.category,
                &entry.sha256.as_ref().map(|h| h.as_slice()),
                &entry.pdq.as_ref().map(|h| h.as_slice()),
            ],
        )
        .await?;
    Ok(id)
}

/// The categories of the global and `account`'s entries whose SHA-256 is `sha256`.
pub async fn categories_for_sha256(
    client: &impl GenericClient,
    account: AccountId,
    sha256: &[u8; 32],
) -> Result<Vec<String>, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT DISTINCT category FROM hash_bank \
             WHERE sha256 = $2 AND (account_id IS NULL OR account_id = $1)",
        )
        .await?;
    let rows = client
        .query(&stmt, &[&account.0, &sha256.as_slice()])
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Category and PDQ hash of every global and `account`'s image entry.
pub async fn pdq_entries(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Vec<(String, [u8; 32])>, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT category, pdq FROM hash_bank \
             WHERE pdq IS NOT NULL AND (account_id IS NULL OR account_id = $1)",
        )
        .await?;
    let rows = client.query(&stmt, &[&account.0]).await?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let pdq: &[u8] = r.get(1);
            Some((r.get(0), pdq.try_into().ok()?))
        })
        .collect())
}
