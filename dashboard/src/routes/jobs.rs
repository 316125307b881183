//! Jobs: the list (filters and page in the URL) and one job's detail with its webhook
//! delivery and every attempt (its resend is the delivery log's, in `webhooks`).

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    db::{
        delivery_log::{self, Attempt, Delivery, Filter},
        jobs::{self, Job, Search},
    },
    domain::{JobId, JobStatus, Modality},
};
use serde::Deserialize;
use time::{macros::format_description, Date, Duration, OffsetDateTime};

use crate::{
    error::DashboardError,
    nav::Nav,
    pages::{render, stamp_or_dash, Stamp},
    session::Session,
    state::AppState,
};

/// Jobs per page.
const PAGE_SIZE: i64 = 25;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/jobs", web::get().to(list))
        .route("/jobs/{id}", web::get().to(detail));
}

/// The list's query string: every filter and the page, so a link or a reload shows the same.
#[derive(Debug, Default, Deserialize)]
struct ListQuery {
    status: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    from: Option<String>,
    until: Option<String>,
    page: Option<u32>,
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
        })
    }

    /// The query string of page `page` with the same filters.
    fn with_page(&self, page: u32) -> String {
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
        out.append_pair("page", &page.to_string());
        out.finish()
    }
}

fn blank_to_none(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

fn parse_day(raw: &str) -> Result<OffsetDateTime, String> {
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
    page: u32,
    previous: Option<String>,
    next: Option<String>,
    filtered: bool,
}

fn verdict(job: &Job) -> &'static str {
    match job.is_prohibited {
        Some(true) => "prohibited",
        Some(false) => "allowed",
        None => "",
    }
}

async fn list(
    state: web::Data<AppState>,
    session: Session,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, DashboardError> {
    let page = query.page.unwrap_or(1).max(1);
    let (rows, more, error) = match query.search() {
        Ok(search) => {
            let client = state.pool.get().await.map_err(anyhow::Error::from)?;
            let offset = i64::from(page - 1) * PAGE_SIZE;
            let mut jobs =
                jobs::search(&client, session.account(), &search, offset, PAGE_SIZE + 1).await?;
            let more = jobs.len() > usize::try_from(PAGE_SIZE).unwrap_or(usize::MAX);
            jobs.truncate(usize::try_from(PAGE_SIZE).unwrap_or(usize::MAX));
            let rows = jobs
                .iter()
                .map(|job| JobRow {
                    id: job.id,
                    kind: job.kind.clone(),
                    status: job.status.as_str(),
                    verdict: verdict(job),
                    created: Stamp(job.created_at),
                })
                .collect();
            (rows, more, None)
        }
        Err(error) => (Vec::new(), false, Some(error)),
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
        page,
        previous: (page > 1).then(|| query.with_page(page - 1)),
        next: more.then(|| query.with_page(page + 1)),
        filtered: [&query.status, &query.kind, &query.from, &query.until]
            .into_iter()
            .any(|v| blank_to_none(v).is_some()),
    })
}

/// An attempt as the page shows it.
struct AttemptRow {
    attempt: i32,
    started: Stamp,
    duration_ms: i32,
    status_code: String,
    error: String,
    response_excerpt: String,
}

impl From<Attempt> for AttemptRow {
    fn from(a: Attempt) -> Self {
        Self {
            attempt: a.attempt,
            started: Stamp(a.started_at),
            duration_ms: a.duration_ms,
            status_code: a.status_code.map(|c| c.to_string()).unwrap_or_default(),
            error: a.error.unwrap_or_default(),
            response_excerpt: a.response_excerpt.unwrap_or_default(),
        }
    }
}

#[derive(Template)]
#[template(path = "job.html")]
struct JobPage {
    nav: Option<Nav>,
    csrf: String,
    job: Job,
    status: &'static str,
    verdict: &'static str,
    created: Stamp,
    completed: String,
    categories: Option<String>,
    error_code: String,
    delivery: Option<Delivery>,
    delivery_state: &'static str,
    next_attempt: String,
    attempts: Vec<AttemptRow>,
}

/// The job of the path if it is the account's: another account's is a 404, like none.
async fn job_of(
    client: &deadpool_postgres::Object,
    session: &Session,
    raw: &str,
) -> Result<Job, DashboardError> {
    let id: JobId = raw.parse().map_err(|_| DashboardError::NotFound)?;
    jobs::get(client, session.account(), id)
        .await?
        .ok_or(DashboardError::NotFound)
}

async fn delivery_of(
    client: &deadpool_postgres::Object,
    session: &Session,
    job: JobId,
) -> Result<Option<Delivery>, DashboardError> {
    let filter = Filter {
        job_id: Some(job),
        ..Filter::default()
    };
    Ok(
        delivery_log::list(client, session.account(), &filter, None, 1)
            .await?
            .into_iter()
            .next(),
    )
}

async fn detail(
    state: web::Data<AppState>,
    session: Session,
    path: web::Path<String>,
) -> Result<HttpResponse, DashboardError> {
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let job = job_of(&client, &session, &path).await?;
    let delivery = delivery_of(&client, &session, job.id).await?;
    let attempts = match &delivery {
        Some(d) => delivery_log::attempts(&client, d.id).await?,
        None => Vec::new(),
    };
    render(&JobPage {
        nav: Some(session.nav("jobs")),
        csrf: session.csrf.clone(),
        status: job.status.as_str(),
        verdict: verdict(&job),
        created: Stamp(job.created_at),
        completed: stamp_or_dash(job.completed_at),
        categories: job
            .categories
            .as_ref()
            .and_then(|c| serde_json::to_string_pretty(c).ok()),
        error_code: job
            .error_code
            .map(|c| c.as_str().to_owned())
            .unwrap_or_default(),
        delivery_state: delivery.as_ref().map_or("", |d| d.state.as_str()),
        next_attempt: stamp_or_dash(delivery.as_ref().and_then(|d| d.next_attempt_at)),
        delivery,
        attempts: attempts.into_iter().map(AttemptRow::from).collect(),
        job,
    })
}
