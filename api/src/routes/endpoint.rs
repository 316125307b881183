//! The health of the account's webhook URL (contract 17): its state as `GET
//! /api/v1/webhook/register` shows it, pause, resume, disable, enable and a signed test send.

use actix_web::{web, HttpResponse};
use moderation_shared::{
    clock::format_millis,
    db::{
        deliveries, delivery_log,
        endpoints::{self, Endpoint, Refused, Request},
        GenericClient,
    },
    domain::AccountId,
    endpoint_health::{Health, HealthSettings},
    telemetry,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{deliveries::DeliveryView, resource};
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// Registers the routes under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/webhook/pause").route(web::post().to(pause)))
        .service(resource("/webhook/resume").route(web::post().to(resume)))
        .service(resource("/webhook/disable").route(web::post().to(disable)))
        .service(resource("/webhook/enable").route(web::post().to(enable)))
        .service(resource("/webhook/test").route(web::post().to(test)));
}

/// The latest failed attempt to the URL.
#[derive(Debug, Serialize, ToSchema)]
pub struct LastFailureView {
    /// When it ended (RFC 3339, milliseconds).
    #[schema(format = DateTime)]
    at: String,
    /// The answer's status, or `null` when none came.
    #[schema(required = true)]
    status_code: Option<i32>,
    /// What went wrong.
    error: String,
}

/// The account's webhook URL and its health.
#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointView {
    /// The URL, or `null` when none is set.
    #[schema(required = true)]
    url: Option<String>,
    /// `active`, `failing` (an attempt failed with no 2xx after it), `disabled` (held) or
    /// `paused` (held); `active` when no URL is set.
    #[schema(pattern = "^(active|failing|disabled|paused)$")]
    state: &'static str,
    /// While `disabled`: `auto`, `gone` (it answered 410) or `manual`; else `null`.
    #[schema(required = true, pattern = "^(auto|gone|manual)$")]
    disabled_reason: Option<&'static str>,
    /// The first failed attempt with no 2xx after it, or `null`.
    #[schema(format = DateTime, required = true)]
    failing_since: Option<String>,
    /// The latest 2xx, or `null`.
    #[schema(format = DateTime, required = true)]
    last_success_at: Option<String>,
    /// The latest failed attempt, or `null`.
    #[schema(required = true)]
    last_failure: Option<LastFailureView>,
    /// While `failing` with automatic disabling on: when it is disabled (once it has failed
    /// `APP_WEBHOOK_DISABLE_MIN_FAILURES` times); else `null`.
    #[schema(format = DateTime, required = true)]
    disable_at: Option<String>,
    /// Deliveries held (not attempted) while the URL is disabled or paused.
    held: i64,
}

impl EndpointView {
    /// The view of `endpoint` (or of no URL) with `held` deliveries.
    pub fn new(endpoint: Option<&Endpoint>, held: i64, settings: &HealthSettings) -> Self {
        let none = Health::default();
        let health = endpoint.map_or(&none, |e| &e.health);
        Self {
            url: endpoint.map(|e| e.url.clone()),
            state: health.state.as_str(),
            disabled_reason: health.disabled_reason.map(|r| r.as_str()),
            failing_since: health.failing_since.map(format_millis),
            last_success_at: health.last_success_at.map(format_millis),
            last_failure: health.last_failure.as_ref().map(|f| LastFailureView {
                at: format_millis(f.at),
                status_code: f.status_code,
                error: f.error.clone(),
            }),
            disable_at: health.disable_at(settings).map(format_millis),
            held,
        }
    }

    /// The account's URL as it now stands.
    pub async fn load(
        client: &impl GenericClient,
        account: AccountId,
        settings: &HealthSettings,
    ) -> Result<Self, ApiError> {
        let endpoint = endpoints::get(client, account).await?;
        let held = deliveries::held_count(client, account).await?;
        Ok(Self::new(endpoint.as_ref(), held, settings))
    }
}

/// The enable body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EnableBody {
    /// `held`: send the held deliveries, oldest first; `none`: abandon them.
    #[schema(pattern = "^(held|none)$")]
    replay: String,
}

/// Carries out `request` and answers the URL's state.
async fn carry_out(
    state: &AppState,
    principal: &Principal,
    request: Request,
) -> Result<HttpResponse, ApiError> {
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let account = principal.account_id;
    let (_, change) = endpoints::request(&tx, account, principal.actor(), request, &state.health)
        .await?
        .map_err(|refused| match refused {
            Refused::NoUrl => ApiError::NotFound(
                "no webhook URL is registered: register one with POST /api/v1/webhook/register"
                    .to_owned(),
            ),
            Refused::Conflict(why) => ApiError::Conflict(why),
        })?;
    let view = EndpointView::load(&tx, account, &state.health).await?;
    tx.commit().await?;
    if let Some(change) = change {
        telemetry::count_endpoint_change(change.to);
    }
    Ok(HttpResponse::Ok().json(view))
}

#[utoipa::path(post, path = "/api/v1/webhook/pause", operation_id = "pause_webhook", tag = "webhooks",
    responses(
        (status = 200, description = "Paused: new deliveries to the URL are held (not \
          attempted) until it is resumed, for at most `APP_WEBHOOK_HOLD_S`.", body = EndpointView),
        (status = 404, description = "No webhook URL is registered.", body = ErrorBody),
        (status = 409, description = "The URL is paused or disabled already.", body = ErrorBody),
    ))]
pub(crate) async fn pause(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    carry_out(&state, &principal, Request::Pause).await
}

#[utoipa::path(post, path = "/api/v1/webhook/resume", operation_id = "resume_webhook", tag = "webhooks",
    responses(
        (status = 200, description = "Active again; the held deliveries are sent, oldest \
          first.", body = EndpointView),
        (status = 404, description = "No webhook URL is registered.", body = ErrorBody),
        (status = 409, description = "The URL is not paused.", body = ErrorBody),
    ))]
pub(crate) async fn resume(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    carry_out(&state, &principal, Request::Resume).await
}

#[utoipa::path(post, path = "/api/v1/webhook/disable", operation_id = "disable_webhook", tag = "webhooks",
    responses(
        (status = 200, description = "Disabled (`manual`): new deliveries to the URL are held.",
         body = EndpointView),
        (status = 404, description = "No webhook URL is registered.", body = ErrorBody),
        (status = 409, description = "The URL is disabled already.", body = ErrorBody),
    ))]
pub(crate) async fn disable(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    carry_out(&state, &principal, Request::Disable).await
}

#[utoipa::path(post, path = "/api/v1/webhook/enable", operation_id = "enable_webhook", tag = "webhooks",
    request_body = EnableBody,
    responses(
        (status = 200, description = "Active again; with `replay: held` the held deliveries \
          are sent, oldest first, with `none` they are abandoned.", body = EndpointView),
        (status = 400, description = "`replay` missing or not `held` or `none`.",
         body = ErrorBody),
        (status = 404, description = "No webhook URL is registered.", body = ErrorBody),
        (status = 409, description = "The URL is not disabled (a paused one is resumed).",
         body = ErrorBody),
    ))]
pub(crate) async fn enable(
    state: web::Data<AppState>,
    principal: Principal,
    body: web::Json<EnableBody>,
) -> Result<HttpResponse, ApiError> {
    let replay = match body.replay.as_str() {
        "held" => true,
        "none" => false,
        other => {
            return Err(ApiError::InvalidRequest(format!(
                "replay: {other:?} is neither \"held\" nor \"none\""
            )))
        }
    };
    carry_out(&state, &principal, Request::Enable { replay }).await
}

#[utoipa::path(post, path = "/api/v1/webhook/test", operation_id = "test_webhook", tag = "webhooks",
    responses(
        (status = 202, description = "One signed `{\"event\": \"ping\", \"delivery_id\", \
          \"sent_at\"}` delivery to the URL leaves now, whatever its state, and is logged like \
          any other.", body = DeliveryView),
        (status = 404, description = "No webhook URL is registered.", body = ErrorBody),
    ))]
pub(crate) async fn test(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let account = principal.account_id;
    let no_url = || {
        ApiError::NotFound(
            "no webhook URL is registered: register one with POST /api/v1/webhook/register"
                .to_owned(),
        )
    };
    let id = endpoints::send_test(&tx, account)
        .await?
        .ok_or_else(no_url)?;
    let delivery = delivery_log::get(&tx, account, id, state.floor())
        .await?
        .ok_or_else(no_url)?;
    tx.commit().await?;
    Ok(HttpResponse::Accepted().json(DeliveryView::from(delivery)))
}
