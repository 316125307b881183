//! The `policy_versions` table (contract 13): an account's immutable policy versions.
//!
//! Every switch (activate, shadow, stop the shadow) first bumps the account's settings stamp,
//! which locks the account row until the transaction ends: switches of one account run one
//! after another, each seeing the result of the one before, and a worker claiming a job after
//! the switch commits sees the new stamp and loads the new versions. The partial unique
//! indexes keep one active and one shadow version per account whatever runs.

use time::OffsetDateTime;
use tokio_postgres::{types::Json, Row};

use super::{accounts, DbError, GenericClient};
use crate::{
    domain::{AccountId, PolicyStatus},
    policy::{PolicyDefaults, PolicyDoc, ReviewSettings, Rule},
};

/// A version's number (1, 2, ...), per account.
pub type VersionNumber = i32;

/// A stored version.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyVersion {
    /// Its number.
    pub version: VersionNumber,
    /// Its status.
    pub status: PolicyStatus,
    /// What its author said of it.
    pub note: Option<String>,
    /// Its rules.
    pub doc: PolicyDoc,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it was last activated.
    pub activated_at: Option<OffsetDateTime>,
}

const COLUMNS: &str = "version, status, note, categories, review, created_at, activated_at";

impl PolicyVersion {
    fn from_row(row: &Row) -> Result<Self, DbError> {
        let Json(categories) =
            row.try_get::<_, Json<std::collections::BTreeMap<String, Rule>>>("categories")?;
        let Json(review) = row.try_get::<_, Json<ReviewSettings>>("review")?;
        Ok(Self {
            version: row.get("version"),
            status: super::parse_word(row, "status")?,
            note: row.get("note"),
            doc: PolicyDoc { categories, review },
            created_at: row.get("created_at"),
            activated_at: row.get("activated_at"),
        })
    }
}

/// Writes version 1 of `account`, active, holding `defaults` (nothing when it has versions).
pub async fn insert_first(
    client: &impl GenericClient,
    account: AccountId,
    defaults: &PolicyDefaults,
) -> Result<(), DbError> {
    let doc = PolicyDoc::defaults(defaults);
    let stmt = client
        .prepare_cached(
            "INSERT INTO policy_versions (account_id, version, status, note, categories, review, \
                                          activated_at) \
             SELECT $1, 1, 'active', 'The service defaults.', $2, $3, now() \
             WHERE NOT EXISTS (SELECT FROM policy_versions WHERE account_id = $1)",
        )
        .await?;
    client
        .execute(
            &stmt,
            &[&account.0, &Json(&doc.categories), &Json(&doc.review)],
        )
        .await?;
    Ok(())
}

/// Writes version 1 for every account that has none (accounts made before policies existed);
/// returns how many.
pub async fn backfill(
    client: &impl GenericClient,
    defaults: &PolicyDefaults,
) -> Result<u64, DbError> {
    let doc = PolicyDoc::defaults(defaults);
    let stmt = client
        .prepare_cached(
            "INSERT INTO policy_versions (account_id, version, status, note, categories, review, \
                                          activated_at) \
             SELECT a.id, 1, 'active', 'The service defaults.', $1, $2, now() FROM accounts a \
             WHERE NOT EXISTS (SELECT FROM policy_versions v WHERE v.account_id = a.id)",
        )
        .await?;
    Ok(client
        .execute(&stmt, &[&Json(&doc.categories), &Json(&doc.review)])
        .await?)
}

/// Every version of `account`, newest first.
pub async fn list(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Vec<PolicyVersion>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM policy_versions WHERE account_id = $1 ORDER BY version DESC"
        ))
        .await?;
    client
        .query(&stmt, &[&account.0])
        .await?
        .iter()
        .map(PolicyVersion::from_row)
        .collect()
}

/// Version `version` of `account`.
pub async fn get(
    client: &impl GenericClient,
    account: AccountId,
    version: VersionNumber,
) -> Result<Option<PolicyVersion>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM policy_versions WHERE account_id = $1 AND version = $2"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&account.0, &version])
        .await?
        .as_ref()
        .map(PolicyVersion::from_row)
        .transpose()
}

/// The versions that decide `account`'s new jobs: the active one and the shadow, if any.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Deciding {
    /// The active version (`None` only for an account without versions).
    pub active: Option<PolicyVersion>,
    /// The shadow version.
    pub shadow: Option<PolicyVersion>,
}

/// The active and shadow versions of `account`.
pub async fn deciding(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Deciding, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM policy_versions \
             WHERE account_id = $1 AND status IN ('active', 'shadow')"
        ))
        .await?;
    let mut deciding = Deciding::default();
    for row in client.query(&stmt, &[&account.0]).await? {
        let version = PolicyVersion::from_row(&row)?;
        match version.status {
            PolicyStatus::Active => deciding.active = Some(version),
            _ => deciding.shadow = Some(version),
        }
    }
    Ok(deciding)
}

/// Locks `account` for a change of its versions (see the module documentation): `false` when
/// there is no such account.
async fn lock(client: &impl GenericClient, account: AccountId) -> Result<bool, DbError> {
    Ok(accounts::bump_settings_stamp(client, account)
        .await?
        .is_some())
}

/// Makes a draft of `doc` as `account`'s next version. Run it in a transaction.
pub async fn insert_draft(
    client: &impl GenericClient,
    account: AccountId,
    doc: &PolicyDoc,
    note: Option<&str>,
) -> Result<PolicyVersion, DbError> {
    // The account row's lock numbers concurrent drafts one after the other.
    let stmt = client
        .prepare_cached("SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE")
        .await?;
    client.execute(&stmt, &[&account.0]).await?;
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO policy_versions (account_id, version, status, note, categories, review) \
             SELECT $1, coalesce(max(version), 0) + 1, 'draft', $2, $3, $4 \
             FROM policy_versions WHERE account_id = $1 \
             RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client
        .query_one(
            &stmt,
            &[
                &account.0,
                &note,
                &Json(&doc.categories),
                &Json(&doc.review),
            ],
        )
        .await?;
    PolicyVersion::from_row(&row)
}

/// What a switch did.
#[derive(Debug, Clone, PartialEq)]
pub enum Switched {
    /// The version now has the status asked for; `previous` is the version that had it
    /// before (the active one that retired, or the shadow that went back to draft).
    Changed {
        /// The version, after the switch.
        version: PolicyVersion,
        /// The version the switch displaced.
        previous: Option<VersionNumber>,
    },
    /// The version had that status already; nothing changed.
    Unchanged(PolicyVersion),
    /// The account has no such version.
    NotFound,
    /// The version cannot take that status (the active version as a shadow).
    Refused(PolicyVersion),
}

/// Activates `version` of `account`: the active one retires and, if `version` was the
/// shadow, the shadow slot empties. Activating a retired version is the rollback. Run it in a
/// transaction.
pub async fn activate(
    client: &impl GenericClient,
    account: AccountId,
    version: VersionNumber,
) -> Result<Switched, DbError> {
    if !lock(client, account).await? {
        return Ok(Switched::NotFound);
    }
    let Some(target) = get(client, account, version).await? else {
        return Ok(Switched::NotFound);
    };
    if target.status == PolicyStatus::Active {
        return Ok(Switched::Unchanged(target));
    }
    let retire = client
        .prepare_cached(
            "UPDATE policy_versions SET status = 'retired' \
             WHERE account_id = $1 AND status = 'active' RETURNING version",
        )
        .await?;
    let previous = client
        .query_opt(&retire, &[&account.0])
        .await?
        .map(|row| row.get(0));
    let activate = client
        .prepare_cached(&format!(
            "UPDATE policy_versions SET status = 'active', activated_at = now() \
             WHERE account_id = $1 AND version = $2 RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client.query_one(&activate, &[&account.0, &version]).await?;
    Ok(Switched::Changed {
        version: PolicyVersion::from_row(&row)?,
        previous,
    })
}

/// Runs `version` of `account` as the shadow: the earlier shadow goes back to draft. The active
/// version cannot be the shadow. Run it in a transaction.
pub async fn start_shadow(
    client: &impl GenericClient,
    account: AccountId,
    version: VersionNumber,
) -> Result<Switched, DbError> {
    if !lock(client, account).await? {
        return Ok(Switched::NotFound);
    }
    let Some(target) = get(client, account, version).await? else {
        return Ok(Switched::NotFound);
    };
    match target.status {
        PolicyStatus::Shadow => return Ok(Switched::Unchanged(target)),
        PolicyStatus::Active => return Ok(Switched::Refused(target)),
        PolicyStatus::Draft | PolicyStatus::Retired => {}
    }
    let previous = stop(client, account).await?;
    let shadow = client
        .prepare_cached(&format!(
            "UPDATE policy_versions SET status = 'shadow' \
             WHERE account_id = $1 AND version = $2 RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client.query_one(&shadow, &[&account.0, &version]).await?;
    Ok(Switched::Changed {
        version: PolicyVersion::from_row(&row)?,
        previous,
    })
}

/// Stops `account`'s shadow, which goes back to draft; returns its number (`None` when there
/// was none, or no such account). Run it in a transaction.
pub async fn stop_shadow(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Option<VersionNumber>, DbError> {
    if !lock(client, account).await? {
        return Ok(None);
    }
    stop(client, account).await
}

async fn stop(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Option<VersionNumber>, DbError> {
    let stmt = client
        .prepare_cached(
            "UPDATE policy_versions SET status = 'draft' \
             WHERE account_id = $1 AND status = 'shadow' RETURNING version",
        )
        .await?;
    Ok(client
        .query_opt(&stmt, &[&account.0])
        .await?
        .map(|row| row.get(0)))
}
