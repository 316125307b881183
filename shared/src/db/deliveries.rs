//! The `deliveries` and `delivery_attempts` tables: the webhook outbox.
//!
//! A row is claimed by moving its `next_attempt_at` to the end of a lease (`FOR UPDATE SKIP
//! LOCKED`, so several dispatchers can run); a dispatcher that dies simply lets the lease run
//! out and the row becomes due again. Claiming counts the attempt; the caller gives the
//! attempt limit (the length of its schedule).
//!
//! Three lanes feed a dispatcher ([`Lane`]): the schedule of new deliveries, resends the
//! account asked for (a lease on `resend_at`), and the fresh schedules of a recover, which the
//! dispatcher serves with part of its slots so a recover of 100 000 deliveries never delays
//! anyone else's. The account's reads and requests are in [`super::delivery_log`].

use std::time::Duration;

use time::OffsetDateTime;
use uuid::Uuid;

use tokio_postgres::{
    types::{ToSql, Type},
    GenericClient as _,
};

use super::{partition, BatchClient, DbError, GenericClient};
use crate::{
    clock,
    domain::{AccountId, DeliveryId, DeliveryState, JobId, WebhookEvent},
};

/// The channel new deliveries (and held ones released) are announced on.
pub const CHANNEL: &str = "deliveries";
/// The channel a recover is announced on.
pub const RECOVERIES_CHANNEL: &str = "delivery_recoveries";
/// The channel a resend is announced on (a wake-up names its lane, so a dispatcher asks only
/// the lanes that may have work).
pub const RESENDS_CHANNEL: &str = "delivery_resends";

/// A delivery to store.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    /// The delivery id (`delivery_id`, `webhook-id`).
    pub id: DeliveryId,
    /// What it tells.
    pub event: WebhookEvent,
    /// The job it is about (`None` for a ping).
    pub job_id: Option<JobId>,
    /// The account.
    pub account_id: AccountId,
    /// Where to send it.
    pub target_url: String,
    /// The exact bytes to send on every attempt.
    pub body: Vec<u8>,
    /// Whether the target is the account's URL (not a per-request `webhook_url`): only such
    /// deliveries are held while that URL is disabled or paused.
    pub to_account_url: bool,
}

/// The state and hold time of a delivery to insert: `held` when it goes to the account's URL,
/// that URL is disabled or paused, and it is not a ping (a test send goes out now).
const HELD_ON_INSERT: &str = "(d.to_account AND d.event <> 'ping' AND EXISTS ( \
         SELECT FROM webhook_endpoints e WHERE e.account_id = d.account_id \
           AND e.url = d.target_url AND e.state IN ('disabled', 'paused')))";

/// Stores deliveries and wakes the dispatchers when the transaction commits, in one
/// statement. Those to a disabled or paused account URL are stored `held`.
pub async fn insert_many(
    client: &impl BatchClient,
    deliveries: &[NewDelivery],
) -> Result<(), DbError> {
    if deliveries.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = deliveries.iter().map(|d| d.id.0).collect();
    let events: Vec<&str> = deliveries.iter().map(|d| d.event.as_str()).collect();
    let jobs: Vec<Option<Uuid>> = deliveries.iter().map(|d| d.job_id.map(|j| j.0)).collect();
    let accounts: Vec<Uuid> = deliveries.iter().map(|d| d.account_id.0).collect();
    let targets: Vec<&str> = deliveries.iter().map(|d| d.target_url.as_str()).collect();
    let bodies: Vec<&[u8]> = deliveries.iter().map(|d| d.body.as_slice()).collect();
    let to_account: Vec<bool> = deliveries.iter().map(|d| d.to_account_url).collect();
    super::insert_batch(
        client,
        &format!(
            "WITH new AS ( \
                     INSERT INTO deliveries (id, event, job_id, account_id, target_url, body, \
                                             to_account_url, state, held_at, scheduled_at, \
                                             next_attempt_at) \
                     SELECT id, event, job_id, account_id, target_url, body, to_account, \
                            CASE WHEN held THEN 'held' ELSE 'pending' END, \
                            CASE WHEN held THEN now() END, now(), \
                            CASE WHEN held THEN NULL ELSE now() END \
                     FROM (SELECT d.*, {HELD_ON_INSERT} AS held \
                           FROM unnest($1::uuid[], $7::text[], $2::uuid[], $3::uuid[], \
                                       $4::text[], $5::bytea[], $8::bool[]) \
                                AS d(id, event, job_id, account_id, target_url, body, \
                                     to_account)) d \
                     RETURNING state) \
                 SELECT pg_notify($6, '') \
                 WHERE EXISTS (SELECT FROM new WHERE state = 'pending')"
        ),
        &[
            (&ids, Type::UUID_ARRAY),
            (&jobs, Type::UUID_ARRAY),
            (&accounts, Type::UUID_ARRAY),
            (&targets, Type::TEXT_ARRAY),
            (&bodies, Type::BYTEA_ARRAY),
            (&CHANNEL, Type::TEXT),
            (&events, Type::TEXT_ARRAY),
            (&to_account, Type::BOOL_ARRAY),
        ],
    )
    .await?;
    Ok(())
}

/// Stores one delivery and wakes the dispatchers when the transaction commits; it is stored
/// `held` as [`insert_many`] says.
pub async fn insert(client: &impl GenericClient, delivery: &NewDelivery) -> Result<(), DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "WITH new AS ( \
                 INSERT INTO deliveries (id, event, job_id, account_id, target_url, body, \
                                         to_account_url, state, held_at, scheduled_at, \
                                         next_attempt_at) \
                 SELECT id, event, job_id, account_id, target_url, body, to_account, \
                        CASE WHEN held THEN 'held' ELSE 'pending' END, \
                        CASE WHEN held THEN now() END, now(), \
                        CASE WHEN held THEN NULL ELSE now() END \
                 FROM (SELECT d.*, {HELD_ON_INSERT} AS held \
                       FROM (VALUES ($1::uuid, $2::text, $3::uuid, $4::uuid, $5::text, \
                                     $6::bytea, $8::bool)) \
                            AS d(id, event, job_id, account_id, target_url, body, \
                                 to_account)) d \
                 RETURNING state) \
             SELECT pg_notify($7, '') FROM new WHERE state = 'pending'",
        ))
        .await?;
    client
        .execute(
            &stmt,
            &[
                &delivery.id.0,
                &delivery.event.as_str(),
                &delivery.job_id.map(|j| j.0),
                &delivery.account_id.0,
                &delivery.target_url,
                &delivery.body,
                &CHANNEL,
                &delivery.to_account_url,
            ],
        )
        .await?;
    Ok(())
}

/// Which of a dispatcher's queues an attempt comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// The 12-attempt schedule of a new delivery.
    Scheduled,
    /// The fresh schedule a recover started: served with part of the slots only, after the
    /// other lanes, so a large recover never delays other deliveries.
    Recovered,
    /// One extra attempt of a finished delivery, asked for by its account.
    Resend,
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
    /// This attempt's number in the delivery's log (resends and recovers continue it).
    pub attempt: i32,
    /// Its place in the current schedule, from 1 to the attempt limit (0 for a resend).
    pub position: i32,
    /// Where it came from.
    pub lane: Lane,
    /// When the schedule wanted it (for a resend, when it was asked for).
    pub scheduled_at: OffsetDateTime,
    /// Whether it goes to the account's URL, whose state it follows and feeds.
    pub to_account_url: bool,
    /// Whether it is a test send (`ping`): sent whatever the URL's state.
    pub ping: bool,
}

/// Claims up to `limit` due attempts of `lane` for `lease`. A scheduled delivery whose last
/// attempt (number `max_attempts`) was claimed and never recorded (its dispatcher died) is
/// abandoned instead.
pub async fn claim_due(
    client: &impl GenericClient,
    lane: Lane,
    limit: i64,
    lease: Duration,
    max_attempts: i32,
) -> Result<Vec<Claimed>, DbError> {
    // Each lane has its own partial index; the predicates must match it literally.
    let sql = match lane {
        Lane::Scheduled => claim_scheduled_sql("NOT recovered"),
        Lane::Recovered => claim_scheduled_sql("recovered"),
        Lane::Resend => "WITH due AS ( \
                 SELECT id, resend_at AS asked FROM deliveries \
                 WHERE resend_at IS NOT NULL AND resend_at <= now() \
                 ORDER BY resend_at LIMIT $1 FOR UPDATE SKIP LOCKED) \
             UPDATE deliveries d SET attempts = d.attempts + 1, updated_at = now(), \
                    resend_at = now() + make_interval(secs => $2) \
             FROM due WHERE d.id = due.id \
             RETURNING d.id, d.account_id, d.target_url, d.body, d.attempts, \
                       0 AS position, due.asked AS scheduled_at, d.to_account_url, \
                       d.event = 'ping' AS ping"
            .to_owned(),
    };
    let stmt = client.prepare_cached(&sql).await?;
    let lease = lease.as_secs_f64();
    let rows = match lane {
        Lane::Resend => client.query(&stmt, &[&limit, &lease]).await?,
        Lane::Scheduled | Lane::Recovered => {
            client
                .query(&stmt, &[&limit, &lease, &max_attempts])
                .await?
        }
    };
    Ok(rows
        .iter()
        .map(|r| Claimed {
            id: DeliveryId(r.get("id")),
            account_id: AccountId(r.get("account_id")),
            target_url: r.get("target_url"),
            body: r.get("body"),
            attempt: r.get("attempts"),
            position: r.get("position"),
            lane,
            scheduled_at: r.get("scheduled_at"),
            to_account_url: r.get("to_account_url"),
            ping: r.get("ping"),
        })
        .collect())
}

/// The claim of a scheduled lane (`recovered` or `NOT recovered`): due rows are taken, those
/// whose schedule is spent are abandoned, the others get their next attempt.
fn claim_scheduled_sql(lane: &str) -> String {
    format!(
        "WITH due AS ( \
             SELECT id, schedule_attempts >= $3 AS spent FROM deliveries \
             WHERE state = 'pending' AND {lane} AND next_attempt_at <= now() \
             ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED), \
         abandoned AS ( \
             UPDATE deliveries d SET state = 'abandoned', next_attempt_at = NULL, \
                    finished_at = now(), updated_at = now() \
             FROM due WHERE d.id = due.id AND due.spent) \
         UPDATE deliveries d SET attempts = d.attempts + 1, \
                schedule_attempts = d.schedule_attempts + 1, updated_at = now(), \
                next_attempt_at = now() + make_interval(secs => $2) \
         FROM due WHERE d.id = due.id AND NOT due.spent \
         RETURNING d.id, d.account_id, d.target_url, d.body, d.attempts, \
                   d.schedule_attempts AS position, d.scheduled_at, d.to_account_url, \
                   d.event = 'ping' AS ping"
    )
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
    /// A resend that was not acknowledged: the delivery keeps its state.
    Unchanged,
}

impl NextStep {
    /// The delivery's state after this step, if it changes.
    pub fn state(self) -> Option<DeliveryState> {
        match self {
            NextStep::Delivered => Some(DeliveryState::Delivered),
            NextStep::RetryAt(_) => Some(DeliveryState::Pending),
            NextStep::Abandoned => Some(DeliveryState::Abandoned),
            NextStep::Undeliverable => Some(DeliveryState::Undeliverable),
            NextStep::Unchanged => None,
        }
    }
}

/// How an attempt ended, and what follows it ([`record_attempts`]).
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    /// The delivery.
    pub id: DeliveryId,
    /// The attempt's number in the delivery's log (the claim's).
    pub attempt: i32,
    /// The lane it was claimed from.
    pub lane: Lane,
    /// When the schedule wanted it.
    pub scheduled_at: OffsetDateTime,
    /// The HTTP status, if a response came.
    pub status_code: Option<i32>,
    /// The transport error, if any.
    pub error: Option<String>,
    /// At most 2 KB of the response body.
    pub response_body: Option<String>,
    /// When it started.
    pub started_at: OffsetDateTime,
    /// How long it took.
    pub duration: Duration,
    /// What follows it.
    pub next: NextStep,
}

/// Records attempts of several deliveries and what follows each, in one statement: a
/// scheduled (or recovered) attempt sets its delivery's state, next due time and last status;
/// a resend ends its lease and, when acknowledged, marks the delivery delivered (otherwise the
/// delivery keeps its state). A delivery another dispatcher took over meanwhile (its attempt
/// count moved on, or it is no longer pending or resent) is left alone. Every attempt gets its
/// row in the log. Returns, per record in order, whether its delivery was still its
/// dispatcher's.
///
/// The dispatcher batches the records of attempts to per-request URLs across the attempts
/// ending together; one to the account's URL is a batch of one, in the transaction that
/// updates the URL's health. One record apiece used to be two statements, the update planned
/// anew every time through the partitioned table (a third of Postgres's statement time per
/// job at saturation, `scripts/bench capacity`); here the statement is planned once per batch,
/// for its own batch and partition.
pub async fn record_attempts(
    client: &impl BatchClient,
    entries: &[AttemptRecord],
) -> Result<Vec<bool>, DbError> {
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = entries.iter().map(|e| e.id.0).collect();
    let attempts: Vec<i32> = entries.iter().map(|e| e.attempt).collect();
    let resends: Vec<bool> = entries.iter().map(|e| e.lane == Lane::Resend).collect();
    let states: Vec<&str> = entries
        .iter()
        .map(|e| e.next.state().unwrap_or(DeliveryState::Pending).as_str())
        .collect();
    let next_at: Vec<Option<OffsetDateTime>> = entries
        .iter()
        .map(|e| match e.next {
            NextStep::RetryAt(at) => Some(at),
            _ => None,
        })
        .collect();
    let status_codes: Vec<Option<i32>> = entries.iter().map(|e| e.status_code).collect();
    let delivered: Vec<bool> = entries
        .iter()
        .map(|e| e.next == NextStep::Delivered)
        .collect();
    let scheduled_at: Vec<OffsetDateTime> = entries.iter().map(|e| e.scheduled_at).collect();
    let started_at: Vec<OffsetDateTime> = entries.iter().map(|e| e.started_at).collect();
    let durations: Vec<i32> = entries
        .iter()
        .map(|e| i32::try_from(e.duration.as_millis()).unwrap_or(i32::MAX))
        .collect();
    let errors: Vec<Option<&str>> = entries.iter().map(|e| e.error.as_deref()).collect();
    let bodies: Vec<Option<&str>> = entries.iter().map(|e| e.response_body.as_deref()).collect();
    let now = clock::now();
    let table = partition::table_of("deliveries", ids.iter().copied(), now);
    let log = partition::table_of("delivery_attempts", ids.iter().copied(), now);
    let params: [(&(dyn ToSql + Sync), Type); 12] = [
        (&ids, Type::UUID_ARRAY),
        (&attempts, Type::INT4_ARRAY),
        (&resends, Type::BOOL_ARRAY),
        (&states, Type::TEXT_ARRAY),
        (&next_at, Type::TIMESTAMPTZ_ARRAY),
        (&status_codes, Type::INT4_ARRAY),
        (&delivered, Type::BOOL_ARRAY),
        (&scheduled_at, Type::TIMESTAMPTZ_ARRAY),
        (&started_at, Type::TIMESTAMPTZ_ARRAY),
        (&durations, Type::INT4_ARRAY),
        (&errors, Type::TEXT_ARRAY),
        (&bodies, Type::TEXT_ARRAY),
    ];
    // The ids again as an array let Postgres plan only the partitions holding them when the
    // table is the parent.
    let rows = client
        .unnamed()
        .query_typed(
            &format!(
                "WITH r AS ( \
                     SELECT * FROM unnest($1::uuid[], $2::int4[], $3::bool[], $4::text[], \
                                          $5::timestamptz[], $6::int4[], $7::bool[]) \
                          WITH ORDINALITY AS r(id, attempt, resend, state, next_at, \
                                               status_code, delivered, ord)), \
                 scheduled AS ( \
                     UPDATE \"{table}\" AS d SET state = r.state, next_attempt_at = r.next_at, \
                            scheduled_at = coalesce(r.next_at, d.scheduled_at), \
                            updated_at = now(), last_status_code = r.status_code, \
                            finished_at = CASE WHEN r.state = 'pending' THEN NULL ELSE now() END \
                     FROM r WHERE NOT r.resend AND d.id = r.id AND d.id = ANY($1) \
                       AND d.attempts = r.attempt AND d.state = 'pending' \
                     RETURNING r.ord), \
                 resent AS ( \
                     UPDATE \"{table}\" AS d SET resend_at = NULL, updated_at = now(), \
                            last_status_code = r.status_code, \
                            state = CASE WHEN r.delivered THEN 'delivered' ELSE d.state END, \
                            finished_at = CASE WHEN r.delivered THEN now() \
                                               ELSE d.finished_at END \
                     FROM r WHERE r.resend AND d.id = r.id AND d.id = ANY($1) \
                       AND d.attempts = r.attempt AND d.resend_at IS NOT NULL \
                     RETURNING r.ord), \
                 logged AS ( \
                     INSERT INTO \"{log}\" (delivery_id, attempt, scheduled_at, started_at, \
                                            duration_ms, status_code, error, response_body) \
                     SELECT * FROM unnest($1::uuid[], $2::int4[], $8::timestamptz[], \
                                          $9::timestamptz[], $10::int4[], $6::int4[], \
                                          $11::text[], $12::text[]) \
                     ON CONFLICT DO NOTHING) \
                 SELECT ord FROM scheduled UNION ALL SELECT ord FROM resent"
            ),
            &params,
        )
        .await?;
    let mut ours = vec![false; entries.len()];
    for row in rows {
        let ord: i64 = row.get("ord");
        if let Some(slot) = usize::try_from(ord - 1).ok().and_then(|i| ours.get_mut(i)) {
            *slot = true;
        }
    }
    Ok(ours)
}

/// When each lane's next attempt falls due, if it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextDue {
    /// The scheduled lane's.
    pub scheduled: Option<OffsetDateTime>,
    /// The resends'.
    pub resend: Option<OffsetDateTime>,
    /// The recovered lane's.
    pub recovered: Option<OffsetDateTime>,
}

impl NextDue {
    /// The earliest of the scheduled lane and resends, and of the recovered lane when
    /// `recovered` (a dispatcher whose recovery slots are all busy leaves it out).
    pub fn earliest(&self, recovered: bool) -> Option<OffsetDateTime> {
        let lanes = [
            self.scheduled,
            self.resend,
            self.recovered.filter(|_| recovered),
        ];
        lanes.into_iter().flatten().min()
    }
}

/// When each lane's next attempt falls due.
pub async fn next_due(client: &impl GenericClient) -> Result<NextDue, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT (SELECT min(next_attempt_at) FROM deliveries \
                     WHERE state = 'pending' AND NOT recovered), \
                    (SELECT min(resend_at) FROM deliveries WHERE resend_at IS NOT NULL), \
                    (SELECT min(next_attempt_at) FROM deliveries \
                     WHERE state = 'pending' AND recovered)",
        )
        .await?;
    let row = client.query_one(&stmt, &[]).await?;
    Ok(NextDue {
        scheduled: row.get(0),
        resend: row.get(1),
        recovered: row.get(2),
    })
}

/// Applies up to `batch` deliveries of the oldest recover not yet applied: each `abandoned`
/// delivery of its window starts a fresh schedule in the recovered lane. Several dispatchers
/// may run it at once; run it in a transaction. Returns how many deliveries it restarted.
pub async fn apply_recoveries(client: &impl GenericClient, batch: i64) -> Result<u64, DbError> {
    let open = client
        .prepare_cached(
            "SELECT id, account_id, since, until, requested_at FROM delivery_recoveries \
             WHERE applied_at IS NULL ORDER BY requested_at LIMIT 1 FOR UPDATE SKIP LOCKED",
        )
        .await?;
    let Some(recovery) = client.query_opt(&open, &[]).await? else {
        return Ok(0);
    };
    let restart = client
        .prepare_cached(
            "WITH chosen AS ( \
                 SELECT id FROM deliveries \
                 WHERE account_id = $1 AND state = 'abandoned' \
                   AND created_at >= $2 AND created_at < $3 AND finished_at <= $4 \
                 LIMIT $5 FOR UPDATE) \
             UPDATE deliveries d SET state = 'pending', recovered = true, schedule_attempts = 0, \
                    scheduled_at = now(), next_attempt_at = now(), finished_at = NULL, \
                    resend_at = NULL, updated_at = now() \
             FROM chosen WHERE d.id = chosen.id",
        )
        .await?;
    let account: Uuid = recovery.get("account_id");
    let since: OffsetDateTime = recovery.get("since");
    let until: OffsetDateTime = recovery.get("until");
    let requested: OffsetDateTime = recovery.get("requested_at");
    let restarted = client
        .execute(&restart, &[&account, &since, &until, &requested, &batch])
        .await?;
    if restarted < u64::try_from(batch).unwrap_or(u64::MAX) {
        let done = client
            .prepare_cached("UPDATE delivery_recoveries SET applied_at = now() WHERE id = $1")
            .await?;
        let id: Uuid = recovery.get("id");
        client.execute(&done, &[&id]).await?;
    }
    Ok(restarted)
}

/// Holds a claimed scheduled attempt instead of making it (its account URL is disabled or
/// paused): the claim is undone and the delivery waits `held`. Returns whether the row was
/// still ours.
pub async fn hold_claimed(client: &impl GenericClient, claimed: &Claimed) -> Result<bool, DbError> {
    let stmt = client
        .prepare_cached(
            "UPDATE deliveries SET state = 'held', held_at = now(), next_attempt_at = NULL, \
                    attempts = attempts - 1, schedule_attempts = schedule_attempts - 1, \
                    updated_at = now() \
             WHERE id = $1 AND attempts = $2 AND state = 'pending'",
        )
        .await?;
    Ok(client
        .execute(&stmt, &[&claimed.id.0, &claimed.attempt])
        .await?
        == 1)
}

/// Holds every pending delivery of `account` to its URL `url` (it was just disabled or
/// paused); returns how many. An attempt under way at the time ends as its own.
pub async fn hold_pending(
    client: &impl GenericClient,
    account: AccountId,
    url: &str,
) -> Result<u64, DbError> {
    let stmt = client
        .prepare_cached(
            "UPDATE deliveries SET state = 'held', held_at = now(), next_attempt_at = NULL, \
                    updated_at = now() \
             WHERE account_id = $1 AND state = 'pending' AND to_account_url AND target_url = $2 \
               AND event <> 'ping'",
        )
        .await?;
    Ok(client.execute(&stmt, &[&account.0, &url]).await?)
}

/// Sends the held deliveries of `account` again, oldest first (each due a microsecond after
/// the one before, which is the order they are claimed in), each with a fresh schedule;
/// wakes the dispatchers when the transaction commits. Returns how many.
pub async fn release_held(client: &impl GenericClient, account: AccountId) -> Result<u64, DbError> {
    let stmt = client
        .prepare_cached(
            "WITH held AS ( \
                 SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM deliveries \
                 WHERE account_id = $1 AND state = 'held'), \
             released AS ( \
                 UPDATE deliveries d SET state = 'pending', held_at = NULL, recovered = false, \
                        schedule_attempts = 0, resend_at = NULL, updated_at = now(), \
                        scheduled_at = now() + (held.n - 1) * interval '1 microsecond', \
                        next_attempt_at = now() + (held.n - 1) * interval '1 microsecond' \
                 FROM held WHERE d.id = held.id AND d.state = 'held' RETURNING 1) \
             SELECT count(*), pg_notify($2, '') FROM released",
        )
        .await?;
    let count: i64 = client
        .query_one(&stmt, &[&account.0, &CHANNEL])
        .await?
        .get(0);
    Ok(u64::try_from(count).unwrap_or(0))
}

/// Abandons the held deliveries of `account` (enabled with `replay: none`); returns how many.
pub async fn abandon_held(client: &impl GenericClient, account: AccountId) -> Result<u64, DbError> {
    let stmt = client
        .prepare_cached(
            "UPDATE deliveries SET state = 'abandoned', held_at = NULL, finished_at = now(), \
                    updated_at = now() \
             WHERE account_id = $1 AND state = 'held'",
        )
        .await?;
    Ok(client.execute(&stmt, &[&account.0]).await?)
}

/// Abandons up to `batch` deliveries held longer than `hold`; returns how many.
pub async fn abandon_expired_held(
    client: &impl GenericClient,
    hold: Duration,
    batch: i64,
) -> Result<u64, DbError> {
    let stmt = client
        .prepare_cached(
            "WITH expired AS ( \
                 SELECT id FROM deliveries \
                 WHERE state = 'held' AND held_at <= now() - make_interval(secs => $1) \
                 ORDER BY held_at LIMIT $2 FOR UPDATE SKIP LOCKED) \
             UPDATE deliveries d SET state = 'abandoned', held_at = NULL, finished_at = now(), \
                    updated_at = now() \
             FROM expired WHERE d.id = expired.id",
        )
        .await?;
    Ok(client
        .execute(&stmt, &[&hold.as_secs_f64(), &batch])
        .await?)
}

/// How many deliveries of `account` are held.
pub async fn held_count(client: &impl GenericClient, account: AccountId) -> Result<i64, DbError> {
    let stmt = client
        .prepare_cached("SELECT count(*) FROM deliveries WHERE account_id = $1 AND state = 'held'")
        .await?;
    Ok(client.query_one(&stmt, &[&account.0]).await?.get(0))
}
