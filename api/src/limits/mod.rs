//! Rate limits and the lockout as HTTP sees them: the `x-ratelimit-*` headers, and the api's
//! own in-process bounds.
//!
//! The Redis side (windows per account, the failed-authentication lockout per source address)
//! is [`moderation_shared::limits`], which the dashboard's sign-in shares. When Redis is
//! unreachable the limits fail open; the per-address cap on concurrent authentications
//! ([`in_flight`]) is in process and still holds, as do the bounds on concurrent exports
//! ([`exports`]).

pub mod exports;
pub mod in_flight;

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
pub use moderation_shared::limits::{seconds_ceil, LimitSettings, Limiter, Verdict, WindowState};

/// `x-ratelimit-limit`.
pub const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `x-ratelimit-remaining`.
pub const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `x-ratelimit-reset`: whole seconds until the reported window starts afresh.
pub const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Writes the three `x-ratelimit-*` headers of `window`.
pub fn write_headers(window: &WindowState, headers: &mut HeaderMap) {
    headers.insert(LIMIT, HeaderValue::from(window.limit));
    headers.insert(REMAINING, HeaderValue::from(window.remaining));
    headers.insert(RESET, HeaderValue::from(window.reset_seconds()));
}
