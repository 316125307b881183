//! The account's view of its webhook deliveries (contract 11): the log, one delivery with its
//! attempts, and the requests the api records for the dispatcher (a resend, a recover). The
//! api never sends: it writes the request and wakes the dispatchers, so a request survives a
//! dispatcher restart.

use time::OffsetDateTime;
use tokio_postgres::{types::ToSql, Row};
use uuid::Uuid;

use super::{
    deliveries::{RECOVERIES_CHANNEL, RESENDS_CHANNEL},
    DbError, GenericClient,
};
use crate::domain::{AccountId, DeliveryId, DeliveryState, JobId, WebhookEvent};

/// The columns of a [`Delivery`]. The next attempt is the schedule's while pending, else a
/// resend's (asked for, or under way until its lease ends).
const COLUMNS: &str = "id, event, job_id, target_url, state, attempts, last_status_code, \
                       created_at, \
                       finished_at, \
                       CASE WHEN state = 'pending' THEN scheduled_at ELSE resend_at END \
                           AS next_attempt_at";

/// One delivery as the account sees it.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Its id (`delivery_id`, `webhook-id`).
    pub id: DeliveryId,
    /// What it tells.
    pub event: WebhookEvent,
    /// Its job (`None` for a ping).
    pub job_id: Option<JobId>,
    /// Where it goes.
    pub url: String,
    /// Where it stands.
    pub state: DeliveryState,
    /// Attempts made or under way, resends and recovered schedules included.
    pub attempts: i32,
    /// When the next attempt is due, if one is.
    pub next_attempt_at: Option<OffsetDateTime>,
    /// The status code of the latest attempt, if it got a response.
    pub last_status_code: Option<i32>,
    /// When its job completed.
    pub created_at: OffsetDateTime,
    /// When it was delivered, abandoned or found undeliverable.
    pub finished_at: Option<OffsetDateTime>,
}

impl Delivery {
    fn from_row(row: &Row) -> Result<Self, DbError> {
        Ok(Self {
            id: DeliveryId(row.get("id")),
            event: super::parse_word(row, "event")?,
            job_id: row.get::<_, Option<uuid::Uuid>>("job_id").map(JobId),
            url: row.get("target_url"),
            state: super::parse_word(row, "state")?,
            attempts: row.get("attempts"),
            next_attempt_at: row.get("next_attempt_at"),
            last_status_code: row.get("last_status_code"),
            created_at: row.get("created_at"),
            finished_at: row.get("finished_at"),
        })
    }
}

/// One attempt of a delivery, as it ended.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// Its number in the log, from 1.
    pub attempt: i32,
    /// When the schedule wanted it (for a resend, when it was asked for).
    pub scheduled_at: OffsetDateTime,
    /// When its request started.
    pub started_at: OffsetDateTime,
    /// How long it took.
    pub duration_ms: i32,
    /// The response's status, if one came.
    pub status_code: Option<i32>,
    /// The transport error, if any.
    pub error: Option<String>,
    /// At most 2 KB of the response body.
    pub response_excerpt: Option<String>,
}

/// What the log is filtered by.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only deliveries with ids from this on (the retention floor).
    pub floor: Uuid,
    /// Only this job's delivery.
    pub job_id: Option<JobId>,
    /// Only these states (every state when empty).
    pub states: Vec<DeliveryState>,
    /// Only deliveries created at or after this.
    pub since: Option<OffsetDateTime>,
}

/// A position in the log: the last (`created_at`, id) of the previous page.
pub type Position = (OffsetDateTime, DeliveryId);

/// Deliveries of `account` matching `filter`, newest first, after `after`, at most `limit`.
///
/// Every page is read from an index in order: a job's delivery by its unique `job_id`, the
/// whole log by `deliveries_account_idx`, and each asked state by
/// `deliveries_account_state_idx`, one branch per state merged by the final sort (an `ANY`
/// over states would sort all of them). [`plan`] shows it.
pub async fn list(
    client: &impl GenericClient,
    account: AccountId,
    filter: &Filter,
    after: Option<Position>,
    limit: i64,
) -> Result<Vec<Delivery>, DbError> {
    let page = Page::new(account, filter, after, limit);
    let stmt = client.prepare_cached(&page.sql("")).await?;
    let rows = client.query(&stmt, &page.params()).await?;
    rows.iter().map(Delivery::from_row).collect()
}

/// The plan Postgres chooses for a page of [`list`], as `EXPLAIN` prints it: the tests and
/// the bench check that it reads indexes only.
pub async fn plan(
    client: &impl GenericClient,
    account: AccountId,
    filter: &Filter,
    after: Option<Position>,
    limit: i64,
) -> Result<String, DbError> {
    let page = Page::new(account, filter, after, limit);
    let rows = client.query(&page.sql("EXPLAIN "), &page.params()).await?;
    Ok(rows
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// The statement of one page and its parameters, which depend on the filters given.
struct Page {
    params: Vec<Box<dyn ToSql + Sync + Send>>,
    conditions: String,
    states: Vec<&'static str>,
}

impl Page {
    fn new(account: AccountId, filter: &Filter, after: Option<Position>, limit: i64) -> Self {
        let mut params: Vec<Box<dyn ToSql + Sync + Send>> =
            vec![Box::new(account.0), Box::new(limit)];
        let mut conditions = vec!["account_id = $1".to_owned()];
        // The ids bound what is read to the partitions that can hold it: never below the
        // retention floor, nor below a job's own time (its deliveries are made after it) or
        // a day before `since` (ids are made by the dispatcher's or worker's clock).
        let mut floor = filter.floor;
        if let Some(job) = filter.job_id {
            params.push(Box::new(job.0));
            conditions.push(format!("job_id = ${}", params.len()));
            floor = floor.max(crate::domain::id_floor(crate::domain::id_time(job.0)));
        }
        if let Some(since) = filter.since {
            params.push(Box::new(since));
            conditions.push(format!("created_at >= ${}", params.len()));
            floor = floor.max(crate::domain::id_floor(since - time::Duration::DAY));
        }
        params.push(Box::new(floor));
        conditions.push(format!("id >= ${}", params.len()));
        if let Some((at, id)) = after {
            params.push(Box::new(at));
            params.push(Box::new(id.0));
            conditions.push(format!(
                "(created_at, id) < (${}, ${})",
                params.len() - 1,
                params.len()
            ));
        }
        Self {
            params,
            conditions: conditions.join(" AND "),
            states: filter.states.iter().map(|s| s.as_str()).collect(),
        }
    }

    fn sql(&self, prefix: &str) -> String {
        let conditions = &self.conditions;
        let order = "ORDER BY created_at DESC, id DESC LIMIT $2";
        if self.states.is_empty() {
            return format!("{prefix}SELECT {COLUMNS} FROM deliveries WHERE {conditions} {order}");
        }
        let branches: Vec<String> = self
            .states
            .iter()
            .map(|state| {
                format!(
                    "(SELECT {COLUMNS} FROM deliveries \
                      WHERE {conditions} AND state = '{state}' {order})"
                )
            })
            .collect();
        format!(
            "{prefix}SELECT * FROM ({}) AS page {order}",
            branches.join(" UNION ALL ")
        )
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.params
            .iter()
            .map(|p| p.as_ref() as &(dyn ToSql + Sync))
            .collect()
    }
}

/// One delivery of `account`, unless its id is below `floor` (past retention).
pub async fn get(
    client: &impl GenericClient,
    account: AccountId,
    id: DeliveryId,
    floor: Uuid,
) -> Result<Option<Delivery>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM deliveries WHERE id = $1 AND account_id = $2 AND id >= $3"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&id.0, &account.0, &floor])
        .await?
        .as_ref()
        .map(Delivery::from_row)
        .transpose()
}

/// Every attempt of a delivery, in order.
pub async fn attempts(
    client: &impl GenericClient,
    id: DeliveryId,
) -> Result<Vec<Attempt>, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT attempt, scheduled_at, started_at, duration_ms, status_code, error, \
                    response_body FROM delivery_attempts WHERE delivery_id = $1 ORDER BY attempt",
        )
        .await?;
    Ok(client
        .query(&stmt, &[&id.0])
        .await?
        .iter()
        .map(|r| Attempt {
            attempt: r.get("attempt"),
            scheduled_at: r.get("scheduled_at"),
            started_at: r.get("started_at"),
            duration_ms: r.get("duration_ms"),
            status_code: r.get("status_code"),
            error: r.get("error"),
            response_excerpt: r.get("response_body"),
        })
        .collect())
}

/// What [`request_resend`] found.
#[derive(Debug, Clone)]
pub enum Resend {
    /// Asked for (or joined to one already asked for and not yet recorded); the delivery as
    /// it now stands.
    Requested(Delivery),
    /// The delivery is still `pending` (its schedule runs) or `held`.
    StillPending,
    /// No such delivery of the account.
    NotFound,
}

/// Asks the dispatchers for one more attempt of a finished delivery (with an id from `floor`
/// on), now, and wakes them.
pub async fn request_resend(
    client: &impl GenericClient,
    account: AccountId,
    id: DeliveryId,
    floor: Uuid,
) -> Result<Resend, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "WITH asked AS ( \
                 UPDATE deliveries SET resend_at = coalesce(resend_at, now()), updated_at = now() \
                 WHERE id = $1 AND account_id = $2 AND state NOT IN ('pending', 'held') \
                   AND id >= $4 \
                 RETURNING {COLUMNS}), \
             woken AS (SELECT pg_notify($3, '') WHERE EXISTS (SELECT FROM asked)) \
             SELECT *, (SELECT count(*) FROM woken) AS woken FROM asked"
        ))
        .await?;
    if let Some(row) = client
        .query_opt(&stmt, &[&id.0, &account.0, &RESENDS_CHANNEL, &floor])
        .await?
    {
        return Ok(Resend::Requested(Delivery::from_row(&row)?));
    }
    Ok(match get(client, account, id, floor).await? {
        Some(_) => Resend::StillPending,
        None => Resend::NotFound,
    })
}

/// Records a recover of every `abandoned` delivery of `account` created in
/// [`since`, `until`), for the dispatchers to apply, and wakes them. Returns how many
/// deliveries it covers (counted from the account's state index, so it answers at once
/// whatever the count).
pub async fn request_recover(
    client: &impl GenericClient,
    account: AccountId,
    since: OffsetDateTime,
    until: OffsetDateTime,
) -> Result<i64, DbError> {
    let stmt = client
        .prepare_cached(
            "WITH covered AS ( \
                 SELECT count(*) AS n FROM deliveries \
                 WHERE account_id = $2 AND state = 'abandoned' \
                   AND created_at >= $3 AND created_at < $4), \
             recorded AS ( \
                 INSERT INTO delivery_recoveries (id, account_id, since, until, count) \
                 SELECT $1, $2, $3, $4, n FROM covered WHERE n > 0 RETURNING count), \
             woken AS (SELECT pg_notify($5, '') WHERE EXISTS (SELECT FROM recorded)) \
             SELECT n, (SELECT count(*) FROM woken) AS woken FROM covered",
        )
        .await?;
    let row = client
        .query_one(
            &stmt,
            &[
                &Uuid::new_v4(),
                &account.0,
                &since,
                &until,
                &RECOVERIES_CHANNEL,
            ],
        )
        .await?;
    Ok(row.get("n"))
}
