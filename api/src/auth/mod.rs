//! Authentication and authorisation.
//!
//! [`ENDPOINTS`] ([`access`]) is the one table saying what each endpoint needs. The
//! [`authenticate`] middleware reads the bearer key, looks it up by its hash (through a cache
//! of at most a few seconds), resolves the account, and checks the scope before any handler
//! runs; the lockout and rate limits around the lookup are in [`admission`]. Handlers get the
//! result through the [`Principal`] extractor ([`principal`]).

use actix_web::{
    body::{EitherBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::header,
    middleware::Next,
    web, HttpMessage,
};

use crate::{error::ApiError, limits, state::AppState};

pub mod access;
pub mod admission;
pub mod principal;

pub use access::{Access, Endpoint, API_PREFIX, ENDPOINTS};
pub use principal::{Authenticator, Principal};

use access::{access_for, has_no_rule, MatchedPattern};
use admission::{Admitted, Refused};
use principal::authorize;

/// Middleware: authenticates every request under [`API_PREFIX`] that is not public, applies
/// the lockout and rate limits ([`admission`]), and authorises it against [`ENDPOINTS`]. Refusals
/// are answered here with the contract's body; authenticated responses carry the rate-limit
/// headers.
pub async fn authenticate(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    match check(&req).await {
        Ok(None) => Ok(next.call(req).await?.map_into_left_body()),
        Ok(Some(Admitted { principal, window })) => {
            req.extensions_mut().insert(principal);
            let mut res = next.call(req).await?;
            if let Some(window) = window {
                limits::write_headers(&window, res.headers_mut());
            }
            Ok(res.map_into_left_body())
        }
        Err(Refused { error, window }) => {
            let mut res = req.error_response(error);
            if let Some(window) = window {
                limits::write_headers(&window, res.headers_mut());
            }
            Ok(res.map_into_right_body())
        }
    }
}

/// Decides a request: `None` for a public one, the principal for an admitted one.
async fn check(req: &ServiceRequest) -> Result<Option<Admitted>, Refused> {
    let pattern = match req.extensions().get::<MatchedPattern>() {
        Some(found) => found.0.clone(),
        None => req.match_pattern(),
    };
    let access = pattern.as_deref().and_then(|p| access_for(req.method(), p));
    let under_api = req.path() == API_PREFIX || req.path().starts_with("/api/v1/");
    if access == Some(Access::Public) || (access.is_none() && !under_api) {
        return Ok(None);
    }
    let state = req
        .app_data::<web::Data<AppState>>()
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("application state missing")))?;
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let admitted = admission::admit(
        state,
        admission::source_of(req, &state.trusted_proxies),
        header,
    )
    .await?;
    let refuse = |error: ApiError| Refused {
        error,
        window: admitted.window,
    };
    match (access, pattern) {
        (Some(access), _) => authorize(&admitted.principal, access).map_err(refuse)?,
        // A registered route with no row in the table: refuse rather than guess.
        (None, Some(pattern)) if has_no_rule(&pattern) => {
            tracing::error!(route = %pattern, method = %req.method(), "Route has no access rule");
            return Err(refuse(ApiError::Forbidden(
                "this endpoint is not available to API keys".into(),
            )));
        }
        // Unknown routes and wrong methods fall through to 404 and 405.
        (None, _) => {}
    }
    Ok(Some(admitted))
}
