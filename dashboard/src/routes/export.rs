//! The CSV export download: the account's jobs created in a UTC date range, streamed with the
//! api's columns and bytes (`shared::export`). At most a few run at once on a replica
//! ([`crate::state::ExportPermits`]); one more is refused with 429.

use std::time::Duration;

use actix_web::{
    http::header::{self, ContentDisposition, DispositionParam, DispositionType},
    web, HttpResponse,
};
use askama::Template;
use moderation_shared::{
    clock,
    export::{self, Export},
};
use serde::Deserialize;
use time::macros::format_description;
use tokio::sync::mpsc;

use crate::{error::DashboardError, nav::Nav, pages::render, session::Session, state::AppState};

/// A chunk the browser leaves unread this long cuts the download.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/export", web::get().to(form))
        .route("/export/jobs.csv", web::get().to(download));
}

#[derive(Template)]
#[template(path = "export.html")]
struct ExportPage {
    nav: Option<Nav>,
    from: String,
    to: String,
}

async fn form(session: Session) -> Result<HttpResponse, DashboardError> {
    let today = clock::now().date();
    let day = format_description!("[year]-[month]-[day]");
    let shown = |d: time::Date| d.format(day).unwrap_or_default();
    render(&ExportPage {
        nav: Some(session.nav("export")),
        from: shown(today - time::Duration::days(30)),
        to: shown(today),
    })
}

/// The range: both UTC days, `to` included.
#[derive(Debug, Deserialize)]
struct Range {
    from: Option<String>,
    to: Option<String>,
}

async fn download(
    state: web::Data<AppState>,
    session: Session,
    range: web::Query<Range>,
) -> Result<HttpResponse, DashboardError> {
    // `to` names a day and includes it: the export's bound is the next midnight.
    let to = range
        .to
        .as_deref()
        .and_then(export::parse_instant)
        .map(|at| clock::format_millis(at + time::Duration::days(1)));
    let (from, to) = export::window(range.from.as_deref(), to.as_deref())
        .map_err(|e| DashboardError::BadRequest(format!("{}.", e.0)))?;
    let permit = state.exports.try_enter().ok_or_else(|| {
        DashboardError::Busy("Exports are running already; try again in a moment.".to_owned())
    })?;
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let floor = state.floor();
    let export = Export::start(client, session.account(), (from, to), floor, permit).await?;
    let (sender, receiver) = mpsc::channel(1);
    actix_web::rt::spawn(export.run(sender, WRITE_TIMEOUT));
    Ok(HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            header::CONTENT_DISPOSITION,
            ContentDisposition {
                disposition: DispositionType::Attachment,
                parameters: vec![DispositionParam::Filename("jobs.csv".to_owned())],
            },
        ))
        .streaming(export::body(receiver)))
}
