//! The review queue (contract 14, `review:decide`): the account's open items counted (pending,
//! claimed, by reason) with the oldest pending item's age, the items the user holds, `Claim
//! next`, and the user's media setting. A claim runs `review_items::claim`, as the api's does,
//! with the user as reviewer, and leads to the item's page (`review_item`).

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    clock,
    db::{
        jobs,
        review_items::{self, QueueCounts, ReviewItem},
        GenericClient,
    },
    domain::{JobId, ReviewItemId, ReviewItemState, Scope},
};
use serde::Deserialize;

use crate::{
    error::DashboardError,
    form::Posted,
    job_view::verdict,
    nav::Nav,
    pages::{age, render, see_other, Stamp},
    session::Session,
    state::AppState,
};

/// Items read per page while looking for the ones the user holds.
const HELD_PAGE: i64 = 100;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/review", web::get().to(queue))
        .route("/review/claim", web::post().to(claim))
        .route("/review/media", web::post().to(set_media));
}

/// What the page was sent back with: the job just decided, or a claim that found nothing.
#[derive(Debug, Default, Deserialize)]
struct QueueQuery {
    decided: Option<String>,
    empty: Option<String>,
}

/// An item the user holds.
struct HeldRow {
    item_id: ReviewItemId,
    job_id: JobId,
    kind: String,
    reasons: String,
    expires: String,
}

/// The decision just taken, read back from the job.
struct DecidedNotice {
    job_id: JobId,
    revision: i32,
    verdict: &'static str,
}

#[derive(Template)]
#[template(path = "review.html")]
struct QueuePage {
    nav: Option<Nav>,
    csrf: String,
    counts: QueueCounts,
    /// The oldest pending item's creation and its age.
    oldest: Option<(Stamp, String)>,
    held: Vec<HeldRow>,
    decided: Option<DecidedNotice>,
    /// A claim found nothing pending.
    empty: bool,
    /// Whether images and video are blurred until revealed.
    blurs_media: bool,
}

/// The reasons of an item, comma-separated.
pub fn reasons(item: &ReviewItem) -> String {
    item.reasons
        .iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The open items of `session`'s account that its user holds, oldest first.
async fn held_by(
    client: &impl GenericClient,
    session: &Session,
    floor: uuid::Uuid,
) -> Result<Vec<ReviewItem>, DashboardError> {
    let mut held = Vec::new();
    let mut after = None;
    loop {
        let page = review_items::page(
            client,
            session.account(),
            Some(ReviewItemState::Claimed),
            after,
            HELD_PAGE,
            floor,
        )
        .await?;
        let full = page.len() as i64 == HELD_PAGE;
        after = page.last().map(|i| i.id);
        held.extend(
            page.into_iter()
                .filter(|i| i.is_claimed_by(session.actor())),
        );
        if !full {
            return Ok(held);
        }
    }
}

async fn queue(
    state: web::Data<AppState>,
    session: Session,
    query: web::Query<QueueQuery>,
) -> Result<HttpResponse, DashboardError> {
    session.require(Scope::ReviewDecide)?;
    let account = session.account();
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let floor = state.floor();
    let counts = review_items::queue(&client, account, floor).await?;
    let held = held_by(&client, &session, floor).await?;
    let decided = match query
        .decided
        .as_deref()
        .and_then(|raw| raw.parse::<JobId>().ok())
    {
        Some(id) => jobs::get(&client, account, id, floor)
            .await?
            .map(|job| DecidedNotice {
                job_id: job.id,
                revision: job.revision,
                verdict: verdict(job.is_prohibited),
            }),
        None => None,
    };
    let now = clock::now();
    render(&QueuePage {
        nav: Some(session.nav("review")),
        csrf: session.csrf.clone(),
        oldest: counts
            .oldest_pending_at
            .map(|at| (Stamp(at), age(now - at))),
        counts,
        held: held
            .iter()
            .map(|item| HeldRow {
                item_id: item.id,
                job_id: item.job_id,
                kind: item.job_type.clone(),
                reasons: reasons(item),
                expires: item
                    .claim_expires_at
                    .map(|at| Stamp(at).to_string())
                    .unwrap_or_default(),
            })
            .collect(),
        decided,
        empty: query.empty.is_some(),
        blurs_media: state.preferences.blurs_media(session.user.id).await?,
    })
}

/// Claims the oldest pending item (appeals first) for the user, for ten minutes, and shows
/// it; back to the queue when none is pending.
async fn claim(state: web::Data<AppState>, posted: Posted) -> Result<HttpResponse, DashboardError> {
    let session = posted.session;
    session.require(Scope::ReviewDecide)?;
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let claimed =
        review_items::claim(&client, session.account(), session.actor(), state.floor()).await?;
    Ok(match claimed {
        Some(item) => see_other(&format!("/review/items/{}", item.id)),
        None => see_other("/review?empty=1"),
    })
}

/// Sets whether the user sees images and video blurred until revealed (`blur`: `on` or
/// `off`).
async fn set_media(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let Posted { session, fields } = posted;
    session.require(Scope::ReviewDecide)?;
    let blur = match fields.get("blur") {
        Some("on") => true,
        Some("off") => false,
        _ => {
            return Err(DashboardError::BadRequest(
                "Choose whether media is blurred.".to_owned(),
            ))
        }
    };
    state
        .preferences
        .set_blurs_media(session.user.id, blur)
        .await?;
    Ok(see_other("/review"))
}
