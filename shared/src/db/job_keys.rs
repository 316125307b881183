//! The `idempotency_keys` table: which job holds an account's `Idempotency-Key`, and clearing
//! keys past their 24 hours. `jobs::insert_many` stores the keys.

use time::OffsetDateTime;
use tokio_postgres::{types::Type, GenericClient as _, Row};

use super::{BatchClient, DbError, GenericClient};
use crate::domain::{AccountId, IdempotencyKey, JobId, RequestFingerprint};

/// The job holding an account's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyHolder {
    /// The job.
    pub id: JobId,
    /// The fingerprint of the request that created it.
    pub fingerprint: RequestFingerprint,
    /// When it was submitted (the key expires 24 hours later).
    pub created_at: OffsetDateTime,
}

impl KeyHolder {
    fn from_row(row: &Row) -> Result<Self, DbError> {
        let raw: Vec<u8> = row.try_get("fingerprint")?;
        let fingerprint =
            <[u8; 32]>::try_from(raw.as_slice()).map_err(|_| DbError::UnknownValue {
                column: "fingerprint",
                value: format!("{} bytes", raw.len()),
            })?;
        Ok(Self {
            id: JobId(row.try_get("job_id")?),
            fingerprint: RequestFingerprint(fingerprint),
            created_at: row.try_get("created_at")?,
        })
    }
}

/// The job holding each key, in the order asked; `None` where no job holds it.
pub async fn holders(
    client: &impl BatchClient,
    keys: &[(AccountId, &IdempotencyKey)],
) -> Result<Vec<Option<KeyHolder>>, DbError> {
    let accounts: Vec<uuid::Uuid> = keys.iter().map(|(account, _)| account.0).collect();
    let names: Vec<&str> = keys.iter().map(|(_, key)| key.as_str()).collect();
    let rows = client
        .unnamed()
        .query_typed(
            "SELECT k.ord, i.job_id, i.fingerprint, i.created_at
             FROM unnest($1::uuid[], $2::text[]) WITH ORDINALITY AS k(account_id, key, ord)
             JOIN idempotency_keys i ON i.account_id = k.account_id AND i.key = k.key",
            &[(&accounts, Type::UUID_ARRAY), (&names, Type::TEXT_ARRAY)],
        )
        .await?;
    let mut holders = vec![None; keys.len()];
    for row in &rows {
        let ord: i64 = row.try_get("ord")?;
        if let Some(slot) = usize::try_from(ord)
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| holders.get_mut(i))
        {
            *slot = Some(KeyHolder::from_row(row)?);
        }
    }
    Ok(holders)
}

/// Clears `keys` where they were stored before `expired_before`, so new submissions can take
/// them. Returns how many were cleared.
pub async fn release(
    client: &impl BatchClient,
    keys: &[(AccountId, &IdempotencyKey)],
    expired_before: OffsetDateTime,
) -> Result<u64, DbError> {
    if keys.is_empty() {
        return Ok(0);
    }
    let accounts: Vec<uuid::Uuid> = keys.iter().map(|(account, _)| account.0).collect();
    let names: Vec<&str> = keys.iter().map(|(_, key)| key.as_str()).collect();
    let rows = client
        .unnamed()
        .query_typed(
            "DELETE FROM idempotency_keys i
             USING unnest($1::uuid[], $2::text[]) AS k(account_id, key)
             WHERE i.account_id = k.account_id AND i.key = k.key AND i.created_at < $3
             RETURNING 1",
            &[
                (&accounts, Type::UUID_ARRAY),
                (&names, Type::TEXT_ARRAY),
                (&expired_before, Type::TIMESTAMPTZ),
            ],
        )
        .await?;
    Ok(rows.len() as u64)
}

/// Clears at most `limit` keys stored before `expired_before`, oldest first, skipping rows
/// another transaction holds. Returns how many were cleared.
pub async fn purge(
    client: &impl GenericClient,
    expired_before: OffsetDateTime,
    limit: i64,
) -> Result<u64, DbError> {
    let stmt = client
        .prepare_cached(
            "DELETE FROM idempotency_keys
             WHERE (account_id, key) IN (SELECT account_id, key FROM idempotency_keys
                                         WHERE created_at < $1 ORDER BY created_at LIMIT $2
                                         FOR UPDATE SKIP LOCKED)",
        )
        .await?;
    Ok(client.execute(&stmt, &[&expired_before, &limit]).await?)
}
