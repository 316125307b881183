//! Middleware: the security headers on every answer.
//!
//! The policy allows scripts and styles only from the dashboard's own embedded files (no
//! inline script or `style`), images only from the dashboard itself, forms posting only back to it, and no
//! framing. One page widens it: a review item shows its job's media from the media's own
//! origin and no other ([`csp_with_media`]); an answer that set its policy keeps it. Pages are
//! never cached, since they show an account's data. Every answer also
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

/// [`CSP`] with images, video and audio also allowed from `origin` (a URL's origin, as
/// `url::Origin::ascii_serialization` writes it: `https://media.example:8443`).
pub fn csp_with_media(origin: &str) -> String {
    CSP.replace(
        "img-src 'self';",
        &format!("img-src 'self' {origin}; media-src {origin};"),
    )
}

/// Adds the headers; a static asset keeps its own `Cache-Control`, a page that set its own
/// policy ([`csp_with_media`]) keeps it.
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
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    let fixed = [
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_media_policy_only_adds_the_origin_for_images_and_media() {
        let widened = csp_with_media("https://media.example:8443");

        assert!(
            widened.contains("; media-src https://media.example:8443;"),
            "{widened}"
        );
        assert_eq!(
            widened.replace(
                "img-src 'self' https://media.example:8443; media-src https://media.example:8443",
                "img-src 'self'"
            ),
            CSP
        );
    }
}
