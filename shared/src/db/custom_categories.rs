//! The `custom_categories` table: an account's own categories, matched by keyword locally and
//! described to a model. Every change bumps the account's `policy_version`.

use time::OffsetDateTime;
use tokio_postgres::Row;
use uuid::Uuid;

use super::{accounts, DbError, GenericClient};
use crate::domain::AccountId;

/// The most custom categories an account may have.
pub const MAX_PER_ACCOUNT: i64 = 20;

/// A custom category.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCategoryRow {
    /// Its id.
    pub id: Uuid,
    /// Its slug, unique per account: the key under `categories.custom`.
    pub name: String,
    /// The policy text given to a model.
    pub description: String,
    /// Terms the local classifier matches.
    pub keywords: Vec<String>,
    /// Whether it runs.
    pub enabled: bool,
    /// When it was made.
    pub created_at: OffsetDateTime,
}

const COLUMNS: &str = "id, name, description, keywords, enabled, created_at";

impl CustomCategoryRow {
    fn from_row(row: &Row) -> Self {
        Self {
            id: row.get("id"),
            name: row.get("name"),
            description: row.get("description"),
            keywords: row.get("keywords"),
            enabled: row.get("enabled"),
            created_at: row.get("created_at"),
        }
    }
}

/// A change to a category; `None` leaves a field as it is.
#[derive(Debug, Default)]
pub struct CategoryChange<'a> {
    /// New policy text.
    pub description: Option<&'a str>,
    /// New keywords.
    pub keywords: Option<&'a [String]>,
    /// Switch it on or off.
    pub enabled: Option<bool>,
}

/// Every category of `account`, by name.
pub async fn list(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Vec<CustomCategoryRow>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM custom_categories WHERE account_id = $1 ORDER BY name"
        ))
        .await?;
    let rows = client.query(&stmt, &[&account.0]).await?;
    Ok(rows.iter().map(CustomCategoryRow::from_row).collect())
}

/// The enabled categories of `account`, by name: what the worker checks.
pub async fn enabled(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Vec<CustomCategoryRow>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM custom_categories WHERE account_id = $1 AND enabled \
             ORDER BY name"
        ))
        .await?;
    let rows = client.query(&stmt, &[&account.0]).await?;
    Ok(rows.iter().map(CustomCategoryRow::from_row).collect())
}

/// What [`insert`] did.
#[derive(Debug)]
pub enum Inserted {
    /// The new category.
    Created(CustomCategoryRow),
    /// The account already has a category with that name.
    DuplicateName,
    /// The account already has [`MAX_PER_ACCOUNT`] categories.
    TooMany,
}

/// Adds a category. Run it in a transaction: it locks the account row to count its
/// categories, and bumps the policy version.
pub async fn insert(
    client: &impl GenericClient,
    account: AccountId,
    name: &str,
    description: &str,
    keywords: &[String],
    enabled: bool,
) -> Result<Inserted, DbError> {
    accounts::bump_policy_version(client, account).await?;
    let stmt = client
        .prepare_cached("SELECT count(*), count(*) FILTER (WHERE name = $2) FROM custom_categories WHERE account_id = $1")
        .await?;
    let row = client.query_one(&stmt, &[&account.0, &name]).await?;
    if row.get::<_, i64>(1) > 0 {
        return Ok(Inserted::DuplicateName);
    }
    if row.get::<_, i64>(0) >= MAX_PER_ACCOUNT {
        return Ok(Inserted::TooMany);
    }
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO custom_categories (id, account_id, name, description, keywords, enabled) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client
        .query_one(
            &stmt,
            &[
                &Uuid::now_v7(),
                &account.0,
                &name,
                &description,
                &keywords,
                &enabled,
            ],
        )
        .await?;
    Ok(Inserted::Created(CustomCategoryRow::from_row(&row)))
}

/// Applies `change` to `account`'s category `id`; `None` when it has no such category.
pub async fn update(
    client: &impl GenericClient,
    account: AccountId,
    id: Uuid,
    change: &CategoryChange<'_>,
) -> Result<Option<CustomCategoryRow>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "UPDATE custom_categories SET description = coalesce($3, description), \
                    keywords = coalesce($4, keywords), enabled = coalesce($5, enabled), \
                    updated_at = now() \
             WHERE account_id = $1 AND id = $2 RETURNING {COLUMNS}"
        ))
        .await?;
    let keywords = change.keywords.map(<[String]>::to_vec);
    let row = client
        .query_opt(
            &stmt,
            &[
                &account.0,
                &id,
                &change.description,
                &keywords,
                &change.enabled,
            ],
        )
        .await?;
    if row.is_some() {
        accounts::bump_policy_version(client, account).await?;
    }
    Ok(row.as_ref().map(CustomCategoryRow::from_row))
}

/// Deletes `account`'s category `id`; `false` when it has no such category.
pub async fn delete(
    client: &impl GenericClient,
    account: AccountId,
    id: Uuid,
) -> Result<bool, DbError> {
    let stmt = client
        .prepare_cached("DELETE FROM custom_categories WHERE account_id = $1 AND id = $2")
        .await?;
    let deleted = client.execute(&stmt, &[&account.0, &id]).await? == 1;
    if deleted {
        accounts::bump_policy_version(client, account).await?;
    }
    Ok(deleted)
}
