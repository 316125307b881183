//! The `hash_bank` table: known media, by the exact SHA-256 of the bytes and, for images, by
//! PDQ perceptual hash. An entry belongs to the global bank (checked for every account) or to
//! one account, and names the category a match flags.

use time::OffsetDateTime;
use tokio_postgres::Row;

use super::{DbError, GenericClient};
use crate::domain::{AccountId, HashBankEntryId};

/// The categories the service itself checks; any other entry category names a custom category
/// of the entry's account.
pub const BUILT_IN_CATEGORIES: [&str; 3] = ["nsfw", "underage", "ai_adult_general"];

/// An entry to store; at least one of the hashes must be present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEntry {
    /// The owning account, or `None` for the global bank.
    pub account: Option<AccountId>,
    /// What a match flags: one of [`BUILT_IN_CATEGORIES`] or a custom category's name.
    pub category: String,
    /// The SHA-256 of the bytes.
    pub sha256: Option<[u8; 32]>,
    /// The PDQ hash of an image.
    pub pdq: Option<[u8; 32]>,
}

/// A stored entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashBankEntry {
    /// Its id.
    pub id: HashBankEntryId,
    /// The owning account, or `None` for the global bank.
    pub account: Option<AccountId>,
    /// What a match flags.
    pub category: String,
    /// The SHA-256 of the bytes.
    pub sha256: Option<[u8; 32]>,
    /// The PDQ hash of an image.
    pub pdq: Option<[u8; 32]>,
    /// When it was first stored.
    pub created_at: OffsetDateTime,
}

impl HashBankEntry {
    fn from_row(row: &Row) -> Self {
        Self {
            id: HashBankEntryId(row.get("id")),
            account: row
                .get::<_, Option<uuid::Uuid>>("account_id")
                .map(AccountId),
            category: row.get("category"),
            sha256: hash_of(row.get("sha256")),
            pdq: hash_of(row.get("pdq")),
            created_at: row.get("created_at"),
        }
    }
}

/// A 32-byte hash column (the table's checks guarantee the length).
fn hash_of(bytes: Option<&[u8]>) -> Option<[u8; 32]> {
    bytes.and_then(|b| b.try_into().ok())
}

/// Stores `entry`, or finds the identical entry (same owner, category and hashes) stored
/// before; either way returns the stored entry.
pub async fn insert(
    client: &impl GenericClient,
    entry: &NewEntry,
) -> Result<HashBankEntry, DbError> {
    let stmt = client
        .prepare_cached(
            "WITH new AS ( \
                 INSERT INTO hash_bank (id, account_id, category, sha256, pdq) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING \
                 RETURNING id, account_id, category, sha256, pdq, created_at) \
             SELECT * FROM new \
             UNION ALL \
             SELECT id, account_id, category, sha256, pdq, created_at FROM hash_bank \
             WHERE account_id IS NOT DISTINCT FROM $2 AND category = $3 \
               AND sha256 IS NOT DISTINCT FROM $4 AND pdq IS NOT DISTINCT FROM $5 \
             LIMIT 1",
        )
        .await?;
    let row = client
        .query_one(
            &stmt,
            &[
                &HashBankEntryId::new().0,
                &entry.account.map(|a| a.0),
                &entry.category,
                &entry.sha256.as_ref().map(<[u8; 32]>::as_slice),
                &entry.pdq.as_ref().map(<[u8; 32]>::as_slice),
            ],
        )
        .await?;
    Ok(HashBankEntry::from_row(&row))
}

/// The distinct categories of the global entries and `account`'s own whose SHA-256 is
/// `sha256`, sorted.
pub async fn categories_for_sha256(
    client: &impl GenericClient,
    account: AccountId,
    sha256: &[u8; 32],
) -> Result<Vec<String>, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT DISTINCT category FROM hash_bank \
             WHERE sha256 = $2 AND (account_id IS NULL OR account_id = $1) \
             ORDER BY category",
        )
        .await?;
    let rows = client
        .query(&stmt, &[&account.0, &sha256.as_slice()])
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Category and PDQ hash of every global and `account`'s own entry that has a PDQ hash.
pub async fn pdq_entries(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Vec<(String, [u8; 32])>, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT category, pdq FROM hash_bank \
             WHERE pdq IS NOT NULL AND (account_id IS NULL OR account_id = $1) \
             ORDER BY id",
        )
        .await?;
    let rows = client.query(&stmt, &[&account.0]).await?;
    Ok(rows
        .iter()
        .filter_map(|row| Some((row.get(0), hash_of(row.get(1))?)))
        .collect())
}
