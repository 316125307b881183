//! Jobs: the list, its filters and page in the URL (one job's page is `job`).

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    db::jobs::{self, Search},
    domain::{JobId, JobStatus, Modality},
};
use serde::Deserialize;
use time::{macros::format_description, Date, Duration, OffsetDateTime};

use crate::{
    cursor,
    error::DashboardError,
    job_view::verdict,
    nav::Nav,
    pages::{render, Stamp},
    session::Session,
    state::AppState,
};

/// Jobs per page.
const PAGE_SIZE: i64 = 25;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/jobs", web::get().to(list));
}

/// The list's query string: every filter and the page, so a link or a reload shows the same.
#[derive(Debug, Default, Deserialize)]
struct ListQuery {
    status: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    from: Option<String>,
    until: Option<String>,
    /// Where the page starts: the `next` cursor of the page before.
    after: Option<String>,
}

impl ListQuery {
    /// The search, or why a filter is wrong.
    fn search(&self) -> Result<Search, String> {
        let status = blank_to_none(&self.status)
            .map(|s| {
                s.parse::<JobStatus>()
                    .map_err(|_| format!("Unknown status {s:?}."))
            })
            .transpose()?;
        let kind = blank_to_none(&self.kind)
            .map(|k| {
                k.parse::<Modality>()
                    .map(|m| m.as_str().to_owned())
                    .map_err(|_| format!("Unknown type {k:?}."))
            })
            .transpose()?;
        let from = blank_to_none(&self.from).map(parse_day).transpose()?;
        // `until` names a day and includes it.
        let until = blank_to_none(&self.until)
            .map(|d| parse_day(d).map(|at| at + Duration::days(1)))
            .transpose()?;
        Ok(Search {
            status,
            kind,
            from,
            until,
            ..Search::default()
        })
    }

    /// The position the page starts after, or why the cursor is wrong.
    fn after(&self) -> Result<Option<jobs::Position>, String> {
        blank_to_none(&self.after)
            .map(|raw| {
                cursor::decode(raw)
                    .map(|(at, id)| (at, JobId(id)))
                    .ok_or_else(|| {
                        "This page link is broken: start from the first page.".to_owned()
                    })
            })
            .transpose()
    }

    /// The query string of the same filters, starting after `after` when given.
    fn with_after(&self, after: Option<&str>) -> String {
        let mut out = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in [
            ("status", &self.status),
            ("type", &self.kind),
            ("from", &self.from),
            ("until", &self.until),
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
}

fn blank_to_none(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// The start (midnight UTC) of a day typed as `YYYY-MM-DD`, or why it is not one.
pub fn parse_day(raw: &str) -> Result<OffsetDateTime, String> {
    Date::parse(raw, format_description!("[year]-[month]-[day]"))
        .map(|d| d.midnight().assume_utc())
        .map_err(|_| format!("{raw:?} is not a date (YYYY-MM-DD)."))
}

/// One row of the list.
struct JobRow {
    id: JobId,
    kind: String,
    status: &'static str,
    verdict: &'static str,
    created: Stamp,
}

/// An option of a filter's select.
struct Choice {
    value: &'static str,
    selected: bool,
}

#[derive(Template)]
#[template(path = "jobs.html")]
struct JobsPage {
    nav: Option<Nav>,
    error: Option<String>,
    statuses: Vec<Choice>,
    kinds: Vec<Choice>,
    from: String,
    until: String,
    rows: Vec<JobRow>,
    /// The first page with the same filters, when this is not it.
    first: Option<String>,
    next: Option<String>,
    filtered: bool,
}

async fn list(
    state: web::Data<AppState>,
    session: Session,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, DashboardError> {
    let page_size = usize::try_from(PAGE_SIZE).unwrap_or(usize::MAX);
    let (rows, next, error) = match query.search().and_then(|s| Ok((s, query.after()?))) {
        Ok((mut search, after)) => {
            search.floor = state.floor();
            let client = state.pool.get().await.map_err(anyhow::Error::from)?;
            // One more than shown tells whether another page exists.
            let mut jobs =
                jobs::search(&client, session.account(), &search, after, PAGE_SIZE + 1).await?;
            let next = (jobs.len() > page_size)
                .then(|| {
                    jobs.truncate(page_size);
                    jobs.last()
                        .map(|j| query.with_after(Some(&cursor::encode(j.created_at, j.id.0))))
                })
                .flatten();
            let rows = jobs
                .iter()
                .map(|job| JobRow {
                    id: job.id,
                    kind: job.kind.clone(),
                    status: job.status.as_str(),
                    verdict: verdict(job.is_prohibited),
                    created: Stamp(job.created_at),
                })
                .collect();
            (rows, next, None)
        }
        Err(error) => (Vec::new(), None, Some(error)),
    };
    let chosen = |value: &Option<String>, v: &str| blank_to_none(value) == Some(v);
    render(&JobsPage {
        nav: Some(session.nav("jobs")),
        error,
        statuses: JobStatus::ALL
            .iter()
            .map(|s| Choice {
                value: s.as_str(),
                selected: chosen(&query.status, s.as_str()),
            })
            .collect(),
        kinds: Modality::ALL
            .iter()
            .map(|m| Choice {
                value: m.as_str(),
                selected: chosen(&query.kind, m.as_str()),
            })
            .collect(),
        from: blank_to_none(&query.from).unwrap_or_default().to_owned(),
        until: blank_to_none(&query.until).unwrap_or_default().to_owned(),
        rows,
        first: blank_to_none(&query.after).map(|_| query.with_after(None)),
        next,
        filtered: [&query.status, &query.kind, &query.from, &query.until]
            .into_iter()
            .any(|v| blank_to_none(v).is_some()),
    })
}
