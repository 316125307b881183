//! The `blocklist_terms` table: an account's own blocklist, added to the service's global list.
//! Every change bumps the account's `policy_version`.

use super::{accounts, DbError, GenericClient};
use crate::domain::AccountId;

/// The most terms one account may hold.
pub const MAX_PER_ACCOUNT: i64 = 10_000;

/// `account`'s terms, sorted.
pub async fn terms(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Vec<String>, DbError> {
    let stmt = client
        .prepare_cached("SELECT term FROM blocklist_terms WHERE account_id = $1 ORDER BY term")
        .await?;
    let rows = client.query(&stmt, &[&account.0]).await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Adds `new` terms (those already present stay as they are). Run it in a transaction: it
/// locks the account row; `false` (and nothing added) when the account would then hold more
/// than [`MAX_PER_ACCOUNT`] terms.
pub async fn add(
    client: &impl GenericClient,
    account: AccountId,
    new: &[String],
) -> Result<bool, DbError> {
    accounts::bump_policy_version(client, account).await?;
    let stmt = client
        .prepare_cached(
            "SELECT count(*) + (SELECT count(*) FROM unnest($2::text[]) AS n(term) \
                                WHERE NOT EXISTS (SELECT 1 FROM blocklist_terms b \
                                                  WHERE b.account_id = $1 AND b.term = n.term)) \
             FROM blocklist_terms WHERE account_id = $1",
        )
        .await?;
    let total: i64 = client.query_one(&stmt, &[&account.0, &new]).await?.get(0);
    if total > MAX_PER_ACCOUNT {
        return Ok(false);
    }
    let stmt = client
        .prepare_cached(
            "INSERT INTO blocklist_terms (account_id, term) \
             SELECT $1, term FROM unnest($2::text[]) AS n(term) ON CONFLICT DO NOTHING",
        )
        .await?;
    client.execute(&stmt, &[&account.0, &new]).await?;
    Ok(true)
}

/// Removes `old` terms (absent ones are ignored).
pub async fn remove(
    client: &impl GenericClient,
    account: AccountId,
    old: &[String],
) -> Result<(), DbError> {
    accounts::bump_policy_version(client, account).await?;
    let stmt = client
        .prepare_cached("DELETE FROM blocklist_terms WHERE account_id = $1 AND term = ANY($2)")
        .await?;
    client.execute(&stmt, &[&account.0, &old]).await?;
    Ok(())
}
