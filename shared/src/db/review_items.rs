//! The `review_items` table (contract 14): one per review of a job, made with the job's
//! result (its policy's band, the sample) or with an appeal.
//!
//! A claim holds an item for [`CLAIM_LEASE`]; once that has passed the item is pending again,
//! with no sweeper: every read here shows a claim past its expiry as `pending`, and a claim
//! may take it. Claims take the oldest open item, appeals first, with `FOR UPDATE SKIP
//! LOCKED`, so concurrent reviewers never get the same item.

use std::time::Duration;

use time::OffsetDateTime;
use tokio_postgres::{types::Type, Row};
use uuid::Uuid;

use super::{audit_events::Actor, BatchClient, DbError, GenericClient};
use crate::domain::{
    AccountId, ActorType, AppealId, JobId, ReviewItemId, ReviewItemState, ReviewReason,
};

/// How long a claim holds an item.
pub const CLAIM_LEASE: Duration = Duration::from_secs(600);

/// A review item as reads show it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewItem {
    /// Its id.
    pub id: ReviewItemId,
    /// The job under review.
    pub job_id: JobId,
    /// The job's type.
    pub job_type: String,
    /// Why it is reviewed.
    pub reasons: Vec<ReviewReason>,
    /// The appeal it decides, if it is one.
    pub appeal_id: Option<AppealId>,
    /// Its state (a claim past its expiry is `pending`).
    pub state: ReviewItemState,
    /// Who holds it, while claimed.
    pub claimed_by: Option<(ActorType, Uuid)>,
    /// When the claim ends, while claimed.
    pub claim_expires_at: Option<OffsetDateTime>,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it was decided.
    pub decided_at: Option<OffsetDateTime>,
}

/// The columns of a [`ReviewItem`], with a claim past its expiry read as pending.
const COLUMNS: &str = "i.id, i.job_id, i.job_type, i.reasons, i.appeal_id, i.created_at, \
     i.decided_at, \
     CASE WHEN i.state = 'claimed' AND i.claim_expires_at <= now() THEN 'pending' \
          ELSE i.state END AS state, \
     CASE WHEN i.state = 'claimed' AND i.claim_expires_at > now() THEN i.claimed_by_type END \
          AS claimed_by_type, \
     CASE WHEN i.state = 'claimed' AND i.claim_expires_at > now() THEN i.claimed_by END \
          AS claimed_by, \
     CASE WHEN i.state = 'claimed' AND i.claim_expires_at > now() THEN i.claim_expires_at END \
          AS claim_expires_at";

impl ReviewItem {
    fn from_row(row: &Row) -> Result<Self, DbError> {
        let reasons: Vec<String> = row.try_get("reasons")?;
        let reasons = reasons
            .iter()
            .map(|r| {
                r.parse().map_err(|_| DbError::UnknownValue {
                    column: "reasons",
                    value: r.clone(),
                })
            })
            .collect::<Result<_, _>>()?;
        let claimed_by = match (
            super::parse_optional_word::<ActorType>(row, "claimed_by_type")?,
            row.try_get::<_, Option<Uuid>>("claimed_by")?,
        ) {
            (Some(kind), Some(id)) => Some((kind, id)),
            _ => None,
        };
        Ok(Self {
            id: ReviewItemId(row.try_get("id")?),
            job_id: JobId(row.try_get("job_id")?),
            job_type: row.try_get("job_type")?,
            reasons,
            appeal_id: row.try_get::<_, Option<Uuid>>("appeal_id")?.map(AppealId),
            state: super::parse_word(row, "state")?,
            claimed_by,
            claim_expires_at: row.try_get("claim_expires_at")?,
            created_at: row.try_get("created_at")?,
            decided_at: row.try_get("decided_at")?,
        })
    }

    /// Whether `reviewer` holds it now.
    pub fn is_claimed_by(&self, reviewer: Actor) -> bool {
        self.state == ReviewItemState::Claimed
            && self.claimed_by == Some((reviewer.kind(), reviewer.id().unwrap_or_default()))
    }
}

/// An item to make.
#[derive(Debug, Clone)]
pub struct NewItem {
    /// Its id.
    pub id: ReviewItemId,
    /// The job.
    pub job_id: JobId,
    /// Its account.
    pub account_id: AccountId,
    /// The job's type.
    pub job_type: String,
    /// Why.
    pub reasons: Vec<ReviewReason>,
    /// The appeal, for an appeal's item.
    pub appeal_id: Option<AppealId>,
}

/// Stores items; run it in the transaction that completes their jobs or records their appeal.
pub async fn insert_many(client: &impl BatchClient, items: &[NewItem]) -> Result<(), DbError> {
    if items.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = items.iter().map(|i| i.id.0).collect();
    let jobs: Vec<Uuid> = items.iter().map(|i| i.job_id.0).collect();
    let accounts: Vec<Uuid> = items.iter().map(|i| i.account_id.0).collect();
    let types: Vec<&str> = items.iter().map(|i| i.job_type.as_str()).collect();
    // One text per item: the reasons joined, split again in SQL (arrays of arrays must be
    // rectangular).
    let reasons: Vec<String> = items
        .iter()
        .map(|i| {
            i.reasons
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    let appeals: Vec<Option<Uuid>> = items.iter().map(|i| i.appeal_id.map(|a| a.0)).collect();
    super::insert_batch(
        client,
        "INSERT INTO review_items (id, job_id, account_id, job_type, reasons, appeal_id) \
             SELECT id, job_id, account_id, job_type, string_to_array(reasons, ','), appeal_id \
             FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], \
                         $6::uuid[]) AS i(id, job_id, account_id, job_type, reasons, appeal_id)",
        &[
            (&ids, Type::UUID_ARRAY),
            (&jobs, Type::UUID_ARRAY),
            (&accounts, Type::UUID_ARRAY),
            (&types, Type::TEXT_ARRAY),
            (&reasons, Type::TEXT_ARRAY),
            (&appeals, Type::UUID_ARRAY),
        ],
    )
    .await?;
    Ok(())
}

/// Stores one item (an appeal's); run it in the transaction that records the appeal.
pub async fn insert(client: &impl GenericClient, item: &NewItem) -> Result<(), DbError> {
    let reasons: Vec<&str> = item.reasons.iter().map(|r| r.as_str()).collect();
    let stmt = client
        .prepare_cached(
            "INSERT INTO review_items (id, job_id, account_id, job_type, reasons, appeal_id) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .await?;
    client
        .execute(
            &stmt,
            &[
                &item.id.0,
                &item.job_id.0,
                &item.account_id.0,
                &item.job_type,
                &reasons,
                &item.appeal_id.map(|a| a.0),
            ],
        )
        .await?;
    Ok(())
}

/// The review queue of an account.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Open items nobody holds.
    pub pending: i64,
    /// Items held by a reviewer.
    pub claimed: i64,
    /// When the oldest pending item was made.
    pub oldest_pending_at: Option<OffsetDateTime>,
    /// Open items by reason (an item with two reasons counts in both).
    pub band: i64,
    /// See `band`.
    pub sample: i64,
    /// See `band`.
    pub appeal: i64,
}

/// The open items of `account` (of jobs with ids from `floor` on), counted.
pub async fn queue(
    client: &impl GenericClient,
    account: AccountId,
    floor: Uuid,
) -> Result<QueueCounts, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT count(*) FILTER (WHERE NOT held) AS pending, \
                    count(*) FILTER (WHERE held) AS claimed, \
                    min(created_at) FILTER (WHERE NOT held) AS oldest, \
                    count(*) FILTER (WHERE 'band' = ANY(reasons)) AS band, \
                    count(*) FILTER (WHERE 'sample' = ANY(reasons)) AS sample, \
                    count(*) FILTER (WHERE 'appeal' = ANY(reasons)) AS appeal \
             FROM (SELECT created_at, reasons, \
                          state = 'claimed' AND claim_expires_at > now() AS held \
                   FROM review_items \
                   WHERE account_id = $1 AND state <> 'decided' AND job_id >= $2) open",
        )
        .await?;
    let row = client.query_one(&stmt, &[&account.0, &floor]).await?;
    Ok(QueueCounts {
        pending: row.get("pending"),
        claimed: row.get("claimed"),
        oldest_pending_at: row.get("oldest"),
        band: row.get("band"),
        sample: row.get("sample"),
        appeal: row.get("appeal"),
    })
}

/// Open items across every account, for the metrics: pending, claimed, and the oldest pending
/// item's creation.
pub async fn totals(
    client: &impl GenericClient,
) -> Result<(i64, i64, Option<OffsetDateTime>), DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT count(*) FILTER (WHERE NOT held), count(*) FILTER (WHERE held), \
                    min(created_at) FILTER (WHERE NOT held) \
             FROM (SELECT created_at, state = 'claimed' AND claim_expires_at > now() AS held \
                   FROM review_items WHERE state <> 'decided') open",
        )
        .await?;
    let row = client.query_one(&stmt, &[]).await?;
    Ok((row.get(0), row.get(1), row.get(2)))
}

/// One item of `account`, unless its job is below `floor` (past retention).
pub async fn get(
    client: &impl GenericClient,
    account: AccountId,
    id: ReviewItemId,
    floor: Uuid,
) -> Result<Option<ReviewItem>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM review_items i \
             WHERE i.account_id = $1 AND i.id = $2 AND i.job_id >= $3"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&account.0, &id.0, &floor])
        .await?
        .as_ref()
        .map(ReviewItem::from_row)
        .transpose()
}

/// One item of `account` (of a job from `floor` on), locked until the transaction ends.
pub async fn lock(
    client: &impl GenericClient,
    account: AccountId,
    id: ReviewItemId,
    floor: Uuid,
) -> Result<Option<ReviewItem>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM review_items i \
             WHERE i.account_id = $1 AND i.id = $2 AND i.job_id >= $3 FOR UPDATE"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&account.0, &id.0, &floor])
        .await?
        .as_ref()
        .map(ReviewItem::from_row)
        .transpose()
}

/// Items of `account` (of jobs from `floor` on) in `state` (any when `None`), oldest first,
/// after item `after`.
pub async fn page(
    client: &impl GenericClient,
    account: AccountId,
    state: Option<ReviewItemState>,
    after: Option<ReviewItemId>,
    limit: i64,
    floor: Uuid,
) -> Result<Vec<ReviewItem>, DbError> {
    let after = after.map_or(Uuid::nil(), |a| a.0);
    // The stored state narrows the scan; the effective one (an expired claim is pending)
    // decides.
    let stored: Vec<&str> = match state {
        None => vec!["pending", "claimed", "decided"],
        Some(ReviewItemState::Decided) => vec!["decided"],
        Some(_) => vec!["pending", "claimed"],
    };
    let wanted = state.map(ReviewItemState::as_str);
    let stmt = client
        .prepare_cached(&format!(
            "SELECT * FROM (SELECT {COLUMNS} FROM review_items i \
                            WHERE i.account_id = $1 AND i.state = ANY($2) AND i.id > $3 \
                              AND i.job_id >= $6) items \
             WHERE $4::text IS NULL OR state = $4 ORDER BY id LIMIT $5"
        ))
        .await?;
    client
        .query(
            &stmt,
            &[&account.0, &stored, &after, &wanted, &limit, &floor],
        )
        .await?
        .iter()
        .map(ReviewItem::from_row)
        .collect()
}

/// A claim's filter on an item `c`: not an appeal of a job the reviewer (`$2`) decided before.
const NOT_OWN_APPEAL: &str = "(c.appeal_id IS NULL OR NOT EXISTS ( \
                                  SELECT 1 FROM job_decisions d \
                                  WHERE d.reviewer_id = $2 AND d.job_id = c.job_id))";

/// Claims the oldest open item of `account` (of a job from `floor` on) for `reviewer`
/// (appeals first), never an appeal of a job `reviewer` has decided before; `None` when there
/// is none. Open items are the pending ones and those whose claim ran out: the first of each
/// kind is read from its own index (`review_items_pending_idx`, `review_items_expiring_idx`)
/// and locked, and the earlier of the two in queue order is claimed, so a claim reads a row or
/// two whatever number of items other reviewers hold.
pub async fn claim(
    client: &impl GenericClient,
    account: AccountId,
    reviewer: Actor,
    floor: Uuid,
) -> Result<Option<ReviewItem>, DbError> {
    let lease = CLAIM_LEASE.as_secs_f64();
    let stmt = client
        .prepare_cached(&format!(
            "WITH pending AS ( \
                 SELECT c.job_id, c.id, (c.appeal_id IS NULL) AS later FROM review_items c \
                 WHERE c.account_id = $1 AND c.state = 'pending' AND c.job_id >= $5 \
                   AND {NOT_OWN_APPEAL} \
                 ORDER BY (c.appeal_id IS NULL), c.id \
                 LIMIT 1 FOR UPDATE SKIP LOCKED), \
             expired AS ( \
                 SELECT c.job_id, c.id, (c.appeal_id IS NULL) AS later FROM review_items c \
                 WHERE c.account_id = $1 AND c.state = 'claimed' \
                   AND c.claim_expires_at <= now() AND c.job_id >= $5 \
                   AND {NOT_OWN_APPEAL} \
                 ORDER BY (c.appeal_id IS NULL), c.id \
                 LIMIT 1 FOR UPDATE SKIP LOCKED), \
             next AS ( \
                 SELECT job_id, id FROM (SELECT * FROM pending UNION ALL SELECT * FROM expired) c \
                 ORDER BY later, id LIMIT 1) \
             UPDATE review_items i SET state = 'claimed', claimed_by_type = $3, \
                    claimed_by = $2, claim_expires_at = now() + make_interval(secs => $4) \
             FROM next WHERE i.job_id = next.job_id AND i.id = next.id \
             RETURNING {COLUMNS}"
        ))
        .await?;
    client
        .query_opt(
            &stmt,
            &[
                &account.0,
                &reviewer.id(),
                &reviewer.kind().as_str(),
                &lease,
                &floor,
            ],
        )
        .await?
        .as_ref()
        .map(ReviewItem::from_row)
        .transpose()
}

/// Puts `item` back to pending; run it on an item the caller locked and holds.
pub async fn release(client: &impl GenericClient, item: &ReviewItem) -> Result<(), DbError> {
    let stmt = client
        .prepare_cached(
            "UPDATE review_items SET state = 'pending', claimed_by_type = NULL, \
                    claimed_by = NULL, claim_expires_at = NULL \
             WHERE job_id = $1 AND id = $2",
        )
        .await?;
    client.execute(&stmt, &[&item.job_id.0, &item.id.0]).await?;
    Ok(())
}

/// Marks `item` decided; run it on an item the caller locked.
pub async fn mark_decided(client: &impl GenericClient, item: &ReviewItem) -> Result<(), DbError> {
    let stmt = client
        .prepare_cached(
            "UPDATE review_items SET state = 'decided', decided_at = now(), \
                    claimed_by_type = NULL, claimed_by = NULL, claim_expires_at = NULL \
             WHERE job_id = $1 AND id = $2",
        )
        .await?;
    client.execute(&stmt, &[&item.job_id.0, &item.id.0]).await?;
    Ok(())
}

/// Whether `job` has an open item.
pub async fn job_has_open(client: &impl GenericClient, job: JobId) -> Result<bool, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM review_items WHERE job_id = $1 AND state <> 'decided')",
        )
        .await?;
    Ok(client.query_one(&stmt, &[&job.0]).await?.get(0))
}
