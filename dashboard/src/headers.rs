//! Middleware: the security headers on every answer.
//!
//! The policy allows scripts and styles only from the dashboard's own embedded files (no
//! inline script or `style`), images only from the dashboard itself, forms posting only back to it, and no
//! framing. Pages are never cached, since they show an account's data. Every answer also
//! says how long the server took to produce it (`server-timing: app;dur=<ms>`, up to its
//! headers), which `scripts/bench dashboard` reads.

use std::time::Instant;

use actix_web::{
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    http::header::{self, HeaderName, HeaderValue},
    middleware::Next,
};

/// The Content-Security-Policy of every answer.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                       form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Adds the headers; a static asset keeps its own `Cache-Control`.
pub async fn security_headers(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = Instant::now();
    let mut res = next.call(req).await?;
    let took = started.elapsed().as_secs_f64() * 1000.0;
    let headers = res.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&format!("app;dur={took:.2}")) {
        headers.insert(HeaderName::from_static("server-timing"), value);
    }
    let fixed = [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    Ok(res)
}
