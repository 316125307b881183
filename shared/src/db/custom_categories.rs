//! The `custom_categories` table: an account's own categories, matched by keyword by the local
//! classifier and described to a model.
//!
//! Every change bumps the account's `settings_stamp` first, in the same transaction; that also
//! locks the account row, so concurrent changes to one account's categories run one after the
//! other and the per-account limit holds. Each change is recorded in the audit log
//! (`custom_category.changed`) by the actor given. Run the changing functions in a transaction,
//! and commit only when they report a change.

use time::OffsetDateTime;
use tokio_postgres::Row;

use super::{
    accounts,
    audit_events::{self, Actor, Target},
    DbError, GenericClient,
};
use crate::domain::{AccountId, AuditAction, CustomCategoryId};

/// The most custom categories one account may have.
pub const MAX_PER_ACCOUNT: usize = 20;

/// A custom category.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCategoryRow {
    /// Its id.
    pub id: CustomCategoryId,
    /// Its slug (`^[a-z0-9_]{1,64}$`), unique per account: the key of its result under
    /// `categories.custom`.
    pub name: String,
    /// The policy text given to a model (1 to 2000 characters).
    pub description: String,
    /// Terms the local classifier matches; may be empty.
    pub keywords: Vec<String>,
    /// Whether jobs are checked against it.
    pub enabled: bool,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
}

const COLUMNS: &str = "id, name, description, keywords, enabled, created_at, updated_at";

impl CustomCategoryRow {
    fn from_row(row: &Row) -> Self {
        Self {
            id: CustomCategoryId(row.get("id")),
            name: row.get("name"),
            description: row.get("description"),
            keywords: row.get("keywords"),
            enabled: row.get("enabled"),
            created_at: row.get("created_at"),
            updated_at: row.get("updated_at"),
        }
    }
}

/// A category to create, already validated.
#[derive(Debug, Clone, Copy)]
pub struct NewCategory<'a> {
    /// Its slug.
    pub name: &'a str,
    /// Its policy text.
    pub description: &'a str,
    /// Its keywords.
    pub keywords: &'a [String],
    /// Whether it runs.
    pub enabled: bool,
}

/// A change to a category, already validated; `None` leaves a field as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct CategoryChange<'a> {
    /// New policy text.
    pub description: Option<&'a str>,
    /// New keywords (replacing the old ones).
    pub keywords: Option<&'a [String]>,
    /// On or off.
    pub enabled: Option<bool>,
}

/// What [`insert`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inserted {
    /// The new category: commit.
    Created(CustomCategoryRow),
    /// The account already has a category of that name: nothing changed.
    DuplicateName,
    /// The account already has [`MAX_PER_ACCOUNT`] categories: nothing changed.
    LimitReached,
}

/// Every category of `account`, ordered by name.
pub async fn list(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Vec<CustomCategoryRow>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM custom_categories WHERE account_id = $1 \
             ORDER BY name COLLATE \"C\""
        ))
        .await?;
    let rows = client.query(&stmt, &[&account.0]).await?;
    Ok(rows.iter().map(CustomCategoryRow::from_row).collect())
}

/// The enabled categories of `account`, ordered by name: what a worker checks a job against.
pub async fn enabled(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Vec<CustomCategoryRow>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM custom_categories WHERE account_id = $1 AND enabled \
             ORDER BY name COLLATE \"C\""
        ))
        .await?;
    let rows = client.query(&stmt, &[&account.0]).await?;
    Ok(rows.iter().map(CustomCategoryRow::from_row).collect())
}

/// Whether `account` has a category named `name` (enabled or not).
pub async fn exists(
    client: &impl GenericClient,
    account: AccountId,
    name: &str,
) -> Result<bool, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM custom_categories WHERE account_id = $1 AND name = $2)",
        )
        .await?;
    Ok(client.query_one(&stmt, &[&account.0, &name]).await?.get(0))
}

/// Creates a category for `account`, unless the name is taken or the account already has
/// [`MAX_PER_ACCOUNT`]. Run it in a transaction and commit only on [`Inserted::Created`].
pub async fn insert(
    client: &impl GenericClient,
    account: AccountId,
    actor: Actor,
    new: &NewCategory<'_>,
) -> Result<Inserted, DbError> {
    accounts::bump_settings_stamp(client, account).await?;
    let stmt = client
        .prepare_cached(
            "SELECT count(*), count(*) FILTER (WHERE name = $2) \
             FROM custom_categories WHERE account_id = $1",
        )
        .await?;
    let counts = client.query_one(&stmt, &[&account.0, &new.name]).await?;
    if counts.get::<_, i64>(1) > 0 {
        return Ok(Inserted::DuplicateName);
    }
    if usize::try_from(counts.get::<_, i64>(0)).unwrap_or(usize::MAX) >= MAX_PER_ACCOUNT {
        return Ok(Inserted::LimitReached);
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
                &CustomCategoryId::new().0,
                &account.0,
                &new.name,
                &new.description,
                &new.keywords,
                &new.enabled,
            ],
        )
        .await?;
    let created = CustomCategoryRow::from_row(&row);
    audit(
        client,
        account,
        actor,
        &created,
        serde_json::json!({
            "change": "created", "name": created.name, "description": created.description,
            "keywords": created.keywords, "enabled": created.enabled,
        }),
    )
    .await?;
    Ok(Inserted::Created(created))
}

/// Applies `change` to `account`'s category `id`: the changed category, or `None` when the
/// account has no such category. Run it in a transaction and commit only on `Some`.
pub async fn update(
    client: &impl GenericClient,
    account: AccountId,
    actor: Actor,
    id: CustomCategoryId,
    change: &CategoryChange<'_>,
) -> Result<Option<CustomCategoryRow>, DbError> {
    accounts::bump_settings_stamp(client, account).await?;
    let stmt = client
        .prepare_cached(&format!(
            "UPDATE custom_categories SET description = coalesce($3, description), \
                    keywords = coalesce($4, keywords), enabled = coalesce($5, enabled), \
                    updated_at = now() \
             WHERE account_id = $1 AND id = $2 RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client
        .query_opt(
            &stmt,
            &[
                &account.0,
                &id.0,
                &change.description,
                &change.keywords,
                &change.enabled,
            ],
        )
        .await?;
    let Some(changed) = row.as_ref().map(CustomCategoryRow::from_row) else {
        return Ok(None);
    };
    let mut detail = serde_json::json!({"change": "changed", "name": changed.name});
    if change.description.is_some() {
        detail["description"] = changed.description.clone().into();
    }
    if change.keywords.is_some() {
        detail["keywords"] = changed.keywords.clone().into();
    }
    if let Some(enabled) = change.enabled {
        detail["enabled"] = enabled.into();
    }
    audit(client, account, actor, &changed, detail).await?;
    Ok(Some(changed))
}

/// Deletes `account`'s category `id`: `false` when the account has no such category. Run it in
/// a transaction and commit only on `true`.
pub async fn delete(
    client: &impl GenericClient,
    account: AccountId,
    actor: Actor,
    id: CustomCategoryId,
) -> Result<bool, DbError> {
    accounts::bump_settings_stamp(client, account).await?;
    let stmt = client
        .prepare_cached(&format!(
            "DELETE FROM custom_categories WHERE account_id = $1 AND id = $2 RETURNING {COLUMNS}"
        ))
        .await?;
    let Some(row) = client.query_opt(&stmt, &[&account.0, &id.0]).await? else {
        return Ok(false);
    };
    let deleted = CustomCategoryRow::from_row(&row);
    let detail = serde_json::json!({"change": "deleted", "name": deleted.name});
    audit(client, account, actor, &deleted, detail).await?;
    Ok(true)
}

/// Records a change of `category` in the audit log.
async fn audit(
    client: &impl GenericClient,
    account: AccountId,
    actor: Actor,
    category: &CustomCategoryRow,
    detail: serde_json::Value,
) -> Result<(), DbError> {
    audit_events::record(
        client,
        account,
        actor,
        AuditAction::CustomCategoryChanged,
        &Target::new("custom_category", category.id),
        detail,
    )
    .await
}
