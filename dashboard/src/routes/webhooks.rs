//! Webhook settings: the global URL, the signing secrets (listed, revealed on request,
//! rotated), and the delivery log with resend and recover.

use std::time::Duration;

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    clock,
    db::{
        delivery_log::{self, Delivery, Filter, Resend},
        webhooks::{self, SigningSecret, WebhookStoreError, ROTATION_GRACE_HOURS},
    },
    domain::DeliveryId,
    url_guard::UrlUse,
};
use time::{macros::format_description, PrimitiveDateTime};

use crate::{
    error::DashboardError,
    form::{Fields, Posted},
    nav::Nav,
    pages::{render, see_other, stamp_or_dash, Stamp},
    session::Session,
    state::AppState,
};

/// Deliveries shown in the log.
const LOG_LIMIT: i64 = 50;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/webhooks", web::get().to(show))
        .route("/webhooks/url", web::post().to(set_url))
        .route("/webhooks/url/clear", web::post().to(clear_url))
        .route("/webhooks/secrets/reveal", web::post().to(reveal))
        .route("/webhooks/secrets/rotate", web::post().to(rotate))
        .route("/webhooks/recover", web::post().to(recover))
        .route("/deliveries/{id}/resend", web::post().to(resend));
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

struct DeliveryRow {
    delivery: Delivery,
    state: &'static str,
    created: Stamp,
    finished: String,
}

#[derive(Template)]
#[template(path = "webhooks.html")]
struct WebhooksPage {
    nav: Option<Nav>,
    csrf: String,
    url: Option<String>,
    secrets: Vec<SecretRow>,
    revealed: bool,
    recovered: Option<i64>,
    grace_hours: u64,
    deliveries: Vec<DeliveryRow>,
}

/// The page's query string: how many deliveries a recover just restarted.
#[derive(Debug, Default, serde::Deserialize)]
struct Shown {
    recovered: Option<i64>,
}

async fn page(
    state: &AppState,
    session: &Session,
    reveal: bool,
    recovered: Option<i64>,
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
    let deliveries = delivery_log::list(
        &client,
        session.account(),
        &Filter::default(),
        None,
        LOG_LIMIT,
    )
    .await?
    .into_iter()
    .map(|delivery| DeliveryRow {
        state: delivery.state.as_str(),
        created: Stamp(delivery.created_at),
        finished: stamp_or_dash(delivery.finished_at),
        delivery,
    })
    .collect();
    render(&WebhooksPage {
        nav: Some(session.nav("webhooks")),
        csrf: session.csrf.clone(),
        url,
        secrets,
        revealed: reveal,
        recovered,
        grace_hours: ROTATION_GRACE_HOURS,
        deliveries,
    })
}

async fn show(
    state: web::Data<AppState>,
    session: Session,
    shown: web::Query<Shown>,
) -> Result<HttpResponse, DashboardError> {
    page(&state, &session, false, shown.recovered).await
}

/// Answers with the values shown, on this one page (a POST, so the values are in no URL and
/// no history entry a reload repeats silently).
async fn reveal(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    page(&state, &posted.session, true, None).await
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
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    webhooks::set_url(&client, posted.session.account(), checked.url.as_str()).await?;
    Ok(see_other("/webhooks"))
}

async fn clear_url(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    webhooks::clear_url(&client, posted.session.account()).await?;
    Ok(see_other("/webhooks"))
}

async fn rotate(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    let grace = Duration::from_secs(ROTATION_GRACE_HOURS * 3600);
    webhooks::rotate(&tx, &state.encryption_key, posted.session.account(), grace).await?;
    tx.commit().await.map_err(anyhow::Error::from)?;
    tracing::info!(account = %posted.session.account(), "Webhook secret rotated from the dashboard");
    Ok(see_other("/webhooks"))
}

/// A UTC date-time of the recover form (`datetime-local` sends no zone).
fn instant(fields: &Fields, name: &str) -> Result<Option<time::OffsetDateTime>, DashboardError> {
    fields
        .get(name)
        .map(|raw| {
            PrimitiveDateTime::parse(
                raw,
                format_description!("[year]-[month]-[day]T[hour]:[minute]"),
            )
            .or_else(|_| {
                PrimitiveDateTime::parse(
                    raw,
                    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]"),
                )
            })
            .map(PrimitiveDateTime::assume_utc)
            .map_err(|_| DashboardError::BadRequest(format!("{raw:?} is not a date and time.")))
        })
        .transpose()
}

async fn recover(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let since = instant(&posted.fields, "since")?.ok_or_else(|| {
        DashboardError::BadRequest("Enter when the window to recover starts.".to_owned())
    })?;
    let until = instant(&posted.fields, "until")?.unwrap_or_else(clock::now);
    if until <= since {
        return Err(DashboardError::BadRequest(
            "The window must end after it starts.".to_owned(),
        ));
    }
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let count =
        delivery_log::request_recover(&client, posted.session.account(), since, until).await?;
    tracing::info!(account = %posted.session.account(), count, "Deliveries recovered from the dashboard");
    Ok(see_other(&format!("/webhooks?recovered={count}")))
}

async fn resend(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let id: DeliveryId = path.parse().map_err(|_| DashboardError::NotFound)?;
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    match delivery_log::request_resend(&client, posted.session.account(), id).await? {
        Resend::Requested(delivery) => Ok(see_other(&format!("/jobs/{}", delivery.job_id))),
        Resend::StillPending => Err(DashboardError::BadRequest(
            "This delivery is still pending: its schedule is running. Resend it once it has \
             finished."
                .to_owned(),
        )),
        Resend::NotFound => Err(DashboardError::NotFound),
    }
}
