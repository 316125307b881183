//! The webhook delivery log: filters (status, job, since) and the page's cursor kept in the
//! URL, every page read from an index by `delivery_log::list` (the api's listing); a resend of
//! one delivery and a recover of every delivery abandoned in a window.

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    clock,
    db::delivery_log::{self, Delivery, Filter, Resend},
    domain::{DeliveryId, DeliveryState, JobId},
};
use serde::Deserialize;
use time::{macros::format_description, OffsetDateTime, PrimitiveDateTime};

use crate::{
    cursor,
    error::DashboardError,
    form::Posted,
    nav::Nav,
    pages::{render, see_other, stamp_or_dash, Stamp},
    session::Session,
    state::AppState,
};

/// Deliveries per page.
const PAGE_SIZE: i64 = 50;

/// Registers the routes (`recover` before `{id}`).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/deliveries", web::get().to(list))
        .route("/deliveries/recover", web::post().to(recover))
        .route("/deliveries/{id}/resend", web::post().to(resend));
}

/// The log's query string: every filter and where the page starts.
#[derive(Debug, Default, Deserialize)]
struct LogQuery {
    status: Option<String>,
    job_id: Option<String>,
    /// A UTC date and time (`datetime-local`).
    since: Option<String>,
    /// Where the page starts: the `next` cursor of the page before.
    after: Option<String>,
    /// How many deliveries a recover just restarted.
    recovered: Option<i64>,
}

fn blank_to_none(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// A UTC date and time as a `datetime-local` input sends it (no zone), with or without
/// seconds.
pub fn parse_instant(raw: &str) -> Result<OffsetDateTime, String> {
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
    .map_err(|_| format!("{raw:?} is not a date and time (YYYY-MM-DDTHH:MM, UTC)."))
}

impl LogQuery {
    /// The filter and the page's start, or why one is wrong.
    fn filter(&self) -> Result<(Filter, Option<delivery_log::Position>), String> {
        let states = blank_to_none(&self.status)
            .map(|s| {
                s.parse::<DeliveryState>()
                    .map_err(|_| format!("Unknown status {s:?}."))
            })
            .transpose()?
            .into_iter()
            .collect();
        let job_id = blank_to_none(&self.job_id)
            .map(|raw| {
                raw.parse()
                    .map(JobId)
                    .map_err(|_| format!("{raw:?} is not a job id (a UUID)."))
            })
            .transpose()?;
        let since = blank_to_none(&self.since).map(parse_instant).transpose()?;
        let after = blank_to_none(&self.after)
            .map(|raw| {
                cursor::decode(raw)
                    .map(|(at, id)| (at, DeliveryId(id)))
                    .ok_or_else(|| {
                        "This page link is broken: start from the first page.".to_owned()
                    })
            })
            .transpose()?;
        Ok((
            Filter {
                job_id,
                states,
                since,
                ..Filter::default()
            },
            after,
        ))
    }

    /// The query string of the same filters, starting after `after` when given.
    fn with_after(&self, after: Option<&str>) -> String {
        let mut out = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in [
            ("status", &self.status),
            ("job_id", &self.job_id),
            ("since", &self.since),
        ] {
            if let Some(value) = blank_to_none(value) {
                out.append_pair(name, value);
            }
        }
        if let Some(after) = after {
            out.append_pair("after", after);
        }
        out.finish()
    }

    fn filtered(&self) -> bool {
        [&self.status, &self.job_id, &self.since]
            .into_iter()
            .any(|v| blank_to_none(v).is_some())
    }
}

struct DeliveryRow {
    delivery: Delivery,
    state: &'static str,
    created: Stamp,
    finished: String,
}

/// An option of the status select.
struct Choice {
    value: &'static str,
    selected: bool,
}

#[derive(Template)]
#[template(path = "deliveries.html")]
struct DeliveriesPage {
    nav: Option<Nav>,
    csrf: String,
    error: Option<String>,
    recovered: Option<i64>,
    statuses: Vec<Choice>,
    job_id: String,
    since: String,
    rows: Vec<DeliveryRow>,
    /// This page's own query string, where a resend comes back to.
    here: String,
    first: Option<String>,
    next: Option<String>,
    filtered: bool,
}

async fn list(
    state: web::Data<AppState>,
    session: Session,
    query: web::Query<LogQuery>,
) -> Result<HttpResponse, DashboardError> {
    let page_size = usize::try_from(PAGE_SIZE).unwrap_or(usize::MAX);
    let (rows, next, error) = match query.filter() {
        Ok((mut filter, after)) => {
            filter.floor = state.floor();
            let client = state.pool.get().await.map_err(anyhow::Error::from)?;
            // One more than shown tells whether another page exists.
            let mut found =
                delivery_log::list(&client, session.account(), &filter, after, PAGE_SIZE + 1)
                    .await?;
            let next = (found.len() > page_size)
                .then(|| {
                    found.truncate(page_size);
                    found
                        .last()
                        .map(|d| query.with_after(Some(&cursor::encode(d.created_at, d.id.0))))
                })
                .flatten();
            let rows = found
                .into_iter()
                .map(|delivery| DeliveryRow {
                    state: delivery.state.as_str(),
                    created: Stamp(delivery.created_at),
                    finished: stamp_or_dash(delivery.finished_at),
                    delivery,
                })
                .collect();
            (rows, next, None)
        }
        Err(error) => (Vec::new(), None, Some(error)),
    };
    let status = blank_to_none(&query.status);
    render(&DeliveriesPage {
        nav: Some(session.nav("webhooks")),
        csrf: session.csrf.clone(),
        error,
        recovered: query.recovered,
        statuses: DeliveryState::ALL
            .iter()
            .map(|s| Choice {
                value: s.as_str(),
                selected: status == Some(s.as_str()),
            })
            .collect(),
        job_id: blank_to_none(&query.job_id).unwrap_or_default().to_owned(),
        since: blank_to_none(&query.since).unwrap_or_default().to_owned(),
        rows,
        here: query.with_after(blank_to_none(&query.after)),
        first: blank_to_none(&query.after).map(|_| query.with_after(None)),
        next,
        filtered: query.filtered(),
    })
}

async fn recover(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let instant = |name: &str| {
        posted
            .fields
            .get(name)
            .map(parse_instant)
            .transpose()
            .map_err(DashboardError::BadRequest)
    };
    let since = instant("since")?.ok_or_else(|| {
        DashboardError::BadRequest("Enter when the window to recover starts.".to_owned())
    })?;
    let until = instant("until")?.unwrap_or_else(clock::now);
    if until <= since {
        return Err(DashboardError::BadRequest(
            "The window must end after it starts.".to_owned(),
        ));
    }
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let count =
        delivery_log::request_recover(&client, posted.session.account(), since, until).await?;
    tracing::info!(account = %posted.session.account(), count, "Deliveries recovered from the dashboard");
    Ok(see_other(&format!("/deliveries?recovered={count}")))
}

/// Where a resend form comes back to: the log page it was on (its `back` field, a query
/// string of the log), else the job's page.
fn back_to(back: Option<&str>, job: Option<JobId>) -> String {
    match (back, job) {
        (Some(""), _) | (None, None) => "/deliveries".to_owned(),
        (Some(query), _) if !query.contains(['/', '\\', '#']) => format!("/deliveries?{query}"),
        (_, Some(job)) => format!("/jobs/{job}"),
        (Some(_), None) => "/deliveries".to_owned(),
    }
}

async fn resend(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let id: DeliveryId = path.parse().map_err(|_| DashboardError::NotFound)?;
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let (account, floor) = (posted.session.account(), state.floor());
    match delivery_log::request_resend(&client, account, id, floor).await? {
        Resend::Requested(delivery) => Ok(see_other(&back_to(
            posted.fields.all("back").next(),
            delivery.job_id,
        ))),
        Resend::StillPending => Err(DashboardError::BadRequest(
            "This delivery is still pending: its schedule is running. Resend it once it has \
             finished."
                .to_owned(),
        )),
        Resend::NotFound => Err(DashboardError::NotFound),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resend_goes_back_to_the_log_page_or_the_job() {
        let id = JobId(uuid::Uuid::nil());
        let job = Some(id);
        assert_eq!(
            back_to(Some("status=abandoned&after=abc"), job),
            "/deliveries?status=abandoned&after=abc"
        );
        assert_eq!(back_to(Some(""), job), "/deliveries");
        assert_eq!(back_to(Some("//evil.example/"), job), format!("/jobs/{id}"));
        assert_eq!(back_to(None, job), format!("/jobs/{id}"));
        assert_eq!(back_to(None, None), "/deliveries", "a ping has no job");
    }

    #[test]
    fn instants_are_utc_with_or_without_seconds() {
        assert_eq!(
            parse_instant("2026-11-23T10:05"),
            Ok(time::macros::datetime!(2026-11-23 10:05 UTC))
        );
        assert_eq!(
            parse_instant("2026-11-23T10:05:09"),
            Ok(time::macros::datetime!(2026-11-23 10:05:09 UTC))
        );
        assert!(parse_instant("yesterday").is_err());
    }
}
