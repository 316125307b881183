//! A review item (contract 14, `review:decide`): for the user who holds it, its reasons, the
//! job's decision, scores, categories and content (media blurred and in grayscale until
//! revealed, video muted), the decision form (`Uphold`, `Overturn`) and `Release`; for
//! anyone else of the account, where it stands.
//!
//! Decisions and releases run `review::decide` and `review::release`, as the api's do, with
//! the user as reviewer, in one transaction; a refused one (a missing note, a claim lost, an
//! unknown category) is shown on the item's page with what was typed, and nothing changes.
//! The page allows the job's media origin, and only it, for images and media
//! (`headers::csp_with_media`): the reviewer's browser loads the media from its URL, without
//! a referrer.

use actix_web::{
    http::{
        header::{self, HeaderValue},
        StatusCode,
    },
    web, HttpResponse,
};
use askama::Template;
use moderation_shared::{
    db::{
        appeals::{self, Appeal},
        jobs::{self, Job},
        review_items::{self, ReviewItem},
        GenericClient,
    },
    domain::{ReviewItemId, Scope},
    review::{self, ReviewError},
    telemetry,
};
use serde::Deserialize;

use crate::{
    error::DashboardError,
    form::{Fields, Posted},
    headers::csp_with_media,
    job_view::{category_flags, score_rows, verdict, CategoryFlag, ScoreRow},
    nav::Nav,
    pages::{render_with, see_other, stamp_or_dash, Stamp},
    review_content::Content,
    review_form::{DecideForm, Outcome},
    session::Session,
    state::AppState,
};

use super::review::reasons;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/review/items/{id}", web::get().to(show))
        .route("/review/items/{id}/decide", web::post().to(decide))
        .route("/review/items/{id}/release", web::post().to(release));
}

/// `?reveal=1`: the media shown as it is (the `Reveal` button's form).
#[derive(Debug, Default, Deserialize)]
struct ItemQuery {
    reveal: Option<String>,
}

/// The item id of a path; anything else is no item.
fn item_id(raw: &str) -> Result<ReviewItemId, DashboardError> {
    raw.parse().map_err(|_| DashboardError::NotFound)
}

/// A refused step: why, its status, and the form as typed.
struct Refusal {
    message: String,
    status: StatusCode,
    form: Option<DecideForm>,
}

impl Refusal {
    /// The refusal of a `review` step; an error that is not one (no such item, the
    /// database) stays an error.
    fn of(err: ReviewError, form: Option<DecideForm>) -> Result<Self, DashboardError> {
        let (message, status) = match err {
            ReviewError::Conflict(message) => (message, StatusCode::CONFLICT),
            ReviewError::Invalid(message) => (message, StatusCode::BAD_REQUEST),
            ReviewError::NotFound(_) => return Err(DashboardError::NotFound),
            ReviewError::Db(err) => return Err(err.into()),
        };
        Ok(Self {
            message: format!("Refused: {message}."),
            status,
            form,
        })
    }
}

/// The appeal an item decides, as shown.
struct AppealView {
    reason: String,
    appeal_ref: String,
    created: Stamp,
}

#[derive(Template)]
#[template(path = "review_item.html")]
struct ItemPage {
    nav: Option<Nav>,
    csrf: String,
    item_id: ReviewItemId,
    job: Job,
    state: &'static str,
    reasons: String,
    created: Stamp,
    claim_expires: String,
    decided_at: String,
    /// Whether the user holds it: only then are the content and the forms shown.
    held: bool,
    appeal: Option<AppealView>,
    verdict: &'static str,
    categories: Vec<CategoryFlag>,
    scores: Vec<ScoreRow>,
    content: Option<Content>,
    /// Whether images and video are blurred (until `Reveal`, or for good by the user's
    /// setting).
    veiled: bool,
    /// Whether `Reveal` was pressed (the decision form keeps it).
    revealed: bool,
    form: DecideForm,
    error: Option<String>,
}

async fn show(
    state: web::Data<AppState>,
    session: Session,
    path: web::Path<String>,
    query: web::Query<ItemQuery>,
) -> Result<HttpResponse, DashboardError> {
    session.require(Scope::ReviewDecide)?;
    let id = item_id(&path)?;
    let revealed = query.reveal.is_some();
    page(&state, &session, id, revealed, None).await
}

/// The item's page, with a refused step shown on it.
async fn page(
    state: &AppState,
    session: &Session,
    id: ReviewItemId,
    revealed: bool,
    refused: Option<Refusal>,
) -> Result<HttpResponse, DashboardError> {
    let account = session.account();
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let floor = state.floor();
    let item = review_items::get(&client, account, id, floor)
        .await?
        .ok_or(DashboardError::NotFound)?;
    let job = jobs::get(&client, account, item.job_id, floor)
        .await?
        .ok_or(DashboardError::NotFound)?;
    let held = item.is_claimed_by(session.actor());
    let content = if held {
        jobs::content(&client, account, job.id, floor)
            .await?
            .map(|(text, messages)| Content::new(&job.kind, text, messages))
    } else {
        None
    };
    let appeal = if held {
        appeal_of(&client, session, &item, floor).await?
    } else {
        None
    };
    let blurs = state.preferences.blurs_media(session.user.id).await?;
    let (error, status, form) = match refused {
        Some(refused) => (Some(refused.message), refused.status, refused.form),
        None => (None, StatusCode::OK, None),
    };
    let categories = category_flags(job.categories.as_ref());
    let form =
        form.unwrap_or_else(|| DecideForm::filled(job.is_prohibited.unwrap_or(false), &categories));
    let media_origin = content
        .as_ref()
        .and_then(Content::media)
        .map(|m| m.origin.clone());
    let mut res = render_with(
        &ItemPage {
            nav: Some(session.nav("review")),
            csrf: session.csrf.clone(),
            item_id: item.id,
            state: item.state.as_str(),
            reasons: reasons(&item),
            created: Stamp(item.created_at),
            claim_expires: stamp_or_dash(item.claim_expires_at),
            decided_at: stamp_or_dash(item.decided_at),
            held,
            appeal,
            verdict: verdict(job.is_prohibited),
            categories,
            scores: score_rows(job.scores.as_ref()),
            content,
            veiled: blurs && !revealed,
            revealed,
            form,
            error,
            job,
        },
        status,
    )?;
    if let Some(origin) = media_origin {
        let policy =
            HeaderValue::from_str(&csp_with_media(&origin)).map_err(anyhow::Error::from)?;
        res.headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    Ok(res)
}

/// The appeal `item` decides, if it is one.
async fn appeal_of(
    client: &impl GenericClient,
    session: &Session,
    item: &ReviewItem,
    floor: uuid::Uuid,
) -> Result<Option<AppealView>, DashboardError> {
    let Some(id) = item.appeal_id else {
        return Ok(None);
    };
    let appeal: Option<Appeal> = appeals::get(client, session.account(), id, floor).await?;
    Ok(appeal.map(|a| AppealView {
        reason: a.reason,
        appeal_ref: a.appeal_ref.unwrap_or_default(),
        created: Stamp(a.created_at),
    }))
}

/// Whether the posted form came from a page whose media was revealed.
fn revealed(fields: &Fields) -> bool {
    fields.get("reveal").is_some()
}

/// Upholds or overturns the job with the form's note (and, to overturn, its result and
/// categories): a new revision of the job, by the user, with its webhooks and audit events;
/// then back to the queue.
async fn decide(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let Posted { session, fields } = posted;
    session.require(Scope::ReviewDecide)?;
    let id = item_id(&path)?;
    let account = session.account();
    let form = DecideForm::read(&fields);
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    // The item, then its job, as `review::decide` locks them: the form is read against the
    // decision the job has while it is decided.
    let floor = state.floor();
    let item = review_items::lock(&tx, account, id, floor)
        .await?
        .ok_or(DashboardError::NotFound)?;
    let job = jobs::lock(&tx, account, item.job_id, floor)
        .await?
        .ok_or(DashboardError::NotFound)?;
    let flags = category_flags(job.categories.as_ref());
    let input = Outcome::read(&fields)
        .and_then(|outcome| form.decision(outcome, job.is_prohibited.unwrap_or(false), &flags));
    let refused = match input {
        Err(message) => Refusal {
            message,
            status: StatusCode::BAD_REQUEST,
            form: Some(form),
        },
        Ok(input) => match review::decide(&tx, account, session.actor(), id, &input, floor).await {
            Ok(decided) => {
                tx.commit().await.map_err(anyhow::Error::from)?;
                telemetry::count_review_decision(decided.changed);
                return Ok(see_other(&format!("/review?decided={}", decided.job_id)));
            }
            Err(err) => Refusal::of(err, Some(form))?,
        },
    };
    drop(tx);
    drop(client);
    page(&state, &session, id, revealed(&fields), Some(refused)).await
}

/// Gives the item back to the queue, pending again; then back to the queue.
async fn release(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let Posted { session, fields } = posted;
    session.require(Scope::ReviewDecide)?;
    let id = item_id(&path)?;
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    let refused =
        match review::release(&tx, session.account(), session.actor(), id, state.floor()).await {
            Ok(_) => {
                tx.commit().await.map_err(anyhow::Error::from)?;
                return Ok(see_other("/review"));
            }
            Err(err) => Refusal::of(err, None)?,
        };
    drop(tx);
    drop(client);
    page(&state, &session, id, revealed(&fields), Some(refused)).await
}
