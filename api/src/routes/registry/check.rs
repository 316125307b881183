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
use utoipa::ToSchema;

use super::IdentifierBody;
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// Identifiers per check.
const MAX_IDENTIFIERS: usize = 5;

/// Why the client checks.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Context {
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
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckBody {
    /// 1 to 5 identifiers of one user.
    #[schema(min_items = 1, max_items = 5)]
    identifiers: Vec<IdentifierBody>,
    /// Why the client checks.
    context: Context,
}

/// The response body: never an entry id, a case reference or anything naming a member.
#[derive(Debug, Serialize, ToSchema)]
pub struct CheckResponse {
    /// True exactly when `signals` is not empty.
    #[serde(rename = "match")]
    matched: bool,
    /// One per category, in the order `payment_fraud`, `prohibited_content`, `ban_evasion`.
    signals: Vec<signals::Signal>,
    /// The email normalisation version the hashes must follow.
    normalisation_version: u32,
}

/// Validates, counts the call against the daily quota, and answers the signals.
#[utoipa::path(post, path = "/api/v1/registry/check", operation_id = "check_registry", tag = "registry", request_body = CheckBody,
    responses(
        (status = 200, description = "Signals from other members' entries.",
         body = CheckResponse),
        (status = 400, description = "A malformed body, identifier count or hash.",
         body = ErrorBody),
        (status = 429, description = "The daily check quota (`QUOTA_EXCEEDED`) or the rate \
         limit (`RATE_LIMITED`) is used up; see `retry-after`.", body = ErrorBody),
    ))]
pub(crate) async fn check(
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
        let client = state.pool.get().await?;
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
