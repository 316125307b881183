//! `GET /api/v1/me`: who the presented key is, so a client can check its key and scopes.

use actix_web::{web, HttpResponse};
use serde_json::json;

use crate::{auth::Principal, startup::resource};

/// Registers the route under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/me").route(web::get().to(me)));
}

/// Answers the key id, account id, scopes and rate limit of the caller.
pub async fn me(principal: Principal) -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "key_id": principal.key_id,
        "account_id": principal.account_id,
        "scopes": principal.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "rate_per_minute": principal.rate_per_minute,
    }))
}
