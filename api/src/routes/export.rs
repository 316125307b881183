//! `GET /api/v1/jobs/export?from=&to=`: the caller's jobs as CSV, streamed by
//! [`moderation_shared::export`] (which the dashboard's download shares).
//!
//! An export must not starve the service: it takes a slot ([`ExportSlots`]: a few in total
//! and fewer per account, one more is 429), reads on the exports' own pool, never the main
//! one, and a chunk the client has not taken within the write deadline cuts the stream and
//! gives the connection and the slot back at once, whether or not the client ever reads again.

use actix_web::{
    http::header::{self, ContentDisposition, DispositionParam, DispositionType},
    web, HttpResponse,
};
pub use moderation_shared::export::parse_instant;
use moderation_shared::{
    clock,
    domain::AccountId,
    export::{self, Export},
};
use serde::Deserialize;
use tokio::sync::mpsc;
use utoipa::IntoParams;

use super::resource;
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    limits::exports::{ExportSlot, ExportSlots, RETRY_AFTER_SECS},
    state::AppState,
};

/// Registers the route under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/jobs/export").route(web::get().to(export)));
}

/// The query string: both bounds are required.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// Inclusive lower bound on `created_at`: an RFC 3339 instant or a `YYYY-MM-DD` date.
    #[param(required = true, nullable = false)]
    pub from: Option<String>,
    /// Exclusive upper bound on `created_at`, after `from` and at most 366 days later.
    #[param(required = true, nullable = false)]
    pub to: Option<String>,
}

/// Answers the CSV of the caller's jobs created in `[from, to)`.
#[utoipa::path(get, path = "/api/v1/jobs/export", operation_id = "export_jobs", tag = "jobs", params(ExportQuery),
    responses(
        (status = 200, description = "UTF-8 CSV with a byte-order mark and a header row, \
         ordered by `created_at`, streamed. Rows past retention are gone: a window starting \
         before the oldest kept instant holds the rows that still exist, and says so in \
         `x-retained-since`.", content_type = "text/csv", body = String,
         headers(("x-retained-since" = String, description = "Present when the window starts \
         before the oldest instant retention keeps (`APP_RETENTION_DAYS`): that instant \
         (RFC 3339, milliseconds); jobs before it are no longer held."))),
        (status = 400, description = "A bound is missing or unparsable, `from` is not before \
         `to`, or the window is over 366 days.", body = ErrorBody),
        (status = 429, description = "`RATE_LIMITED`: the account's rate limit is used up, the \
         source address is locked out after failed authentications, or the account (at most 2) \
         or the service (at most 4, per replica by default) already runs as many exports as it \
         may.", body = ErrorBody,
         headers(("retry-after" = u64, description = "Whole seconds to wait before retrying."))),
    ))]
pub async fn export(
    principal: Principal,
    query: web::Query<ExportQuery>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (from, to) = export::window(query.from.as_deref(), query.to.as_deref())
        .map_err(|e| ApiError::InvalidRequest(e.0))?;
    let slot = enter(&state.export_slots, principal.account_id)?;
    let client = state.export_pool.get().await?;
    let now = clock::now();
    let kept_since = state.retention.kept_since(now);
    let floor = state.retention.floor(now);
    let export = Export::start(client, principal.account_id, (from, to), floor, slot).await?;
    let (sender, receiver) = mpsc::channel(1);
    actix_web::rt::spawn(export.run(sender, state.export_settings.write_timeout));
    let mut response = HttpResponse::Ok();
    if from < kept_since {
        response.insert_header(("x-retained-since", clock::format_millis(kept_since)));
    }
    Ok(response
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

/// A slot for `account`, or 429 when it or the service runs as many exports as it may.
fn enter(slots: &ExportSlots, account: AccountId) -> Result<ExportSlot, ApiError> {
    slots
        .try_enter(account)
        .ok_or_else(|| ApiError::RateLimited {
            message: "too many exports are running; retry when one has finished".to_owned(),
            retry_after: RETRY_AFTER_SECS,
        })
}
