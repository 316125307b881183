//! Webhook settings: the global URL with its health (pause, resume, enable, disable and a test
//! send; contract 17) and the signing secrets (listed, revealed on request, rotated). The
//! delivery log is `deliveries`.

use std::time::Duration;

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    db::{
        deliveries,
        endpoints::{self, Refused, Request},
        webhooks::{self, SigningSecret, WebhookStoreError, ROTATION_GRACE_HOURS},
    },
    domain::EndpointState,
    endpoint_health::Health,
    telemetry,
    url_guard::UrlUse,
};

use crate::{
    error::DashboardError,
    form::Posted,
    nav::Nav,
    pages::{render, see_other, stamp_or_dash, Stamp},
    session::Session,
    state::AppState,
};

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/webhooks", web::get().to(show))
        .route("/webhooks/url", web::post().to(set_url))
        .route("/webhooks/url/clear", web::post().to(clear_url))
        .route("/webhooks/secrets/reveal", web::post().to(reveal))
        .route("/webhooks/secrets/rotate", web::post().to(rotate))
        .route("/webhooks/pause", web::post().to(pause))
        .route("/webhooks/resume", web::post().to(resume))
        .route("/webhooks/disable", web::post().to(disable))
        .route("/webhooks/enable", web::post().to(enable))
        .route("/webhooks/test", web::post().to(test));
}

/// The latest failure: when (a rendered stamp) and what (text).
struct FailureRow {
    at: String,
    what: String,
}

/// The URL's health as the page shows it.
struct HealthView {
    state: &'static str,
    disabled_reason: Option<&'static str>,
    failing_since: String,
    last_success: String,
    last_failure: Option<FailureRow>,
    disable_at: String,
    held: i64,
    can_pause: bool,
    paused: bool,
    disabled: bool,
}

impl From<WebhookStoreError> for DashboardError {
    fn from(err: WebhookStoreError) -> Self {
        match err {
            WebhookStoreError::Db(db) => db.into(),
            WebhookStoreError::Crypto(c) => DashboardError::Internal(c.into()),
        }
    }
}

struct SecretRow {
    status: &'static str,
    created: Stamp,
    expires: String,
    /// The value, only on the page a reveal answers.
    value: Option<String>,
}

#[derive(Template)]
#[template(path = "webhooks.html")]
struct WebhooksPage {
    nav: Option<Nav>,
    csrf: String,
    url: Option<String>,
    health: HealthView,
    secrets: Vec<SecretRow>,
    revealed: bool,
    grace_hours: u64,
}

async fn page(
    state: &AppState,
    session: &Session,
    reveal: bool,
) -> Result<HttpResponse, DashboardError> {
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let endpoint = endpoints::get(&client, session.account()).await?;
    let url = endpoint.as_ref().map(|e| e.url.clone());
    let none = Health::default();
    let h = endpoint.as_ref().map_or(&none, |e| &e.health);
    let health = HealthView {
        state: h.state.as_str(),
        disabled_reason: h.disabled_reason.map(|r| r.as_str()),
        failing_since: stamp_or_dash(h.failing_since),
        last_success: stamp_or_dash(h.last_success_at),
        last_failure: h.last_failure.as_ref().map(|f| {
            let status = f.status_code.map_or(String::new(), |c| format!("{c}: "));
            FailureRow {
                at: Stamp(f.at).to_string(),
                what: format!("{status}{}", f.error),
            }
        }),
        disable_at: stamp_or_dash(h.disable_at(&state.health)),
        held: deliveries::held_count(&client, session.account()).await?,
        can_pause: matches!(h.state, EndpointState::Active | EndpointState::Failing),
        paused: h.state == EndpointState::Paused,
        disabled: h.state == EndpointState::Disabled,
    };
    let secrets = webhooks::signing_secrets(&client, &state.encryption_key, session.account())
        .await?
        .into_iter()
        .map(|SigningSecret { meta, secret }| SecretRow {
            status: meta.status().as_str(),
            created: Stamp(meta.created_at),
            expires: stamp_or_dash(meta.expires_at),
            value: reveal.then_some(secret),
        })
        .collect();
    render(&WebhooksPage {
        nav: Some(session.nav("webhooks")),
        csrf: session.csrf.clone(),
        url,
        health,
        secrets,
        revealed: reveal,
        grace_hours: ROTATION_GRACE_HOURS,
    })
}

async fn show(
    state: web::Data<AppState>,
    session: Session,
) -> Result<HttpResponse, DashboardError> {
    page(&state, &session, false).await
}

/// Answers with the values shown, on this one page (a POST, so the values are in no URL and
/// no history entry a reload repeats silently).
async fn reveal(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    page(&state, &posted.session, true).await
}

async fn set_url(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let raw = posted
        .fields
        .get("url")
        .ok_or_else(|| DashboardError::BadRequest("Enter the webhook URL.".to_owned()))?;
    let checked = state
        .url_guard
        .check(raw, UrlUse::Webhook)
        .await
        .map_err(|e| DashboardError::BadRequest(format!("The URL was refused: {e}.")))?;
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let (account, actor) = (posted.session.account(), posted.session.actor());
    webhooks::set_url(&tx, account, actor, checked.url.as_str()).await?;
    tx.commit().await?;
    Ok(see_other("/webhooks"))
}

async fn clear_url(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    webhooks::clear_url(&tx, posted.session.account(), posted.session.actor()).await?;
    tx.commit().await?;
    Ok(see_other("/webhooks"))
}

async fn rotate(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    let grace = Duration::from_secs(ROTATION_GRACE_HOURS * 3600);
    let (account, actor) = (posted.session.account(), posted.session.actor());
    webhooks::rotate(&tx, &state.encryption_key, account, actor, grace).await?;
    tx.commit().await.map_err(anyhow::Error::from)?;
    tracing::info!(account = %posted.session.account(), "Webhook secret rotated from the dashboard");
    Ok(see_other("/webhooks"))
}

/// Carries out `request` on the account's URL and returns to the page; a refusal is shown as
/// the error page says it.
async fn carry_out(
    state: &AppState,
    posted: &Posted,
    request: Request,
) -> Result<HttpResponse, DashboardError> {
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let (account, actor) = (posted.session.account(), posted.session.actor());
    let (_, change) = endpoints::request(&tx, account, actor, request, &state.health)
        .await?
        .map_err(|refused| match refused {
            Refused::NoUrl => DashboardError::BadRequest("Save a webhook URL first.".to_owned()),
            Refused::Conflict(why) => DashboardError::BadRequest(format!("Refused: {why}.")),
        })?;
    tx.commit().await?;
    if let Some(change) = change {
        telemetry::count_endpoint_change(change.to);
    }
    Ok(see_other("/webhooks"))
}

async fn pause(state: web::Data<AppState>, posted: Posted) -> Result<HttpResponse, DashboardError> {
    carry_out(&state, &posted, Request::Pause).await
}

async fn resume(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    carry_out(&state, &posted, Request::Resume).await
}

async fn disable(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    carry_out(&state, &posted, Request::Disable).await
}

/// Enables the URL; the form's `replay` is `held` (send the held deliveries) or `none`.
async fn enable(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let replay = match posted.fields.get("replay") {
        Some("held") => true,
        Some("none") => false,
        _ => {
            return Err(DashboardError::BadRequest(
                "Choose whether to send the held deliveries.".to_owned(),
            ))
        }
    };
    carry_out(&state, &posted, Request::Enable { replay }).await
}

/// Queues a signed test send (`ping`) and opens the delivery log, where it shows.
async fn test(state: web::Data<AppState>, posted: Posted) -> Result<HttpResponse, DashboardError> {
    let client = state.pool.get().await?;
    endpoints::send_test(&client, posted.session.account())
        .await?
        .ok_or_else(|| DashboardError::BadRequest("Save a webhook URL first.".to_owned()))?;
    Ok(see_other("/deliveries"))
}
