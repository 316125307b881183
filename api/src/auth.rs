//! Authentication and authorisation.
//!
//! [`ENDPOINTS`] is the one table saying what each endpoint needs. The [`authenticate`]
//! middleware reads the bearer key, looks it up by its hash (through a cache of at most a few
//! seconds), resolves the account, and checks the scope before any handler runs; the lockout
//! and rate limits around the lookup are in [`gate`]. Handlers get the result through the
//! [`Principal`] extractor.

use std::{sync::Arc, time::Duration};

use actix_web::{
    body::{EitherBody, MessageBody},
    dev::{Payload, ServiceRequest, ServiceResponse},
    http::{header, Method},
    middleware::Next,
    web, FromRequest, HttpMessage, HttpRequest,
};
use moderation_shared::{
    clock,
    db::{api_keys, api_keys::KeyPrincipal, Pool},
    domain::{AccountId, ApiKeyId, Scope},
    keys,
};

use crate::{
    error::ApiError,
    gate::{self, Admitted, Refused},
    middleware::MatchedPattern,
    state::AppState,
};

/// What an endpoint requires of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No key: health, metrics, the OpenAPI document.
    Public,
    /// Any valid key of an active account.
    AnyKey,
    /// A valid key carrying this scope.
    Scope(Scope),
}

/// One row of the access table.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The HTTP method.
    pub method: Method,
    /// The route pattern exactly as registered, e.g. `/api/v1/job/{id}`.
    pub path: &'static str,
    /// What it needs.
    pub access: Access,
}

/// The path prefix every authenticated endpoint lives under.
pub const API_PREFIX: &str = "/api/v1";

/// Every endpoint the api serves and what it needs. A registered route missing here is
/// refused (fail closed), and a test checks that every row here is a served route.
#[rustfmt::skip]
pub const ENDPOINTS: &[Endpoint] = &[
    row(Method::GET, "/health", Access::Public),
    row(Method::GET, "/metrics", Access::Public),
    row(Method::GET, "/api/v1/openapi.json", Access::Public),
    row(Method::GET, "/api/v1/me", Access::AnyKey),
    row(Method::POST, "/api/v1/moderate/prompt", Access::Scope(Scope::ModeratePrompt)),
    row(Method::POST, "/api/v1/moderate/chat", Access::Scope(Scope::ModerateChat)),
    row(Method::POST, "/api/v1/moderate/image", Access::Scope(Scope::ModerateImage)),
    row(Method::POST, "/api/v1/moderate/video", Access::Scope(Scope::ModerateVideo)),
    row(Method::POST, "/api/v1/moderate/audio", Access::Scope(Scope::ModerateAudio)),
    row(Method::GET, "/api/v1/job/{id}", Access::Scope(Scope::JobRead)),
    row(Method::GET, "/api/v1/job/{id}/progress", Access::Scope(Scope::JobRead)),
    row(Method::GET, "/api/v1/jobs", Access::Scope(Scope::JobRead)),
    row(Method::POST, "/api/v1/webhook/register", Access::Scope(Scope::WebhookManage)),
    row(Method::GET, "/api/v1/webhook/register", Access::Scope(Scope::WebhookManage)),
    row(Method::DELETE, "/api/v1/webhook/register", Access::Scope(Scope::WebhookManage)),
    row(Method::GET, "/api/v1/me/webhook-secrets", Access::Scope(Scope::WebhookManage)),
    row(Method::POST, "/api/v1/me/webhook-secrets/reveal", Access::Scope(Scope::WebhookManage)),
    row(Method::POST, "/me/webhook-secrets/reveal", Access::Scope(Scope::WebhookManage)),
    row(Method::POST, "/api/v1/me/webhook-secrets/rotate", Access::Scope(Scope::WebhookManage)),
    row(Method::GET, "/api/v1/jobs/export", Access::Scope(Scope::JobRead)),
    row(Method::GET, "/api/v1/usage/volume", Access::Scope(Scope::UsageRead)),
    row(Method::POST, "/api/v1/registry/check", Access::Scope(Scope::RegistryCheck)),
    row(Method::POST, "/api/v1/registry/entries", Access::Scope(Scope::RegistrySubmit)),
    row(Method::GET, "/api/v1/registry/entries", Access::Scope(Scope::RegistrySubmit)),
    row(Method::GET, "/api/v1/registry/entries/{id}", Access::Scope(Scope::RegistrySubmit)),
    row(Method::POST, "/api/v1/registry/entries/{id}/revoke", Access::Scope(Scope::RegistrySubmit)),
    row(Method::GET, "/api/v1/custom-categories", Access::Scope(Scope::SettingsManage)),
    row(Method::POST, "/api/v1/custom-categories", Access::Scope(Scope::SettingsManage)),
    row(Method::PATCH, "/api/v1/custom-categories/{id}", Access::Scope(Scope::SettingsManage)),
    row(Method::DELETE, "/api/v1/custom-categories/{id}", Access::Scope(Scope::SettingsManage)),
    row(Method::GET, "/api/v1/blocklist", Access::Scope(Scope::SettingsManage)),
    row(Method::POST, "/api/v1/blocklist", Access::Scope(Scope::SettingsManage)),
    row(Method::DELETE, "/api/v1/blocklist", Access::Scope(Scope::SettingsManage)),
];

const fn row(method: Method, path: &'static str, access: Access) -> Endpoint {
    Endpoint {
        method,
        path,
        access,
    }
}

/// The table's own copy of a registered pattern (a fixed label for metrics), if it has one.
pub fn known_route(pattern: &str) -> Option<&'static str> {
    ENDPOINTS.iter().find(|e| e.path == pattern).map(|e| e.path)
}

/// Looks up what `method` on the registered `pattern` needs.
pub fn access_for(method: &Method, pattern: &str) -> Option<Access> {
    ENDPOINTS
        .iter()
        .find(|e| e.method == *method && e.path == pattern)
        .map(|e| e.access)
}

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The key used.
    pub key_id: ApiKeyId,
    /// The account it belongs to.
    pub account_id: AccountId,
    /// The key's scopes.
    pub scopes: Arc<[Scope]>,
    /// The account's requests-per-minute limit.
    pub rate_per_minute: u32,
    /// The account's daily registry check quota.
    pub check_quota_daily: u32,
    /// Whether the account's NSFW check is on.
    pub nsfw_check: bool,
    /// Whether the account is a registry member.
    pub registry_member: bool,
}

impl FromRequest for Principal {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(
            req.extensions()
                .get::<Principal>()
                .cloned()
                .ok_or(ApiError::Unauthorized("missing bearer key")),
        )
    }
}

/// Key lookup by hash, with a short in-process cache.
pub struct Authenticator {
    pool: Pool,
    cache: moka::sync::Cache<[u8; 32], Arc<KeyPrincipal>>,
}

impl Authenticator {
    /// A lookup through `pool`, trusting a cached key for `ttl`.
    pub fn new(pool: Pool, ttl: Duration) -> Self {
        Self {
            pool,
            cache: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(ttl)
                .build(),
        }
    }

    /// The key of `hash` if this replica looked it up within the cache's lifetime.
    pub fn cached(&self, hash: &[u8; 32]) -> Option<Arc<KeyPrincipal>> {
        self.cache.get(hash)
    }

    /// Looks the key of `hash` up in Postgres (and caches it when found).
    pub async fn lookup(&self, hash: &[u8; 32]) -> Result<Option<Arc<KeyPrincipal>>, ApiError> {
        let client = self.pool.get().await.map_err(ApiError::unavailable)?;
        let Some(found) = api_keys::find_principal(&client, hash).await? else {
            return Ok(None);
        };
        let found = Arc::new(found);
        self.cache.insert(*hash, found.clone());
        Ok(Some(found))
    }
}

/// Reads the `Authorization` header value down to the hash of a well-formed key.
pub fn key_hash(header: Option<&str>) -> Result<[u8; 32], ApiError> {
    let header = header.ok_or(ApiError::Unauthorized("missing bearer key"))?;
    let (scheme, key) = header.split_once(' ').ok_or(ApiError::Unauthorized(
        "the Authorization header must be 'Bearer <API_KEY>'",
    ))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(ApiError::Unauthorized(
            "the Authorization header must be 'Bearer <API_KEY>'",
        ));
    }
    let key = key.trim();
    if !keys::is_well_formed(key) {
        return Err(ApiError::Unauthorized("invalid API key"));
    }
    Ok(keys::hash(key))
}

/// The principal of a found key, or why the key may not be used.
pub fn principal_of(found: &KeyPrincipal) -> Result<Principal, ApiError> {
    // A terminated account is refused whatever the state of the key used.
    if found.account_terminated {
        return Err(ApiError::AccountTerminated);
    }
    if found.deleted || !found.enabled {
        return Err(ApiError::Unauthorized("this API key is disabled"));
    }
    if found.expires_at.is_some_and(|at| at <= clock::now()) {
        return Err(ApiError::Unauthorized("this API key has expired"));
    }
    Ok(Principal {
        key_id: found.key_id,
        account_id: found.account_id,
        scopes: found.scopes.clone().into(),
        rate_per_minute: found.rate_per_minute,
        check_quota_daily: found.check_quota_daily,
        nsfw_check: found.nsfw_check,
        registry_member: found.registry_member,
    })
}

/// Checks that `principal` may use an endpoint needing `access`.
pub fn authorize(principal: &Principal, access: Access) -> Result<(), ApiError> {
    let Access::Scope(scope) = access else {
        return Ok(());
    };
    if !principal.scopes.contains(&scope) {
        return Err(ApiError::Forbidden(format!(
            "this API key lacks the scope {scope}"
        )));
    }
    if scope.needs_registry_membership() && !principal.registry_member {
        return Err(ApiError::Forbidden(format!(
            "scope {scope} needs an account vetted as a registry member"
        )));
    }
    Ok(())
}

/// Middleware: authenticates every request under [`API_PREFIX`] that is not public, applies
/// the lockout and rate limits ([`gate`]), and authorises it against [`ENDPOINTS`]. Refusals
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
                window.write_headers(res.headers_mut());
            }
            Ok(res.map_into_left_body())
        }
        Err(Refused { error, window }) => {
            let mut res = req.error_response(error);
            if let Some(window) = window {
                window.write_headers(res.headers_mut());
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
    let admitted = gate::admit(state, gate::source_of(req, &state.trusted_proxies), header).await?;
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

/// Whether no method of this registered pattern is in the table (a route missing its rule,
/// as opposed to a wrong method, which is a 405).
fn has_no_rule(pattern: &str) -> bool {
    !ENDPOINTS.iter().any(|e| e.path == pattern)
}
