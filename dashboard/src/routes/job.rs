//! One job's page: its result, reason, categories, scores and error; its review and every
//! revision of its decision (`job_decisions`, or the model's decision on the job itself when
//! no person has decided it); and each of its webhook deliveries (`job.completed`,
//! `job.revised`, `appeal.decided`) with every attempt (their resend is the delivery log's, in
//! `deliveries`). Another account's job is a 404.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    db::{
        delivery_log::{self, Attempt, Delivery, Filter},
        job_decisions::{self, DecisionRow},
        jobs::{self, Job},
        GenericClient,
    },
    domain::{ActorType, DecidedBy, JobId},
};
use uuid::Uuid;

use crate::{
    actors,
    error::DashboardError,
    job_view::{category_flags, score_rows, verdict, ScoreRow},
    nav::Nav,
    pages::{render, stamp_or_dash, Stamp},
    session::Session,
    state::AppState,
};

/// The most deliveries of one job shown (a job has one, and two more per decision at most).
const DELIVERIES_SHOWN: i64 = 100;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/jobs/{id}", web::get().to(detail));
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

/// A delivery of the job with its attempts.
struct DeliveryView {
    delivery: Delivery,
    event: &'static str,
    state: &'static str,
    created: Stamp,
    next_attempt: String,
    attempts: Vec<AttemptRow>,
}

/// A revision of the job's decision.
struct RevisionRow {
    revision: i32,
    decided_by: &'static str,
    verdict: &'static str,
    reason: String,
    /// The categories set, comma-separated.
    categories: String,
    note: String,
    /// Who: `model`, or the reviewer's type and name.
    reviewer: String,
    at: String,
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
    /// `pending`, `decided`, or empty when the job never went to review.
    review_state: &'static str,
    review_reasons: String,
    revisions: Vec<RevisionRow>,
    deliveries: Vec<DeliveryView>,
}

/// The job of the path if it is the account's: another account's is a 404, like none.
async fn job_of(
    client: &impl GenericClient,
    session: &Session,
    raw: &str,
    floor: uuid::Uuid,
) -> Result<Job, DashboardError> {
    let id: JobId = raw.parse().map_err(|_| DashboardError::NotFound)?;
    jobs::get(client, session.account(), id, floor)
        .await?
        .ok_or(DashboardError::NotFound)
}

/// Every delivery of `job`, oldest first, with its attempts.
async fn deliveries_of(
    client: &impl GenericClient,
    session: &Session,
    job: JobId,
    floor: uuid::Uuid,
) -> Result<Vec<DeliveryView>, DashboardError> {
    let filter = Filter {
        job_id: Some(job),
        floor,
        ..Filter::default()
    };
    let mut deliveries =
        delivery_log::list(client, session.account(), &filter, None, DELIVERIES_SHOWN).await?;
    deliveries.reverse();
    let mut views = Vec::with_capacity(deliveries.len());
    for delivery in deliveries {
        let attempts = delivery_log::attempts(client, delivery.id).await?;
        views.push(DeliveryView {
            event: delivery.event.as_str(),
            state: delivery.state.as_str(),
            created: Stamp(delivery.created_at),
            next_attempt: stamp_or_dash(delivery.next_attempt_at),
            attempts: attempts.into_iter().map(AttemptRow::from).collect(),
            delivery,
        });
    }
    Ok(views)
}

/// The categories `categories` sets, comma-separated (`none` when it sets none).
fn set_categories(categories: Option<&serde_json::Value>) -> String {
    let set: Vec<String> = category_flags(categories)
        .into_iter()
        .filter(|f| f.value)
        .map(|f| f.name)
        .collect();
    if set.is_empty() {
        "none".to_owned()
    } else {
        set.join(", ")
    }
}

/// Every revision of `job`'s decision, oldest first: the stored ones, or, when no person has
/// decided it, the model's decision on the job itself (none while it is undecided).
async fn revisions_of(
    client: &impl GenericClient,
    session: &Session,
    job: &Job,
) -> Result<Vec<RevisionRow>, DashboardError> {
    let mut stored = job_decisions::list(client, job.id).await?;
    if stored.is_empty() {
        let Some(is_prohibited) = job.is_prohibited else {
            return Ok(Vec::new());
        };
        stored.push(DecisionRow {
            revision: 0,
            decided_by: DecidedBy::Model,
            is_prohibited,
            reason: job.reason.clone(),
            categories: job.categories.clone(),
            note: None,
            reviewer: None,
            decided_at: job.completed_at.unwrap_or(job.updated_at),
        });
    }
    let names: HashMap<Uuid, String> = actors::names(
        client,
        session.account(),
        stored.iter().filter_map(|d| d.reviewer),
    )
    .await?;
    Ok(stored
        .into_iter()
        .map(|d| RevisionRow {
            revision: d.revision,
            decided_by: d.decided_by.as_str(),
            verdict: verdict(Some(d.is_prohibited)),
            reason: d.reason.unwrap_or_default(),
            categories: set_categories(d.categories.as_ref()),
            note: d.note.unwrap_or_default(),
            reviewer: match d.reviewer {
                None => "model".to_owned(),
                Some((kind, id)) => {
                    let name = names.get(&id).cloned().unwrap_or_else(|| id.to_string());
                    match kind {
                        ActorType::Key => format!("key {name}"),
                        ActorType::User | ActorType::Operator => name,
                    }
                }
            },
            at: Stamp(d.decided_at).to_string(),
        })
        .collect())
}

async fn detail(
    state: web::Data<AppState>,
    session: Session,
    path: web::Path<String>,
) -> Result<HttpResponse, DashboardError> {
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let floor = state.floor();
    let job = job_of(&client, &session, &path, floor).await?;
    let deliveries = deliveries_of(&client, &session, job.id, floor).await?;
    let revisions = revisions_of(&client, &session, &job).await?;
    render(&JobPage {
        nav: Some(session.nav("jobs")),
        csrf: session.csrf.clone(),
        status: job.status.as_str(),
        verdict: verdict(job.is_prohibited),
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
        review_state: job.review_state.map_or("", |s| s.as_str()),
        review_reasons: job
            .review_reasons
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        revisions,
        deliveries,
        job,
    })
}
