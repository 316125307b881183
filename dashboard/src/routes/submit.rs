//! Submitting content from the dashboard: a prompt, or the URL of an image, video or audio
//! file. Such a job has no `api_key_id` (no key was used); it is stored and enqueued exactly
//! as the api does, and its webhook goes to the account's global URL.

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    db::jobs::{self, NewJob},
    domain::{JobId, Modality},
    url_guard::UrlUse,
};

use crate::{
    error::DashboardError,
    form::Posted,
    nav::Nav,
    pages::{render, see_other},
    session::Session,
    state::AppState,
};

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/submit", web::get().to(form))
        .route("/submit", web::post().to(submit));
}

#[derive(Template)]
#[template(path = "submit.html")]
struct SubmitPage {
    nav: Option<Nav>,
    csrf: String,
}

async fn form(session: Session) -> Result<HttpResponse, DashboardError> {
    render(&SubmitPage {
        nav: Some(session.nav("submit")),
        csrf: session.csrf.clone(),
    })
}

async fn submit(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let Posted { session, fields } = posted;
    let modality: Modality = fields
        .get("type")
        .unwrap_or("text")
        .parse()
        .map_err(|_| DashboardError::BadRequest("Choose what to submit.".to_owned()))?;
    let content = match modality {
        Modality::Text => {
            let text = fields.get("text").ok_or_else(|| {
                DashboardError::BadRequest("Enter the prompt to moderate.".to_owned())
            })?;
            if text.contains('\0') {
                return Err(DashboardError::BadRequest(
                    "The prompt must not contain NUL characters.".to_owned(),
                ));
            }
            text.to_owned()
        }
        media => {
            let url = fields.get("url").ok_or_else(|| {
                DashboardError::BadRequest(format!("Enter the URL of the {media}."))
            })?;
            state
                .url_guard
                .check(url, UrlUse::Media)
                .await
                .map_err(|err| DashboardError::BadRequest(format!("The URL was refused: {err}.")))?
                .url
                .to_string()
        }
    };
    let id = JobId::new();
    let job = NewJob {
        id,
        account_id: session.account(),
        api_key_id: None,
        modality,
        content,
        messages: None,
        webhook_url: None,
        idempotency: None,
    };
    {
        let client = state.pool.get().await.map_err(anyhow::Error::from)?;
        jobs::insert_many(&**client, std::slice::from_ref(&job)).await?;
    }
    if let Err(err) = state.queue.enqueue_many(modality, &[id]).await {
        // Stored: the relay enqueues it once Redis is back.
        tracing::warn!(error = %err, job = %id, "Could not enqueue a dashboard submission; the relay enqueues it later");
        let client = state.pool.get().await.map_err(anyhow::Error::from)?;
        jobs::mark_not_enqueued(&client, &[id]).await?;
    }
    tracing::info!(job = %id, account = %session.account(), %modality, "Job submitted from the dashboard");
    Ok(see_other(&format!("/jobs/{id}")))
}
