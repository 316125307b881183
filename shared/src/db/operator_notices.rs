//! The `operator_notices` table: the outbox of signed notices to `APP_OPERATOR_WEBHOOK_URL`
//! (contract 17). Notices are queued in the transaction that changes a URL's health and sent
//! by a dispatcher on the delivery schedule, claimed with a lease as deliveries are.

use std::time::Duration;

use time::OffsetDateTime;
use uuid::Uuid;

use super::{DbError, GenericClient};
use crate::{
    clock::format_millis,
    domain::{AccountId, OperatorEvent},
    endpoint_health::{Health, HealthSettings},
};

/// A claimed notice.
#[derive(Debug, Clone)]
pub struct Notice {
    /// Its id (`webhook-id`).
    pub id: Uuid,
    /// The exact bytes to send.
    pub body: Vec<u8>,
    /// This attempt's number, from 1.
    pub attempt: i32,
}

/// What a notice is about: an account's URL and its health as saved.
#[derive(Debug, Clone, Copy)]
pub struct About<'a> {
    /// The account.
    pub account: AccountId,
    /// Its URL.
    pub url: &'a str,
    /// The URL's health.
    pub health: &'a Health,
}

/// The signed body of a notice of `event` about `about`, made now.
pub fn body(about: About<'_>, event: OperatorEvent, settings: &HealthSettings) -> Vec<u8> {
    let health = about.health;
    let body = serde_json::json!({
        "event": event.as_str(),
        "account_id": about.account.0,
        "url": about.url,
        "state": health.state.as_str(),
        "disabled_reason": health.disabled_reason.map(|r| r.as_str()),
        "failing_since": health.failing_since.map(format_millis),
        "disable_at": health.disable_at(settings).map(format_millis),
        "last_failure": health.last_failure.as_ref().map(|f| serde_json::json!({
            "at": format_millis(f.at),
            "status_code": f.status_code,
            "error": f.error,
        })),
        "at": format_millis(crate::clock::now()),
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

/// Queues a notice of `event` about `about`.
pub async fn insert(
    client: &impl GenericClient,
    about: About<'_>,
    event: OperatorEvent,
    settings: &HealthSettings,
) -> Result<(), DbError> {
    let stmt = client
        .prepare_cached(
            "INSERT INTO operator_notices (id, account_id, event, body) VALUES ($1, $2, $3, $4)",
        )
        .await?;
    client
        .execute(
            &stmt,
            &[
                &Uuid::now_v7(),
                &about.account.0,
                &event.as_str(),
                &body(about, event, settings),
            ],
        )
        .await?;
    Ok(())
}

/// Claims up to `limit` due notices for `lease`, counting their attempt.
pub async fn claim_due(
    client: &impl GenericClient,
    limit: i64,
    lease: Duration,
) -> Result<Vec<Notice>, DbError> {
    let stmt = client
        .prepare_cached(
            "WITH due AS ( \
                 SELECT id FROM operator_notices \
                 WHERE state = 'pending' AND next_attempt_at <= now() \
                 ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED) \
             UPDATE operator_notices n SET attempts = n.attempts + 1, \
                    next_attempt_at = now() + make_interval(secs => $2) \
             FROM due WHERE n.id = due.id \
             RETURNING n.id, n.body, n.attempts",
        )
        .await?;
    Ok(client
        .query(&stmt, &[&limit, &lease.as_secs_f64()])
        .await?
        .iter()
        .map(|r| Notice {
            id: r.get("id"),
            body: r.get("body"),
            attempt: r.get("attempts"),
        })
        .collect())
}

/// Records how a notice's attempt ended: delivered, due again at `retry_at`, or (neither)
/// abandoned.
pub async fn record(
    client: &impl GenericClient,
    notice: &Notice,
    delivered: bool,
    retry_at: Option<OffsetDateTime>,
) -> Result<(), DbError> {
    let stmt = client
        .prepare_cached(
            "UPDATE operator_notices SET \
                    state = CASE WHEN $3 THEN 'delivered' \
                                 WHEN $4::timestamptz IS NULL THEN 'abandoned' \
                                 ELSE 'pending' END, \
                    next_attempt_at = CASE WHEN $3 THEN NULL ELSE $4 END, \
                    finished_at = CASE WHEN $3 OR $4::timestamptz IS NULL THEN now() END \
             WHERE id = $1 AND attempts = $2 AND state = 'pending'",
        )
        .await?;
    client
        .execute(&stmt, &[&notice.id, &notice.attempt, &delivered, &retry_at])
        .await?;
    Ok(())
}

/// Drops the pending notices (no operator URL is set, so they have nowhere to go); returns
/// how many.
pub async fn drop_pending(client: &impl GenericClient) -> Result<u64, DbError> {
    let stmt = client
        .prepare_cached("DELETE FROM operator_notices WHERE state = 'pending'")
        .await?;
    Ok(client.execute(&stmt, &[]).await?)
}
