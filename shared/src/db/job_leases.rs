//! Leases on `processing` jobs: the holder renews its lease while it works, and a job whose
//! lease ran out (its worker is gone, and Redis may have lost its queue entry with it) is
//! rescued: put back to `queued`, or ended when it has had all its tries.
//!
//! A lease is kept in the job's row of `open_jobs`, not in `jobs`, so a renewal writes nothing
//! to `jobs` and its other updates stay HOT (V021). A claim ([`super::jobs::claim_many`])
//! writes the first lease; [`renew`] extends it; [`take_expired`] finds and locks the expired
//! ones for the rescuer.

use std::time::Duration;

use tokio_postgres::{types::Type, GenericClient as _};

use super::{BatchClient, DbError};
use crate::domain::{ClaimToken, JobId, Modality};

/// Extends to `lease` from now the lease of each job of `held` that its token still holds.
/// Returns how many were extended (a job rescued or taken over meanwhile is not).
pub async fn renew(
    client: &impl BatchClient,
    held: &[(JobId, ClaimToken)],
    lease: Duration,
) -> Result<u64, DbError> {
    let ids: Vec<uuid::Uuid> = held.iter().map(|(id, _)| id.0).collect();
    let tokens: Vec<uuid::Uuid> = held.iter().map(|(_, token)| token.0).collect();
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    Ok(client
        .unnamed()
        .execute_typed(
            "UPDATE open_jobs SET locked_until = now() + $3 * interval '1 millisecond'
             FROM unnest($1::uuid[], $2::uuid[]) AS h(id, token)
             WHERE open_jobs.job_id = h.id AND open_jobs.claim_token = h.token
               AND open_jobs.status = 'processing'",
            &[
                (&ids, Type::UUID_ARRAY),
                (&tokens, Type::UUID_ARRAY),
                (&lease_ms, Type::INT8),
            ],
        )
        .await?)
}

/// Expired jobs locked for rescue: see [`take_expired`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expired {
    /// Put back to `queued` (never enqueued, so the relay enqueues them at once), their lost
    /// try counted.
    pub requeued: Vec<JobId>,
    /// Out of tries and left as they are, locked: the caller ends them in the same
    /// transaction.
    pub exhausted: Vec<JobId>,
}

/// Takes up to `limit` `processing` jobs of `modality` whose lease has run out, skipping any
/// another rescuer has locked. Each try a worker took counted when it claimed; a job with
/// fewer than `max_tries` goes back to `queued` (stage `queued`, no claimant, never enqueued),
/// the others are answered as exhausted. Run it in a transaction: the exhausted jobs stay
/// locked until it ends (their rows of `jobs` and of `open_jobs`, which every statement that
/// waits for both locks in that order: a finish, a claim, a requeue).
pub async fn take_expired(
    client: &impl BatchClient,
    modality: Modality,
    limit: i64,
    max_tries: i32,
) -> Result<Expired, DbError> {
    let rows = client
        .unnamed()
        .query_typed(
            "SELECT o.job_id AS id, j.attempts FROM open_jobs o JOIN jobs j ON j.id = o.job_id
             WHERE o.status = 'processing' AND o.type = $1 AND o.locked_until < now()
             ORDER BY o.locked_until
             LIMIT $2
             FOR UPDATE OF j, o SKIP LOCKED",
            &[(&modality.as_str(), Type::TEXT), (&limit, Type::INT8)],
        )
        .await?;
    let mut expired = Expired::default();
    for row in &rows {
        let id = JobId(row.get("id"));
        if row.get::<_, i32>("attempts") < max_tries {
            expired.requeued.push(id);
        } else {
            expired.exhausted.push(id);
        }
    }
    if !expired.requeued.is_empty() {
        let ids: Vec<uuid::Uuid> = expired.requeued.iter().map(|id| id.0).collect();
        client
            .unnamed()
            .execute_typed(
                "WITH requeued AS (
                     UPDATE jobs SET status = 'queued', stage = 'queued', claim_token = NULL,
                                     updated_at = now()
                     WHERE id = ANY($1))
                 UPDATE open_jobs SET status = 'queued', enqueued_at = NULL, claim_token = NULL,
                                      locked_until = NULL
                 WHERE job_id = ANY($1)",
                &[(&ids, Type::UUID_ARRAY)],
            )
            .await?;
    }
    Ok(expired)
}
