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
    cursor,
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
                    verdict: verdict(job),
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

/// A model score of a job, as the page shows it.
#[derive(Debug, PartialEq)]
struct ScoreRow {
    name: String,
    /// From 0 to 1.
    value: f64,
    /// The value with two decimals.
    shown: String,
}

/// The rows of a job's `scores` (an object of name to number), by name; anything that is not
/// a number is left out.
fn score_rows(scores: Option<&serde_json::Value>) -> Vec<ScoreRow> {
    let Some(serde_json::Value::Object(scores)) = scores else {
        return Vec::new();
    };
    let mut rows: Vec<ScoreRow> = scores
        .iter()
        .filter_map(|(name, value)| {
            value.as_f64().map(|value| ScoreRow {
                name: name.clone(),
                value,
                shown: format!("{value:.2}"),
            })
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    rows
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
    scores: Vec<ScoreRow>,
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
    floor: uuid::Uuid,
) -> Result<Job, DashboardError> {
    let id: JobId = raw.parse().map_err(|_| DashboardError::NotFound)?;
    jobs::get(client, session.account(), id, floor)
        .await?
        .ok_or(DashboardError::NotFound)
}

async fn delivery_of(
    client: &deadpool_postgres::Object,
    session: &Session,
    job: JobId,
    floor: uuid::Uuid,
) -> Result<Option<Delivery>, DashboardError> {
    let filter = Filter {
        job_id: Some(job),
        floor,
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
    let floor = state.floor();
    let job = job_of(&client, &session, &path, floor).await?;
    let delivery = delivery_of(&client, &session, job.id, floor).await?;
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
        scores: score_rows(job.scores.as_ref()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_listed_by_name_and_non_numbers_left_out() {
        let scores = serde_json::json!({"violence": 0.126, "harassment": 0.9, "note": "x"});
        let rows = score_rows(Some(&scores));
        assert_eq!(
            rows,
            [
                ScoreRow {
                    name: "harassment".to_owned(),
                    value: 0.9,
                    shown: "0.90".to_owned()
                },
                ScoreRow {
                    name: "violence".to_owned(),
                    value: 0.126,
                    shown: "0.13".to_owned()
                },
            ]
        );
        assert!(score_rows(None).is_empty());
        assert!(score_rows(Some(&serde_json::json!([0.5]))).is_empty());
    }
}
