//! The one table saying what each endpoint needs ([`ENDPOINTS`]), and the route pattern a
//! request matched ([`MatchedPattern`]). A leaf: the middleware, the OpenAPI document and the
//! tests read it, and it reads nothing of the crate.

use actix_web::http::Method;
use moderation_shared::domain::Scope;

/// What an endpoint requires of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No key: health, metrics, the OpenAPI document.
    Public,
    /// Any valid key of an active account.
    AnyKey,
    /// A valid key carrying this scope.
    Scope(Scope),
    /// A valid key carrying either scope.
    EitherScope(Scope, Scope),
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
    row(Method::POST, "/api/v1/webhook/pause", Access::Scope(Scope::WebhookManage)),
    row(Method::POST, "/api/v1/webhook/resume", Access::Scope(Scope::WebhookManage)),
    row(Method::POST, "/api/v1/webhook/disable", Access::Scope(Scope::WebhookManage)),
    row(Method::POST, "/api/v1/webhook/enable", Access::Scope(Scope::WebhookManage)),
    row(Method::POST, "/api/v1/webhook/test", Access::Scope(Scope::WebhookManage)),
    row(Method::GET, "/api/v1/me/webhook-secrets", Access::Scope(Scope::WebhookManage)),
    row(Method::POST, "/api/v1/me/webhook-secrets/reveal", Access::Scope(Scope::WebhookManage)),
    row(Method::POST, "/me/webhook-secrets/reveal", Access::Scope(Scope::WebhookManage)),
    row(Method::POST, "/api/v1/me/webhook-secrets/rotate", Access::Scope(Scope::WebhookManage)),
    row(Method::GET, "/api/v1/deliveries", Access::Scope(Scope::WebhookManage)),
    row(Method::POST, "/api/v1/deliveries/recover", Access::Scope(Scope::WebhookManage)),
    row(Method::GET, "/api/v1/deliveries/{id}", Access::Scope(Scope::WebhookManage)),
    row(Method::POST, "/api/v1/deliveries/{id}/resend", Access::Scope(Scope::WebhookManage)),
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
    row(Method::GET, "/api/v1/policy", Access::Scope(Scope::SettingsManage)),
    row(Method::POST, "/api/v1/policy/versions", Access::Scope(Scope::SettingsManage)),
    row(Method::GET, "/api/v1/policy/versions/{v}", Access::Scope(Scope::SettingsManage)),
    row(Method::POST, "/api/v1/policy/versions/{v}/activate", Access::Scope(Scope::SettingsManage)),
    row(Method::POST, "/api/v1/policy/versions/{v}/shadow", Access::Scope(Scope::SettingsManage)),
    row(Method::GET, "/api/v1/policy/versions/{v}/impact", Access::Scope(Scope::SettingsManage)),
    row(Method::DELETE, "/api/v1/policy/shadow", Access::Scope(Scope::SettingsManage)),
    row(Method::GET, "/api/v1/audit", Access::Scope(Scope::SettingsManage)),
    row(Method::GET, "/api/v1/review/queue", Access::Scope(Scope::ReviewDecide)),
    row(Method::GET, "/api/v1/review/items", Access::Scope(Scope::ReviewDecide)),
    row(Method::GET, "/api/v1/review/items/{id}", Access::Scope(Scope::ReviewDecide)),
    row(Method::POST, "/api/v1/review/claim", Access::Scope(Scope::ReviewDecide)),
    row(Method::POST, "/api/v1/review/items/{id}/release", Access::Scope(Scope::ReviewDecide)),
    row(Method::POST, "/api/v1/review/items/{id}/decide", Access::Scope(Scope::ReviewDecide)),
    row(Method::POST, "/api/v1/job/{id}/appeal", Access::Scope(Scope::JobAppeal)),
    row(Method::GET, "/api/v1/job/{id}/decisions", Access::Scope(Scope::JobRead)),
    row(Method::DELETE, "/api/v1/job/{id}/content", Access::Scope(Scope::JobErase)),
    row(Method::GET, "/api/v1/appeals/{id}", Access::EitherScope(Scope::JobAppeal, Scope::JobRead)),
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

/// Whether no method of this registered pattern is in the table (a route missing its rule,
/// as opposed to a wrong method, which is a 405).
pub fn has_no_rule(pattern: &str) -> bool {
    !ENDPOINTS.iter().any(|e| e.path == pattern)
}

/// The route pattern the request matched, found once by the observing middleware (matching
/// walks the router) and read by the inner ones.
#[derive(Debug, Clone)]
pub struct MatchedPattern(pub Option<String>);
