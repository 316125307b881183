//! The `deliveries` and `delivery_attempts` tables: the webhook outbox.
//!
//! A row is claimed by moving its `next_attempt_at` to the end of a lease (`FOR UPDATE SKIP
//! LOCKED`, so several dispatchers can run); a dispatcher that dies simply lets the lease run
//! out and the row becomes due again. Claiming counts the attempt; the caller gives the
//! attempt limit (the length of its schedule).

use std::time::Duration;

use time::OffsetDateTime;
use uuid::Uuid;

use tokio_postgres::types::Type;

use super::{BatchClient, DbError, GenericClient};
use crate::domain::{AccountId, DeliveryId, DeliveryState, JobId};

/// The channel a new delivery is announced on.
pub const CHANNEL: &str = "deliveries";

/// A delivery to store when its job completes.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    /// The delivery id (`delivery_id`, `webhook-id`).
    pub id: DeliveryId,
    /// The job.
    pub job_id: JobId,
    /// The account.
    pub account_id: AccountId,
    /// Where to send it.
    pub target_url: String,
    /// The exact bytes to send on every attempt.
    pub body: Vec<u8>,
}

/// Stores deliveries (one per job: a delivery for a job that has one already is skipped) and
/// wakes the dispatchers when the transaction commits, in one statement.
pub async fn insert_many(
    client: &impl BatchClient,
    deliveries: &[NewDelivery],
) -> Result<(), DbError> {
    if deliveries.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = deliveries.iter().map(|d| d.id.0).collect();
    let jobs: Vec<Uuid> = deliveries.iter().map(|d| d.job_id.0).collect();
    let accounts: Vec<Uuid> = deliveries.iter().map(|d| d.account_id.0).collect();
    let targets: Vec<&str> = deliveries.iter().map(|d| d.target_url.as_str()).collect();
    let bodies: Vec<&[u8]> = deliveries.iter().map(|d| d.body.as_slice()).collect();
    client
        .query_typed(
            "WITH new AS ( \
                 INSERT INTO deliveries (id, job_id, account_id, target_url, body, scheduled_at, \
                                         next_attempt_at) \
                 SELECT id, job_id, account_id, target_url, body, now(), now() \
                 FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::bytea[]) \
                      AS d(id, job_id, account_id, target_url, body) \
                 ON CONFLICT (job_id) DO NOTHING \
                 RETURNING 1) \
             SELECT pg_notify($6, '') WHERE EXISTS (SELECT FROM new)",
            &[
                (&ids, Type::UUID_ARRAY),
                (&jobs, Type::UUID_ARRAY),
                (&accounts, Type::UUID_ARRAY),
                (&targets, Type::TEXT_ARRAY),
                (&bodies, Type::BYTEA_ARRAY),
                (&CHANNEL, Type::TEXT),
            ],
        )
        .await?;
    Ok(())
}

/// A claimed attempt.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The delivery id.
    pub id: DeliveryId,
    /// The account (for its signing secrets).
    pub account_id: AccountId,
    /// The target.
    pub target_url: String,
    /// The body.
    pub body: Vec<u8>,
    /// This attempt's number, from 1 to the attempt limit.
    pub attempt: i32,
    /// When the schedule wanted it.
    pub scheduled_at: OffsetDateTime,
}

/// Claims up to `limit` due deliveries that have had fewer than `max_attempts` attempts, for
/// `lease`.
pub async fn claim_due(
    client: &impl GenericClient,
    limit: i64,
    lease: Duration,
    max_attempts: i32,
) -> Result<Vec<Claimed>, DbError> {
    let stmt = client
        .prepare_cached(
            "WITH due AS ( \
                 SELECT id FROM deliveries \
                 WHERE state = 'pending' AND next_attempt_at <= now() AND attempts < $3 \
                 ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED) \
             UPDATE deliveries d SET attempts = d.attempts + 1, updated_at = now(), \
                    next_attempt_at = now() + make_interval(secs => $2) \
             FROM due WHERE d.id = due.id \
             RETURNING d.id, d.account_id, d.target_url, d.body, d.attempts, d.scheduled_at",
        )
        .await?;
    let rows = client
        .query(&stmt, &[&limit, &lease.as_secs_f64(), &max_attempts])
        .await?;
    Ok(rows
        .iter()
        .map(|r| Claimed {
            id: DeliveryId(r.get("id")),
            account_id: AccountId(r.get("account_id")),
            target_url: r.get("target_url"),
            body: r.get("body"),
            attempt: r.get("attempts"),
            scheduled_at: r.get("scheduled_at"),
        })
        .collect())
}

/// Abandons deliveries whose last attempt (number `max_attempts`) was claimed and never
/// recorded (its dispatcher died). Returns how many.
pub async fn abandon_stale_last_attempts(
    client: &impl GenericClient,
    max_attempts: i32,
) -> Result<u64, DbError> {
    let stmt = client
        .prepare_cached(
            "UPDATE deliveries SET state = 'abandoned', next_attempt_at = NULL, \
                    finished_at = now(), updated_at = now() \
             WHERE state = 'pending' AND attempts >= $1 AND next_attempt_at <= now()",
        )
        .await?;
    Ok(client.execute(&stmt, &[&max_attempts]).await?)
}

/// How an attempt ended.
#[derive(Debug, Clone)]
pub struct AttemptRecord<'a> {
    /// The HTTP status, if a response came.
    pub status_code: Option<i32>,
    /// The transport error, if any.
    pub error: Option<&'a str>,
    /// At most 2 KB of the response body.
    pub response_body: Option<&'a str>,
    /// When it started.
    pub started_at: OffsetDateTime,
    /// How long it took.
    pub duration: Duration,
}

/// What follows an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// Acknowledged.
    Delivered,
    /// Try again at this time.
    RetryAt(OffsetDateTime),
    /// The last attempt failed.
    Abandoned,
    /// The target can never be delivered to (malformed, not https, not public).
    Undeliverable,
}

impl NextStep {
    /// The delivery's state after this step.
    pub fn state(self) -> DeliveryState {
        match self {
            NextStep::Delivered => DeliveryState::Delivered,
            NextStep::RetryAt(_) => DeliveryState::Pending,
            NextStep::Abandoned => DeliveryState::Abandoned,
            NextStep::Undeliverable => DeliveryState::Undeliverable,
        }
    }
}

/// Records an attempt and what follows it, unless another dispatcher took the row over
/// meanwhile. Run it in a transaction. Returns whether the row was still ours.
pub async fn record_attempt(
    client: &impl GenericClient,
    claimed: &Claimed,
    record: &AttemptRecord<'_>,
    next: NextStep,
) -> Result<bool, DbError> {
    let (next_at, scheduled_at) = match next {
        NextStep::RetryAt(at) => (Some(at), Some(at)),
        NextStep::Delivered | NextStep::Abandoned | NextStep::Undeliverable => (None, None),
    };
    let update = client
        .prepare_cached(
            "UPDATE deliveries SET state = $3, next_attempt_at = $4, \
                    scheduled_at = coalesce($5, scheduled_at), updated_at = now(), \
                    finished_at = CASE WHEN $3 = 'pending' THEN NULL ELSE now() END \
             WHERE id = $1 AND attempts = $2 AND state = 'pending'",
        )
        .await?;
    let ours = client
        .execute(
            &update,
            &[
                &claimed.id.0,
                &claimed.attempt,
                &next.state().as_str(),
                &next_at,
                &scheduled_at,
            ],
        )
        .await?
        == 1;
    let insert = client
        .prepare_cached(
            "INSERT INTO delivery_attempts (delivery_id, attempt, scheduled_at, started_at, \
                                            duration_ms, status_code, error, response_body) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING",
        )
        .await?;
    let duration_ms = i32::try_from(record.duration.as_millis()).unwrap_or(i32::MAX);
    client
        .execute(
            &insert,
            &[
                &claimed.id.0,
                &claimed.attempt,
                &claimed.scheduled_at,
                &record.started_at,
                &duration_ms,
                &record.status_code,
                &record.error,
                &record.response_body,
            ],
        )
        .await?;
    Ok(ours)
}

/// When the next pending delivery falls due, if any.
pub async fn next_due_at(client: &impl GenericClient) -> Result<Option<OffsetDateTime>, DbError> {
    let stmt = client
        .prepare_cached("SELECT min(next_attempt_at) FROM deliveries WHERE state = 'pending'")
        .await?;
    Ok(client.query_one(&stmt, &[]).await?.get(0))
}
