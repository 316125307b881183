//! Admission of an authenticated request: the failed-authentication lockout, the key lookup
//! and the account's rate limits, in that order.
//!
//! The lock of the source address is checked before any key lookup. A key this replica has
//! cached needs no lookup, so for it the lock check and both rate windows are one Redis round
//! trip. A cache miss costs a lock check, the lookup, then the rate limit. Every refused
//! credential (401) counts as a failure of the source address; a terminated account (403) does
//! not, since its key is genuine.

use std::{net::IpAddr, time::Duration};

use actix_web::{dev::ServiceRequest, http::header::HeaderName};
use moderation_shared::telemetry;

use super::principal::{key_hash, principal_of, Principal};
use crate::{
    client_ip::{client_ip, TrustedProxies},
    error::ApiError,
    limits::{seconds_ceil, Verdict, WindowState},
    state::AppState,
};

/// `X-Forwarded-For`, read only when the peer is a trusted proxy.
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// An admitted request.
#[derive(Debug)]
pub struct Admitted {
    /// Who is calling.
    pub principal: Principal,
    /// The tighter rate window after this request (none when Redis did not answer).
    pub window: Option<WindowState>,
}

/// A refused request.
#[derive(Debug)]
pub struct Refused {
    /// The answer.
    pub error: ApiError,
    /// The rate window to report, when the caller was authenticated.
    pub window: Option<WindowState>,
}

impl From<ApiError> for Refused {
    fn from(error: ApiError) -> Self {
        Self {
            error,
            window: None,
        }
    }
}

/// The source address of `req`: its peer, or the first untrusted `X-Forwarded-For` hop when
/// the peer is a trusted proxy.
pub fn source_of(req: &ServiceRequest, trusted: &TrustedProxies) -> IpAddr {
    let peer = req
        .peer_addr()
        .map_or(IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), |a| a.ip());
    if trusted.is_empty() {
        return peer;
    }
    let forwarded = req
        .headers()
        .get_all(X_FORWARDED_FOR)
        .filter_map(|v| v.to_str().ok());
    client_ip(peer, forwarded, trusted)
}

/// Admits or refuses a request from `source` presenting the `Authorization` value `header`.
pub async fn admit(
    state: &AppState,
    source: IpAddr,
    header: Option<&str>,
) -> Result<Admitted, Refused> {
    let Some(_slot) = state.in_flight.try_enter(source) else {
        metrics::counter!(telemetry::REQUESTS_LIMITED_TOTAL, "reason" => "concurrency")
            .increment(1);
        return Err(ApiError::RateLimited {
            message: "too many concurrent requests from this address".to_owned(),
            retry_after: 1,
        }
        .into());
    };
    let hash = match key_hash(header) {
        Ok(hash) => hash,
        Err(err) => return Err(fail(state, source, err).await),
    };
    let mut lock_checked = false;
    let found = match state.auth.cached(&hash) {
        Some(found) => Some(found),
        None => {
            refuse_if_locked(state.limiter.check_lock(source).await)?;
            lock_checked = true;
            state.auth.lookup(&hash).await?
        }
    };
    let principal = match found.as_deref().map(principal_of) {
        Some(Ok(principal)) => principal,
        None => return Err(fail(state, source, ApiError::Unauthorized("invalid API key")).await),
        Some(Err(err @ ApiError::Unauthorized(_))) => return Err(fail(state, source, err).await),
        Some(Err(err)) => {
            if !lock_checked {
                refuse_if_locked(state.limiter.check_lock(source).await)?;
            }
            return Err(err.into());
        }
    };
    let verdict = state
        .limiter
        .admit(source, principal.account_id, principal.rate_per_minute)
        .await;
    match verdict {
        Verdict::Locked(left) => Err(locked(left).into()),
        Verdict::Limited(window) => {
            metrics::counter!(telemetry::REQUESTS_LIMITED_TOTAL, "reason" => "rate").increment(1);
            Err(Refused {
                error: ApiError::RateLimited {
                    message: format!(
                        "rate limit of {} requests per window exceeded",
                        window.limit
                    ),
                    retry_after: window.reset_seconds(),
                },
                window: Some(window),
            })
        }
        Verdict::Admitted(window) => Ok(Admitted { principal, window }),
    }
}

/// Counts a failed authentication and answers `err`, or the lockout when already locked.
async fn fail(state: &AppState, source: IpAddr, err: ApiError) -> Refused {
    match state.limiter.record_failure(source).await {
        Verdict::Locked(left) => locked(left).into(),
        _ => err.into(),
    }
}

fn refuse_if_locked(verdict: Verdict) -> Result<(), ApiError> {
    match verdict {
        Verdict::Locked(left) => Err(locked(left)),
        _ => Ok(()),
    }
}

fn locked(left: Duration) -> ApiError {
    metrics::counter!(telemetry::REQUESTS_LIMITED_TOTAL, "reason" => "lockout").increment(1);
    ApiError::RateLimited {
        message: "too many failed authentications from this address; retry later".to_owned(),
        retry_after: seconds_ceil(left),
    }
}
