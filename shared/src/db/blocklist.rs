//! The `blocklist_terms` table: an account's own blocklist, added to the service's global list.
//!
//! Every change bumps the account's `settings_stamp` first, in the same transaction; that also
//! locks the account row, so concurrent changes to one account's list run one after the other
//! and the per-account limit holds. A change is recorded in the audit log
//! (`blocklist.changed`, with the terms added or removed). Run the changing functions in a
//! transaction, and commit only when they report a change.

use super::{
    accounts,
    audit_events::{self, Actor, Target},
    DbError, GenericClient,
};
use crate::domain::{AccountId, AuditAction};

/// The most terms one account may hold.
pub const MAX_PER_ACCOUNT: usize = 10_000;

/// What [`add`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// This many of the terms were new (0 when all were present: nothing changed).
    Stored(usize),
    /// The account would have held `would_hold` terms, more than [`MAX_PER_ACCOUNT`]: nothing
    /// changed.
    LimitExceeded {
        /// Its terms after the addition.
        would_hold: usize,
    },
}

/// `account`'s terms, sorted by their bytes.
pub async fn terms(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Vec<String>, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT term FROM blocklist_terms WHERE account_id = $1 ORDER BY term COLLATE \"C\"",
        )
        .await?;
    let rows = client.query(&stmt, &[&account.0]).await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Adds `new` terms to `account`'s list; terms already there are left as they are. Run it in a
/// transaction and commit only on [`Added::Stored`] with a non-zero count.
pub async fn add(
    client: &impl GenericClient,
    account: AccountId,
    actor: Actor,
    new: &[String],
) -> Result<Added, DbError> {
    accounts::bump_settings_stamp(client, account).await?;
    let stmt = client
        .prepare_cached(
            "SELECT (SELECT count(*) FROM blocklist_terms WHERE account_id = $1), \
                    (SELECT count(DISTINCT n.term) FROM unnest($2::text[]) AS n(term) \
                     WHERE NOT EXISTS (SELECT 1 FROM blocklist_terms b \
                                       WHERE b.account_id = $1 AND b.term = n.term))",
        )
        .await?;
    let counts = client.query_one(&stmt, &[&account.0, &new]).await?;
    let held = usize::try_from(counts.get::<_, i64>(0)).unwrap_or(usize::MAX);
    let fresh = usize::try_from(counts.get::<_, i64>(1)).unwrap_or(usize::MAX);
    let would_hold = held.saturating_add(fresh);
    if would_hold > MAX_PER_ACCOUNT {
        return Ok(Added::LimitExceeded { would_hold });
    }
    let stmt = client
        .prepare_cached(
            "INSERT INTO blocklist_terms (account_id, term) \
             SELECT $1, term FROM unnest($2::text[]) AS n(term) ON CONFLICT DO NOTHING \
             RETURNING term",
        )
        .await?;
    let stored: Vec<String> = client
        .query(&stmt, &[&account.0, &new])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    if !stored.is_empty() {
        audit(
            client,
            account,
            actor,
            serde_json::json!({ "added": stored }),
        )
        .await?;
    }
    Ok(Added::Stored(stored.len()))
}

/// Removes `old` terms from `account`'s list (absent ones are ignored) and returns how many
/// were there. Run it in a transaction and commit only when that is non-zero.
pub async fn remove(
    client: &impl GenericClient,
    account: AccountId,
    actor: Actor,
    old: &[String],
) -> Result<usize, DbError> {
    accounts::bump_settings_stamp(client, account).await?;
    let stmt = client
        .prepare_cached(
            "DELETE FROM blocklist_terms WHERE account_id = $1 AND term = ANY($2) RETURNING term",
        )
        .await?;
    let removed: Vec<String> = client
        .query(&stmt, &[&account.0, &old])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    if !removed.is_empty() {
        audit(
            client,
            account,
            actor,
            serde_json::json!({ "removed": removed }),
        )
        .await?;
    }
    Ok(removed.len())
}

/// Records a change of `account`'s list in the audit log.
async fn audit(
    client: &impl GenericClient,
    account: AccountId,
    actor: Actor,
    detail: serde_json::Value,
) -> Result<(), DbError> {
    audit_events::record(
        client,
        account,
        actor,
        AuditAction::BlocklistChanged,
        &Target::whole("blocklist"),
        detail,
    )
    .await
}
