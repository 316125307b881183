//! Webhook settings: the account's global URL and its signing secrets.

use std::time::Duration;

use actix_web::{web, HttpResponse};
use moderation_shared::{
    clock::format_millis,
    db::webhooks::{self, SigningSecret, WebhookStoreError},
    url_guard::UrlUse,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{endpoint::EndpointView, resource};
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// Clock skew a Standard Webhooks verifier accepts by default.
pub const TOLERANCE_SECONDS: u64 = 300;
/// How long a rotated-out secret keeps signing.
pub const GRACE_HOURS: u64 = webhooks::ROTATION_GRACE_HOURS;

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

/// The register body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegisterBody {
    /// An https URL resolving to public addresses only.
    #[schema(format = "uri")]
    url: String,
}

/// The account's global webhook URL after a change.
#[derive(Debug, Serialize, ToSchema)]
pub struct Registered {
    /// The URL, as stored.
    url: String,
    /// When it was set (RFC 3339, milliseconds).
    #[schema(format = DateTime)]
    updated_at: String,
}

/// One signing secret, without its value.
#[derive(Debug, Serialize, ToSchema)]
pub struct SecretListed {
    /// Its id.
    id: Uuid,
    /// When it was made (RFC 3339, milliseconds).
    #[schema(format = DateTime)]
    created_at: String,
    /// When an `expiring` secret stops signing, else `null`.
    #[schema(format = DateTime, required = true)]
    expires_at: Option<String>,
    /// `active` or `expiring`.
    #[schema(example = "active")]
    status: &'static str,
}

/// The account's signing secrets and how a receiver should verify.
#[derive(Debug, Serialize, ToSchema)]
pub struct SecretList {
    /// The active secret first, then any expiring one.
    secrets: Vec<SecretListed>,
    /// The timestamp tolerance a receiver should allow, in seconds.
    tolerance_seconds: u64,
    /// How long a rotated-out secret keeps signing, in hours.
    grace_hours: u64,
}

/// A signing secret with its value.
#[derive(Debug, Serialize, ToSchema)]
pub struct Revealed {
    /// Its id.
    id: Uuid,
    /// `whsec_` and the base64 of 24 random bytes.
    #[schema(example = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")]
    secret: String,
    /// When it was made (RFC 3339, milliseconds).
    #[schema(format = DateTime)]
    created_at: String,
}

#[utoipa::path(post, path = "/api/v1/webhook/register", operation_id = "register_webhook", tag = "webhooks",
    request_body = RegisterBody,
    responses(
        (status = 200, description = "The global URL is set.", body = Registered),
        (status = 400, description = "Not https, not public, or a malformed body.",
         body = ErrorBody),
    ))]
pub(crate) async fn register(
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
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let updated_at = webhooks::set_url(&tx, principal.account_id, principal.actor(), &url).await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(Registered {
        url,
        updated_at: format_millis(updated_at),
    }))
}

#[utoipa::path(get, path = "/api/v1/webhook/register", operation_id = "get_webhook", tag = "webhooks", responses(
    (status = 200, description = "The global URL (or `null`) and its health.", body = EndpointView),
))]
pub(crate) async fn current(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await?;
    let view = EndpointView::load(&client, principal.account_id, &state.health).await?;
    Ok(HttpResponse::Ok().json(view))
}

#[utoipa::path(delete, path = "/api/v1/webhook/register", operation_id = "delete_webhook", tag = "webhooks", responses(
    (status = 204, description = "The global URL is removed (or there was none)."),
))]
pub(crate) async fn clear(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    webhooks::clear_url(&tx, principal.account_id, principal.actor()).await?;
    tx.commit().await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(get, path = "/api/v1/me/webhook-secrets", operation_id = "list_webhook_secrets", tag = "webhooks", responses(
    (status = 200, description = "The active and expiring secrets, without their values.",
     body = SecretList),
))]
pub(crate) async fn list_secrets(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await?;
    let secrets =
        webhooks::signing_secrets(&client, &state.encryption_key, principal.account_id).await?;
    let listed = secrets
        .iter()
        .map(|s| SecretListed {
            id: s.meta.id,
            created_at: format_millis(s.meta.created_at),
            expires_at: s.meta.expires_at.map(format_millis),
            status: s.meta.status().as_str(),
        })
        .collect();
    Ok(HttpResponse::Ok().json(SecretList {
        secrets: listed,
        tolerance_seconds: TOLERANCE_SECONDS,
        grace_hours: GRACE_HOURS,
    }))
}

fn revealed(secret: &SigningSecret) -> Revealed {
    Revealed {
        id: secret.meta.id,
        secret: secret.secret.clone(),
        created_at: format_millis(secret.meta.created_at),
    }
}

/// Also answered at `/me/webhook-secrets/reveal`; the document lists both paths.
#[utoipa::path(post, path = "/api/v1/me/webhook-secrets/reveal", operation_id = "reveal_webhook_secret", tag = "webhooks", responses(
    (status = 200, description = "The active secret with its value.", body = Revealed),
))]
pub(crate) async fn reveal(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await?;
    let secrets =
        webhooks::signing_secrets(&client, &state.encryption_key, principal.account_id).await?;
    let active = secrets
        .first()
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("no active signing secret")))?;
    Ok(HttpResponse::Ok().json(revealed(active)))
}

#[utoipa::path(post, path = "/api/v1/me/webhook-secrets/rotate", operation_id = "rotate_webhook_secret", tag = "webhooks", responses(
    (status = 201, description = "A new active secret; the old one signs for `grace_hours` more.",
     body = Revealed),
))]
pub(crate) async fn rotate(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let grace = Duration::from_secs(GRACE_HOURS * 3600);
    let active = webhooks::rotate(
        &tx,
        &state.encryption_key,
        principal.account_id,
        principal.actor(),
        grace,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Created().json(revealed(&active)))
}
