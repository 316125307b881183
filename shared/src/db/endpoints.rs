//! The health columns of `webhook_endpoints` (contract 17): load a URL's [`Health`], and save a
//! change with what goes with it: the audit event (`webhook.endpoint_state`), the deliveries
//! held or released, and the operator's notices.

use time::OffsetDateTime;
use tokio_postgres::Row;

use super::{
    audit_events::{self, Actor, Target},
    deliveries, operator_notices, parse_optional_word, parse_word, DbError, GenericClient,
};
use crate::{
    domain::{AccountId, AuditAction, DeliveryId, EndpointState, OperatorEvent, WebhookEvent},
    endpoint_health::{Health, HealthSettings, LastFailure},
};

const COLUMNS: &str = "account_id, url, updated_at, state, disabled_reason, failing_since, \
                       failures_since, last_success_at, last_failure_at, \
                       last_failure_status_code, last_failure_error, failing_noticed_at, \
                       warned_at";

/// An account's URL with its health.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The account.
    pub account_id: AccountId,
    /// The URL.
    pub url: String,
    /// When the URL was set.
    pub updated_at: OffsetDateTime,
    /// Its health.
    pub health: Health,
}

impl Endpoint {
    fn from_row(row: &Row) -> Result<Self, DbError> {
        let last_failure = row
            .get::<_, Option<OffsetDateTime>>("last_failure_at")
            .map(|at| LastFailure {
                at,
                status_code: row.get("last_failure_status_code"),
                error: row
                    .get::<_, Option<String>>("last_failure_error")
                    .unwrap_or_default(),
            });
        Ok(Self {
            account_id: AccountId(row.get("account_id")),
            url: row.get("url"),
            updated_at: row.get("updated_at"),
            health: Health {
                state: parse_word(row, "state")?,
                disabled_reason: parse_optional_word(row, "disabled_reason")?,
                failing_since: row.get("failing_since"),
                failures_since: row.get("failures_since"),
                last_success_at: row.get("last_success_at"),
                last_failure,
                failing_noticed_at: row.get("failing_noticed_at"),
                warned_at: row.get("warned_at"),
            },
        })
    }
}

/// The account's URL and its health, if a URL is set.
pub async fn get(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Option<Endpoint>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM webhook_endpoints WHERE account_id = $1"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&account.0])
        .await?
        .as_ref()
        .map(Endpoint::from_row)
        .transpose()
}

/// As [`get`], locking the row until the transaction ends (every change of health takes it).
pub async fn lock(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Option<Endpoint>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM webhook_endpoints WHERE account_id = $1 FOR UPDATE"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&account.0])
        .await?
        .as_ref()
        .map(Endpoint::from_row)
        .transpose()
}

/// Up to `limit` `failing` URLs, locked (skipping those locked elsewhere), whose automatic
/// disable or warning may be due at `now`.
pub async fn lock_failing_due(
    client: &impl GenericClient,
    settings: &HealthSettings,
    now: OffsetDateTime,
    limit: i64,
) -> Result<Vec<Endpoint>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM webhook_endpoints \
             WHERE state = 'failing' AND failing_since <= $1 \
             ORDER BY failing_since LIMIT $2 FOR UPDATE SKIP LOCKED"
        ))
        .await?;
    // The warning is the earlier of the two: due from `disable_after - warn_before` on.
    let lead = settings.disable_after.saturating_sub(settings.warn_before);
    let rows = client.query(&stmt, &[&(now - lead), &limit]).await?;
    let endpoints: Result<Vec<Endpoint>, DbError> = rows.iter().map(Endpoint::from_row).collect();
    Ok(endpoints?
        .into_iter()
        .filter(|e| e.health.disable_due(now, settings) || e.health.warning_due(now, settings))
        .collect())
}

/// How many URLs are in each state (states with none left out).
pub async fn count_by_state(client: &impl GenericClient) -> Result<Vec<(String, i64)>, DbError> {
    let stmt = client
        .prepare_cached("SELECT state, count(*) FROM webhook_endpoints GROUP BY state")
        .await?;
    Ok(client
        .query(&stmt, &[])
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect())
}

/// A change of a URL's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// The state before.
    pub from: EndpointState,
    /// The state after.
    pub to: EndpointState,
}

/// Saves `after` as the health of `endpoint` (locked by [`lock`]), and with it: a change of
/// state is audited (`webhook.endpoint_state`, by `actor`), entering `disabled` or `paused`
/// holds the pending deliveries to the URL, and each of `events` is queued for the operator.
/// Returns the change of state, if any. Run it in the transaction that locked the row.
pub async fn save(
    client: &impl GenericClient,
    endpoint: &Endpoint,
    after: &Health,
    actor: Actor,
    events: &[OperatorEvent],
    settings: &HealthSettings,
) -> Result<Option<Change>, DbError> {
    let stmt = client
        .prepare_cached(
            "UPDATE webhook_endpoints SET state = $2, disabled_reason = $3, failing_since = $4, \
                    failures_since = $5, last_success_at = $6, last_failure_at = $7, \
                    last_failure_status_code = $8, last_failure_error = $9, \
                    failing_noticed_at = $10, warned_at = $11 \
             WHERE account_id = $1",
        )
        .await?;
    let failure = after.last_failure.as_ref();
    client
        .execute(
            &stmt,
            &[
                &endpoint.account_id.0,
                &after.state.as_str(),
                &after.disabled_reason.map(|r| r.as_str()),
                &after.failing_since,
                &after.failures_since,
                &after.last_success_at,
                &failure.map(|f| f.at),
                &failure.and_then(|f| f.status_code),
                &failure.map(|f| f.error.as_str()),
                &after.failing_noticed_at,
                &after.warned_at,
            ],
        )
        .await?;
    let about = operator_notices::About {
        account: endpoint.account_id,
        url: &endpoint.url,
        health: after,
    };
    for event in events {
        operator_notices::insert(client, about, *event, settings).await?;
    }
    let from = endpoint.health.state;
    if from == after.state {
        return Ok(None);
    }
    if after.state.holds() {
        deliveries::hold_pending(client, endpoint.account_id, &endpoint.url).await?;
    }
    audit_events::record(
        client,
        endpoint.account_id,
        actor,
        AuditAction::WebhookEndpointState,
        &Target::whole("webhook_url"),
        serde_json::json!({
            "url": endpoint.url,
            "from": from.as_str(),
            "to": after.state.as_str(),
            "disabled_reason": after.disabled_reason.map(|r| r.as_str()),
        }),
    )
    .await?;
    Ok(Some(Change {
        from,
        to: after.state,
    }))
}

/// What an account asks of its URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Hold deliveries until resumed (from `active` or `failing`).
    Pause,
    /// Back to `active` from `paused`, sending the held deliveries.
    Resume,
    /// Disable it (`manual`), from any other state.
    Disable,
    /// Back to `active` from `disabled`; the held deliveries are sent when `replay`, else
    /// abandoned.
    Enable {
        /// Send the held deliveries (`"replay": "held"`), or abandon them (`"none"`).
        replay: bool,
    },
}

/// Why a [`Request`] was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The account has no URL.
    #[error("no webhook URL is registered")]
    NoUrl,
    /// The URL's state does not allow it.
    #[error("{0}")]
    Conflict(String),
}

/// Carries out `request` on the account's URL by `actor`: the change is saved, audited and
/// noticed as [`save`] does, and held deliveries are sent (oldest first) or abandoned. Run it
/// in a transaction. Returns the URL as it now stands and the change of state.
pub async fn request(
    client: &impl GenericClient,
    account: AccountId,
    actor: Actor,
    request: Request,
    settings: &HealthSettings,
) -> Result<Result<(Endpoint, Option<Change>), Refused>, DbError> {
    let Some(endpoint) = lock(client, account).await? else {
        return Ok(Err(Refused::NoUrl));
    };
    let state = endpoint.health.state;
    let refuse = |why: &str| Ok(Err(Refused::Conflict(format!("the URL is {state}: {why}"))));
    let mut after = endpoint.health.clone();
    let events = match (request, state) {
        (Request::Pause, EndpointState::Active | EndpointState::Failing) => {
            after.pause();
            Vec::new()
        }
        (Request::Pause, _) => return refuse("only an active or failing URL can be paused"),
        (Request::Resume, EndpointState::Paused) => {
            after.activate();
            vec![OperatorEvent::EndpointEnabled]
        }
        (Request::Resume, _) => return refuse("only a paused URL can be resumed"),
        (Request::Disable, EndpointState::Disabled) => return refuse("it is disabled already"),
        (Request::Disable, _) => {
            after.disable(crate::domain::DisabledReason::Manual);
            vec![OperatorEvent::EndpointDisabled]
        }
        (Request::Enable { .. }, EndpointState::Disabled) => {
            after.activate();
            vec![OperatorEvent::EndpointEnabled]
        }
        (Request::Enable { .. }, EndpointState::Paused) => return refuse("resume it instead"),
        (Request::Enable { .. }, _) => return refuse("only a disabled URL can be enabled"),
    };
    let change = save(client, &endpoint, &after, actor, &events, settings).await?;
    match request {
        Request::Resume | Request::Enable { replay: true } => {
            deliveries::release_held(client, account).await?;
        }
        Request::Enable { replay: false } => {
            deliveries::abandon_held(client, account).await?;
        }
        Request::Pause | Request::Disable => {}
    }
    Ok(Ok((
        Endpoint {
            health: after,
            ..endpoint
        },
        change,
    )))
}

/// Queues a signed test send (`ping`) to the account's URL now, whatever its state; `None`
/// when the account has no URL.
pub async fn send_test(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Option<DeliveryId>, DbError> {
    let Some(endpoint) = get(client, account).await? else {
        return Ok(None);
    };
    let id = DeliveryId::new();
    let delivery = deliveries::NewDelivery {
        id,
        event: WebhookEvent::Ping,
        job_id: None,
        account_id: account,
        target_url: endpoint.url,
        body: crate::webhook_body::ping_body(id, crate::clock::now()),
        to_account_url: true,
    };
    deliveries::insert(client, &delivery).await?;
    Ok(Some(id))
}
