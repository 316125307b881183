//! Webhook settings: the global URL and the signing secrets (listed, revealed on request,
//! rotated). The delivery log is `deliveries`.

use std::time::Duration;

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    db::webhooks::{self, SigningSecret, WebhookStoreError, ROTATION_GRACE_HOURS},
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
        .route("/webhooks/secrets/rotate", web::post().to(rotate));
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
    let url = webhooks::get_url(&client, session.account()).await?;
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
