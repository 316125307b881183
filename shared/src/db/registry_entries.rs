//! The `registry_entries` table: members' reports, their status machine and check lookups.
//!
//! Identifiers arrive here already keyed (`HMAC-SHA256(APP_REGISTRY_KEY, hash)`); this module
//! never sees a client's hash.

use std::error::Error as StdError;

use serde::Serialize;
use time::OffsetDateTime;
use tokio_postgres::{
    types::{FromSql, ToSql, Type},
    Row,
};
use utoipa::ToSchema;

use super::{DbError, GenericClient};
use crate::{
    domain::{AccountId, RegistryEntryId},
    registry::{
        signals::Match, Category, DisputeAction, EntryStatus, IdentifierType, DISPUTE_UPHELD,
        RETENTION,
    },
};

/// The status column: `expired` is never stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stored {
    Active,
    Disputed,
    Revoked,
}

impl<'a> FromSql<'a> for Stored {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        match <&str as FromSql>::from_sql(ty, raw)? {
            "active" => Ok(Stored::Active),
            "disputed" => Ok(Stored::Disputed),
            "revoked" => Ok(Stored::Revoked),
            other => Err(format!("unknown registry entry status {other:?}").into()),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <&str as FromSql>::accepts(ty)
    }
}

impl<'a> FromSql<'a> for Category {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        Ok(<&str as FromSql>::from_sql(ty, raw)?.parse()?)
    }

    fn accepts(ty: &Type) -> bool {
        <&str as FromSql>::accepts(ty)
    }
}

/// A stored entry. The keyed identifier is not read back: nothing needs it.
#[derive(Debug, Clone)]
pub struct RegistryEntry {
    /// Its id.
    pub id: RegistryEntryId,
    /// The reporting member.
    pub account_id: AccountId,
    /// The category.
    pub category: Category,
    /// The member's case reference.
    pub member_case_ref: String,
    stored: Stored,
    /// Why it was revoked, when it is.
    pub revoke_reason: Option<String>,
    /// When it was revoked, when it is.
    pub revoked_at: Option<OffsetDateTime>,
    /// First report.
    pub created_at: OffsetDateTime,
    /// Last change of any kind.
    pub updated_at: OffsetDateTime,
    /// Retention end: a year after the last report.
    pub expires_at: OffsetDateTime,
}

/// An entry as its member sees it on the wire. Every field is always present;
/// `revoked_at` and `revoke_reason` are `null` unless the entry is revoked.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EntryView {
    /// The entry's id.
    #[schema(value_type = uuid::Uuid)]
    pub entry_id: RegistryEntryId,
    /// Always `email`.
    pub identifier_type: IdentifierType,
    /// The category.
    pub category: Category,
    /// The member's case reference.
    pub member_case_ref: String,
    /// `active`, `disputed`, `revoked` or `expired`.
    pub status: EntryStatus,
    /// Whether an operator has a dispute open on it.
    pub has_open_dispute: bool,
    /// First report.
    #[serde(with = "crate::clock::serde_millis")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
    /// Last change.
    #[serde(with = "crate::clock::serde_millis")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: OffsetDateTime,
    /// Retention end.
    #[serde(with = "crate::clock::serde_millis")]
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: OffsetDateTime,
    /// When it was revoked, else `null`.
    #[serde(with = "crate::clock::serde_millis::option")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub revoked_at: Option<OffsetDateTime>,
    /// Why it was revoked (`dispute_upheld` after an upheld dispute), else `null`.
    #[schema(required = true)]
    pub revoke_reason: Option<String>,
}

impl RegistryEntry {
    fn from_row(row: &Row) -> Result<Self, tokio_postgres::Error> {
        Ok(Self {
            id: RegistryEntryId(row.try_get("id")?),
            account_id: AccountId(row.try_get("account_id")?),
            category: row.try_get("category")?,
            member_case_ref: row.try_get("member_case_ref")?,
            stored: row.try_get("status")?,
            revoke_reason: row.try_get("revoke_reason")?,
            revoked_at: row.try_get("revoked_at")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
            expires_at: row.try_get("expires_at")?,
        })
    }

    /// The status at `now`: a revoked entry stays revoked; any other past `expires_at` is
    /// expired.
    pub fn status(&self, now: OffsetDateTime) -> EntryStatus {
        match self.stored {
            Stored::Revoked => EntryStatus::Revoked,
            _ if self.expires_at <= now => EntryStatus::Expired,
            Stored::Active => EntryStatus::Active,
            Stored::Disputed => EntryStatus::Disputed,
        }
    }

    /// Whether a dispute is open on it.
    pub fn has_open_dispute(&self) -> bool {
        self.stored == Stored::Disputed
    }

    /// Its wire form at `now`.
    pub fn view(&self, now: OffsetDateTime) -> EntryView {
        EntryView {
            entry_id: self.id,
            identifier_type: IdentifierType::Email,
            category: self.category,
            member_case_ref: self.member_case_ref.clone(),
            status: self.status(now),
            has_open_dispute: self.has_open_dispute(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            expires_at: self.expires_at,
            revoked_at: self.revoked_at,
            revoke_reason: self.revoke_reason.clone(),
        }
    }
}

const COLUMNS: &str = "id, account_id, category, member_case_ref, status, revoke_reason, \
                       revoked_at, created_at, updated_at, expires_at";

fn entries(rows: &[Row]) -> Result<Vec<RegistryEntry>, DbError> {
    Ok(rows
        .iter()
        .map(RegistryEntry::from_row)
        .collect::<Result<_, _>>()?)
}

fn entry(row: Option<&Row>) -> Result<Option<RegistryEntry>, DbError> {
    Ok(row.map(RegistryEntry::from_row).transpose()?)
}

/// A member's report.
#[derive(Debug)]
pub struct Report<'a> {
    /// The reporting member.
    pub account_id: AccountId,
    /// The keyed identifier.
    pub identifier: &'a [u8; 32],
    /// The category.
    pub category: Category,
    /// The member's case reference (already validated).
    pub member_case_ref: &'a str,
}

/// What a report did.
#[derive(Debug)]
pub enum ReportOutcome {
    /// A new entry.
    Created(RegistryEntry),
    /// The member's existing entry, refreshed: retention extended, case reference replaced,
    /// status back to active unless disputed.
    Refreshed(RegistryEntry),
    /// The member's entry was revoked after an upheld dispute; it cannot be reported again.
    RevokedAfterDispute,
}

/// Records a report at `now`: creates the entry, or refreshes the member's entry for the same
/// identifier and category, in one statement.
pub async fn report(
    client: &impl GenericClient,
    report: &Report<'_>,
    now: OffsetDateTime,
) -> Result<ReportOutcome, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO registry_entries AS e (id, account_id, identifier, category, \
               member_case_ref, created_at, updated_at, reported_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $6, $6, $7) \
             ON CONFLICT (account_id, identifier, category) DO UPDATE SET \
               member_case_ref = EXCLUDED.member_case_ref, \
               status = CASE WHEN e.status = 'disputed' THEN 'disputed' ELSE 'active' END, \
               revoked_by = NULL, revoke_reason = NULL, revoked_at = NULL, \
               updated_at = EXCLUDED.updated_at, reported_at = EXCLUDED.reported_at, \
               expires_at = EXCLUDED.expires_at \
             WHERE e.revoked_by IS DISTINCT FROM 'dispute' \
             RETURNING {COLUMNS}"
        ))
        .await?;
    let id = RegistryEntryId::new();
    let row = client
        .query_opt(
            &stmt,
            &[
                &id.0,
                &report.account_id.0,
                &report.identifier.as_slice(),
                &report.category.as_str(),
                &report.member_case_ref,
                &now,
                &(now + RETENTION),
            ],
        )
        .await?;
    Ok(match entry(row.as_ref())? {
        None => ReportOutcome::RevokedAfterDispute,
        Some(e) if e.id == id => ReportOutcome::Created(e),
        Some(e) => ReportOutcome::Refreshed(e),
    })
}

/// One of `account`'s own entries.
pub async fn get_own(
    client: &impl GenericClient,
    account: AccountId,
    id: RegistryEntryId,
) -> Result<Option<RegistryEntry>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM registry_entries WHERE id = $1 AND account_id = $2"
        ))
        .await?;
    entry(
        client
            .query_opt(&stmt, &[&id.0, &account.0])
            .await?
            .as_ref(),
    )
}

/// Every member's entries, the most recently changed first, at most `limit` (the staff
/// dashboard's dispute list).
pub async fn list_recent(
    client: &impl GenericClient,
    limit: i64,
) -> Result<Vec<RegistryEntry>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM registry_entries ORDER BY updated_at DESC, id LIMIT $1"
        ))
        .await?;
    entries(&client.query(&stmt, &[&limit]).await?)
}

/// Up to `limit` of `account`'s entries after `after`, oldest first.
pub async fn list_own(
    client: &impl GenericClient,
    account: AccountId,
    after: Option<RegistryEntryId>,
    limit: i64,
) -> Result<Vec<RegistryEntry>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM registry_entries \
             WHERE account_id = $1 AND ($2::uuid IS NULL OR id > $2) ORDER BY id LIMIT $3"
        ))
        .await?;
    entries(
        &client
            .query(&stmt, &[&account.0, &after.map(|a| a.0), &limit])
            .await?,
    )
}

/// Revokes one of `account`'s entries with `reason`. An entry that is already revoked, or
/// under dispute (an operator decides it; revoking would erase the dispute), is returned
/// unchanged. `None` when it is not theirs.
pub async fn revoke_own(
    client: &impl GenericClient,
    account: AccountId,
    id: RegistryEntryId,
    reason: &str,
    now: OffsetDateTime,
) -> Result<Option<RegistryEntry>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "UPDATE registry_entries SET status = 'revoked', revoked_by = 'member', \
               revoke_reason = $3, revoked_at = $4, updated_at = $4 \
             WHERE id = $1 AND account_id = $2 AND status = 'active' RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client
        .query_opt(&stmt, &[&id.0, &account.0, &reason, &now])
        .await?;
    match entry(row.as_ref())? {
        Some(revoked) => Ok(Some(revoked)),
        None => get_own(client, account, id).await,
    }
}

/// What an operator's dispute action did.
#[derive(Debug)]
pub enum DisputeOutcome {
    /// The transition happened.
    Done(RegistryEntry),
    /// No such entry.
    NotFound,
    /// The entry is not in a state the action applies to.
    Refused {
        /// Its status as shown.
        status: EntryStatus,
        /// Whether a dispute is open.
        has_open_dispute: bool,
    },
}

/// Applies an operator's dispute action at `now`. The entry is locked while it is decided, so
/// run this inside a transaction.
pub async fn dispute(
    client: &impl GenericClient,
    id: RegistryEntryId,
    action: DisputeAction,
    now: OffsetDateTime,
) -> Result<DisputeOutcome, DbError> {
    let select = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM registry_entries WHERE id = $1 FOR UPDATE"
        ))
        .await?;
    let Some(current) = entry(client.query_opt(&select, &[&id.0]).await?.as_ref())? else {
        return Ok(DisputeOutcome::NotFound);
    };
    let (status, has_open_dispute) = (current.status(now), current.has_open_dispute());
    if !action.applies_to(status, has_open_dispute) {
        return Ok(DisputeOutcome::Refused {
            status,
            has_open_dispute,
        });
    }
    let set = match action {
        DisputeAction::Open => "status = 'disputed'",
        DisputeAction::Reject => "status = 'active'",
        DisputeAction::Uphold => {
            "status = 'revoked', revoked_by = 'dispute', revoke_reason = $3, revoked_at = $2"
        }
    };
    let stmt = client
        .prepare_cached(&format!(
            "UPDATE registry_entries SET {set}, updated_at = $2 WHERE id = $1 \
             RETURNING {COLUMNS}"
        ))
        .await?;
    let row = if action == DisputeAction::Uphold {
        client
            .query_one(&stmt, &[&id.0, &now, &DISPUTE_UPHELD])
            .await?
    } else {
        client.query_one(&stmt, &[&id.0, &now]).await?
    };
    Ok(DisputeOutcome::Done(RegistryEntry::from_row(&row)?))
}

/// Identifiers per check query.
const MAX_MATCH_IDENTIFIERS: usize = 5;

/// The entries that count for a check by `caller` at `now`: other members' entries for any of
/// `identifiers` that are active or disputed, not expired, of accounts not terminated. One
/// query per [`MAX_MATCH_IDENTIFIERS`] identifiers (a check sends at most that many).
pub async fn find_matches(
    client: &impl GenericClient,
    caller: AccountId,
    identifiers: &[[u8; 32]],
    now: OffsetDateTime,
) -> Result<Vec<Match>, DbError> {
    let mut found = Vec::new();
    for chunk in identifiers.chunks(MAX_MATCH_IDENTIFIERS) {
        found.extend(find_matches_of(client, caller, chunk, now).await?);
    }
    Ok(found)
}

async fn find_matches_of(
    client: &impl GenericClient,
    caller: AccountId,
    identifiers: &[[u8; 32]],
    now: OffsetDateTime,
) -> Result<Vec<Match>, DbError> {
    // The few matching rows each look their account up by primary key, rather than letting
    // the planner hash-join the whole accounts table.
    //
    // Always five identifier parameters (the last repeated to fill them): with `= ANY($1)` the
    // generic plan assumes a larger array than a check sends, so Postgres kept planning every
    // execution anew, which cost more than the lookup itself. With a fixed list the cached
    // generic plan is as cheap as a custom one and is reused.
    let Some(last) = identifiers.last() else {
        return Ok(Vec::new());
    };
    let stmt = client
        .prepare_cached(
            "SELECT e.account_id, e.category, e.status, e.created_at, e.reported_at \
             FROM registry_entries e \
             WHERE e.identifier IN ($1, $2, $3, $4, $5) AND e.account_id <> $6 \
               AND e.status IN ('active', 'disputed') AND e.expires_at > $7 \
               AND (SELECT a.status FROM accounts a WHERE a.id = e.account_id) = 'active'",
        )
        .await?;
    let padded: Vec<&[u8]> = (0..MAX_MATCH_IDENTIFIERS)
        .map(|i| identifiers.get(i).unwrap_or(last).as_slice())
        .collect();
    let params: [&(dyn ToSql + Sync); 7] = [
        &padded[0], &padded[1], &padded[2], &padded[3], &padded[4], &caller.0, &now,
    ];
    let rows = client.query(&stmt, &params).await?;
    rows.iter()
        .map(|row| {
            Ok(Match {
                member: AccountId(row.try_get("account_id")?),
                category: row.try_get("category")?,
                disputed: row.try_get::<_, Stored>("status")? == Stored::Disputed,
                first_reported_at: row.try_get("created_at")?,
                last_reported_at: row.try_get("reported_at")?,
            })
        })
        .collect::<Result<_, tokio_postgres::Error>>()
        .map_err(DbError::from)
}
