//! Webhook settings: the account's global URL and its signing secrets.

use std::time::Duration;

use actix_web::{web, HttpResponse};
use moderation_shared::{
    clock::format_millis,
    db::webhooks::{self, SigningSecret, WebhookStoreError},
    url_guard::UrlUse,
};
use serde::Deserialize;
use serde_json::json;

use crate::{auth::Principal, error::ApiError, startup::resource, state::AppState};

/// Clock skew a Standard Webhooks verifier accepts by default.
pub const TOLERANCE_SECONDS: u64 = 300;
/// How long a rotated-out secret keeps signing.
pub const GRACE_HOURS: u64 = 24;

/// Registers the routes under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/webhook/register")
            .route(web::post().to(register))
            .route(web::get().to(current))
            .route(web::delete().to(clear)),
    )
    .service(resource("/me/webhook-secrets").route(web::get().to(list_secrets)))
    .service(resource("/me/webhook-secrets/reveal").route(web::post().to(reveal)))
    .service(resource("/me/webhook-secrets/rotate").route(web::post().to(rotate)));
}

/// Registers the routes that also answer outside `/api/v1`.
pub fn configure_root(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/me/webhook-secrets/reveal").route(web::post().to(reveal)));
}

impl From<WebhookStoreError> for ApiError {
    fn from(err: WebhookStoreError) -> Self {
        match err {
            WebhookStoreError::Db(db) => db.into(),
            WebhookStoreError::Crypto(c) => ApiError::Internal(c.into()),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterBody {
    url: String,
}

async fn register(
    state: web::Data<AppState>,
    principal: Principal,
    body: web::Json<RegisterBody>,
) -> Result<HttpResponse, ApiError> {
    let checked = state
        .url_guard
        .check(&body.url, UrlUse::Webhook)
        .await
        .map_err(|e| ApiError::InvalidRequest(format!("url: {e}")))?;
    let url = checked.url.to_string();
    let client = state.pool.get().await.map_err(ApiError::unavailable)?;
    let updated_at = webhooks::set_url(&client, principal.account_id, &url).await?;
    Ok(HttpResponse::Ok().json(json!({ "url": url, "updated_at": format_millis(updated_at) })))
}

async fn current(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await.map_err(ApiError::unavailable)?;
    let url = webhooks::get_url(&client, principal.account_id).await?;
    Ok(HttpResponse::Ok().json(json!({ "url": url })))
}

async fn clear(state: web::Data<AppState>, principal: Principal) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await.map_err(ApiError::unavailable)?;
    webhooks::clear_url(&client, principal.account_id).await?;
    Ok(HttpResponse::NoContent().finish())
}

async fn list_secrets(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await.map_err(ApiError::unavailable)?;
    let secrets =
        webhooks::signing_secrets(&client, &state.encryption_key, principal.account_id).await?;
    let listed: Vec<_> = secrets
        .iter()
        .map(|s| {
            json!({
                "id": s.meta.id,
                "created_at": format_millis(s.meta.created_at),
                "expires_at": s.meta.expires_at.map(format_millis),
                "status": if s.meta.expires_at.is_some() { "expiring" } else { "active" },
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "secrets": listed,
        "tolerance_seconds": TOLERANCE_SECONDS,
        "grace_hours": GRACE_HOURS,
    })))
}

fn revealed(secret: &SigningSecret) -> serde_json::Value {
    json!({
        "id": secret.meta.id,
        "secret": secret.secret,
        "created_at": format_millis(secret.meta.created_at),
    })
}

async fn reveal(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await.map_err(ApiError::unavailable)?;
    let secrets =
        webhooks::signing_secrets(&client, &state.encryption_key, principal.account_id).await?;
    let active = secrets
        .first()
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("no active signing secret")))?;
    Ok(HttpResponse::Ok().json(revealed(active)))
}

async fn rotate(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let mut client = state.pool.get().await.map_err(ApiError::unavailable)?;
    let tx = client
        .transaction()
        .await
        .map_err(|e| ApiError::from(moderation_shared::db::DbError::from(e)))?;
    let grace = Duration::from_secs(GRACE_HOURS * 3600);
    let active = webhooks::rotate(&tx, &state.encryption_key, principal.account_id, grace).await?;
    tx.commit()
        .await
        .map_err(|e| ApiError::from(moderation_shared::db::DbError::from(e)))?;
    Ok(HttpResponse::Created().json(revealed(&active)))
}
