//! Request ids, the request's log span, and the request metrics.

use std::time::Instant;

use actix_web::{
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    http::{
        header::{HeaderName, HeaderValue},
        Method,
    },
    middleware::Next,
    HttpMessage,
};
use moderation_shared::telemetry;
use tracing::Instrument;
use uuid::Uuid;

use crate::auth::access::{known_route, MatchedPattern};

/// The request id header, read from the client when sensible and always echoed back.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Gives every request an id (the client's `x-request-id` when it is sane, else a new one),
/// logs the request inside a span carrying it, echoes it, and records request metrics.
pub async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let request_id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| is_sane_request_id(v))
        .map_or_else(|| Uuid::new_v4().to_string(), str::to_owned);
    // Matching the route walks the router: do it once and hand it to the inner middleware.
    let pattern = req.match_pattern();
    let route = pattern
        .as_deref()
        .and_then(known_route)
        .unwrap_or("unmatched");
    req.extensions_mut().insert(MatchedPattern(pattern));
    let method = static_method(req.method());
    let span =
        tracing::info_span!("request", request_id = %request_id, method = %method, route = %route);
    let started = Instant::now();
    let result = next.call(req).instrument(span.clone()).await;
    let elapsed = started.elapsed();
    let status = match &result {
        Ok(res) => res.status(),
        Err(err) => err.as_response_error().status_code(),
    };
    span.in_scope(|| {
        tracing::info!(
            status = status.as_u16(),
            elapsed_ms = elapsed.as_secs_f64() * 1000.0,
            "Request answered"
        );
    });
    let class = match status.as_u16() {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    };
    metrics::counter!(telemetry::HTTP_REQUESTS_TOTAL, "route" => route, "method" => method, "status" => class).increment(1);
    metrics::histogram!(telemetry::HTTP_REQUEST_DURATION_SECONDS, "route" => route, "method" => method)
        .record(elapsed.as_secs_f64());
    let mut res = result?;
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        res.headers_mut().insert(REQUEST_ID, value);
    }
    Ok(res)
}

/// The method as a label of a fixed set.
fn static_method(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

fn is_sane_request_id(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 128
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}
