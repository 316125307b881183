//! `GET /api/v1/me`: who the presented key is, so a client can check its key and scopes.

use actix_web::{web, HttpResponse};
use moderation_shared::domain::{AccountId, ApiKeyId};
use serde::Serialize;
use utoipa::ToSchema;

use super::resource;
use crate::auth::Principal;

/// Registers the route under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/me").route(web::get().to(me)));
}

/// The caller's key.
#[derive(Debug, Serialize, ToSchema)]
pub struct Me {
    /// The key's id.
    #[schema(value_type = uuid::Uuid)]
    key_id: ApiKeyId,
    /// Its account's id.
    #[schema(value_type = uuid::Uuid)]
    account_id: AccountId,
    /// The scopes it carries.
    scopes: Vec<&'static str>,
    /// The account's requests-per-minute limit.
    rate_per_minute: u32,
}

/// Answers the key id, account id, scopes and rate limit of the caller.
#[utoipa::path(get, path = "/api/v1/me", tag = "account", responses(
    (status = 200, description = "The presented key.", body = Me),
))]
pub async fn me(principal: Principal) -> HttpResponse {
    HttpResponse::Ok().json(Me {
        key_id: principal.key_id,
        account_id: principal.account_id,
        scopes: principal.scopes.iter().map(|s| s.as_str()).collect(),
        rate_per_minute: principal.rate_per_minute,
    })
}
