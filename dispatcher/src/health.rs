//! The dispatcher's side of endpoint health (contract 17) beside the attempts: the sweep
//! (held deliveries abandoned after `APP_WEBHOOK_HOLD_S`, the automatic disable by time and
//! the warning a day before it), the `webhook_endpoints{state}` gauge, and sending the
//! operator's notices.

use std::time::Duration;

use moderation_shared::{
    clock,
    db::{
        audit_events::Actor,
        deliveries,
        endpoints::{self, Change},
        operator_notices, Pool,
    },
    domain::{AccountId, EndpointState},
    endpoint_health::HealthSettings,
    telemetry,
};

use crate::{
    deliver::{Outcome, Sender},
    schedule::Schedule,
    settings::OperatorWebhook,
};

/// Held deliveries abandoned per statement.
const EXPIRE_BATCH: i64 = 1000;
/// Failing URLs swept per transaction.
const SWEEP_BATCH: i64 = 100;
/// Notices claimed per step.
const NOTICE_BATCH: i64 = 50;

/// Counts a change of a URL's state and logs it.
pub(crate) fn count(account: AccountId, change: Change) {
    telemetry::count_endpoint_change(change.to);
    tracing::info!(account_id = %account.0, from = change.from.as_str(), to = change.to.as_str(), "Webhook URL state changed");
}

/// Abandons held deliveries past their hold, disables the failing URLs that are due (and
/// warns those a day from it), and publishes how many URLs are in each state.
pub(crate) async fn sweep(pool: &Pool, settings: &HealthSettings) -> anyhow::Result<()> {
    let mut client = pool.get().await?;
    while deliveries::abandon_expired_held(&client, settings.hold, EXPIRE_BATCH).await?
        == EXPIRE_BATCH.unsigned_abs()
    {}
    loop {
        // Taken before the transaction begins, so what it records is never earlier.
        let now = clock::now();
        let tx = client.transaction().await?;
        let due = endpoints::lock_failing_due(&tx, settings, now, SWEEP_BATCH).await?;
        let mut changes = Vec::new();
        for endpoint in &due {
            let mut after = endpoint.health.clone();
            let events = after.sweep(now, settings);
            if let Some(change) =
                endpoints::save(&tx, endpoint, &after, Actor::Operator, &events, settings).await?
            {
                changes.push((endpoint.account_id, change));
            }
        }
        tx.commit().await?;
        for (account, change) in changes {
            count(account, change);
        }
        if due.len() < SWEEP_BATCH.unsigned_abs() as usize {
            break;
        }
    }
    let counts = endpoints::count_by_state(&client).await?;
    for state in EndpointState::ALL {
        let n = counts
            .iter()
            .find(|(s, _)| s == state.as_str())
            .map_or(0, |(_, n)| *n);
        metrics::gauge!(telemetry::WEBHOOK_ENDPOINTS, "state" => state.as_str()).set(n as f64);
    }
    Ok(())
}

/// Where and how notices are sent.
pub(crate) struct Notifier<'a> {
    /// The operator's URL and secret; notices are dropped without them.
    pub operator: Option<&'a OperatorWebhook>,
    /// The sender attempts go through.
    pub sender: &'a Sender,
    /// The retry schedule.
    pub schedule: &'a Schedule,
    /// How long a claim lasts.
    pub lease: Duration,
}

/// Sends the due operator notices one after another (they are few), each on the delivery
/// schedule; without an operator URL they are dropped. Returns how many were attempted.
pub(crate) async fn send_notices(pool: &Pool, notifier: Notifier<'_>) -> anyhow::Result<usize> {
    let client = pool.get().await?;
    let Some(operator) = notifier.operator else {
        operator_notices::drop_pending(&client).await?;
        return Ok(0);
    };
    let notices = operator_notices::claim_due(&client, NOTICE_BATCH, notifier.lease).await?;
    let secrets = [operator.secret.expose().clone()];
    for notice in &notices {
        let started_at = clock::now();
        let (outcome, _) = notifier
            .sender
            .send(
                &operator.url,
                &notice.id.to_string(),
                &secrets,
                started_at.unix_timestamp(),
                &notice.body,
            )
            .await;
        let ended_at = clock::now();
        let (delivered, retry_at) = match &outcome {
            Outcome::Acknowledged { .. } => (true, None),
            Outcome::Undeliverable { .. } => (false, None),
            Outcome::Refused { .. } | Outcome::Failed { .. } => (
                false,
                notifier.schedule.next_after(notice.attempt, ended_at),
            ),
        };
        if !delivered {
            tracing::warn!(notice_id = %notice.id, attempt = notice.attempt, outcome = ?outcome, "Operator notice not delivered");
        }
        operator_notices::record(&client, notice, delivered, retry_at).await?;
    }
    Ok(notices.len())
}
