//! `POST /api/v1/registry/check`: signals for one user's identifiers, from other members'
//! entries. The answer never names a member, an entry or a case.

use actix_web::{web, HttpResponse};
use moderation_shared::{
    clock,
    db::registry_entries,
    registry::{normalise::NORMALISATION_VERSION, quota, signals},
    telemetry,
};
use serde::{Deserialize, Serialize};

use super::IdentifierBody;
use crate::{auth::Principal, error::ApiError, state::AppState};

/// Identifiers per check.
const MAX_IDENTIFIERS: usize = 5;

/// Why the client checks.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Context {
    Signup,
    Login,
    Periodic,
}

impl Context {
    fn as_str(self) -> &'static str {
        match self {
            Context::Signup => "signup",
            Context::Login => "login",
            Context::Periodic => "periodic",
        }
    }
}

/// The request body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckBody {
    identifiers: Vec<IdentifierBody>,
    context: Context,
}

/// The response body.
#[derive(Debug, Serialize)]
struct CheckResponse {
    #[serde(rename = "match")]
    matched: bool,
    signals: Vec<signals::Signal>,
    normalisation_version: u32,
}

/// Validates, counts the call against the daily quota, and answers the signals.
pub(super) async fn check(
    state: web::Data<AppState>,
    principal: Principal,
    body: web::Json<CheckBody>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let count = body.identifiers.len();
    if !(1..=MAX_IDENTIFIERS).contains(&count) {
        return Err(ApiError::InvalidRequest(format!(
            "identifiers must hold 1 to {MAX_IDENTIFIERS} items, got {count}"
        )));
    }
    let identifiers = body
        .identifiers
        .iter()
        .enumerate()
        .map(|(i, identifier)| {
            let hash = identifier.hash(&format!("identifiers[{i}]"))?;
            Ok(state.registry_key.identify(&hash))
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    let now = clock::now();
    // The quota count and the lookup are independent: run them together and drop the
    // lookup's answer when the quota is used up.
    let lookup = async {
        let client = state.pool.get().await.map_err(ApiError::unavailable)?;
        Ok::<_, ApiError>(
            registry_entries::find_matches(&client, principal.account_id, &identifiers, now)
                .await?,
        )
    };
    let (used, matches) = futures_util::join!(
        quota::count_check(&state.redis, principal.account_id, now),
        lookup
    );
    let used = used.map_err(ApiError::unavailable)?;
    if used > u64::from(principal.check_quota_daily) {
        return Err(ApiError::QuotaExceeded {
            message: format!(
                "the daily registry check quota of {} calls is used up; it resets at midnight UTC",
                principal.check_quota_daily
            ),
            retry_after: quota::seconds_until_reset(now),
        });
    }
    let matches = matches?;
    let signals = signals::signals(&matches);
    let outcome = if signals.is_empty() {
        "no_match"
    } else {
        "match"
    };
    metrics::counter!(telemetry::REGISTRY_CHECKS_TOTAL, "context" => body.context.as_str(), "outcome" => outcome)
        .increment(1);
    Ok(HttpResponse::Ok().json(CheckResponse {
        matched: !signals.is_empty(),
        signals,
        normalisation_version: NORMALISATION_VERSION,
    }))
}
