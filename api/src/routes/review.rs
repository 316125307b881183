//! The review queue (contract 14), scope `review:decide`: `GET /api/v1/review/queue`, `GET
//! /api/v1/review/items[/{id}]`, `POST /api/v1/review/claim`, `POST
//! /api/v1/review/items/{id}/release` and `.../decide`. The rules live in
//! `moderation_shared::review`, shared with the dashboard.

use std::collections::BTreeMap;

use actix_web::{web, HttpResponse};
use moderation_shared::{
    clock::format_millis,
    db::{
        jobs,
        review_items::{self, ReviewItem},
    },
    domain::{ReviewItemId, ReviewItemState},
    review::{self, DecisionInput, ReviewError},
    telemetry,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::{cursor, policies::present, resource};
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// Registers the routes under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/review/queue").route(web::get().to(queue)))
        .service(resource("/review/items").route(web::get().to(list)))
        .service(resource("/review/items/{id}").route(web::get().to(get)))
        .service(resource("/review/claim").route(web::post().to(claim)))
        .service(resource("/review/items/{id}/release").route(web::post().to(release)))
        .service(resource("/review/items/{id}/decide").route(web::post().to(decide)));
}

impl From<ReviewError> for ApiError {
    fn from(err: ReviewError) -> Self {
        match err {
            ReviewError::NotFound(what) => ApiError::NotFound(what.to_owned()),
            ReviewError::Conflict(message) => ApiError::Conflict(message),
            ReviewError::Invalid(message) => ApiError::InvalidRequest(message),
            ReviewError::Db(err) => err.into(),
        }
    }
}

/// Open items by reason.
#[derive(Debug, Serialize, ToSchema)]
pub struct ByReason {
    /// A category scored in its review band.
    band: i64,
    /// The sample picked the job.
    sample: i64,
    /// The job was appealed.
    appeal: i64,
}

/// `GET /api/v1/review/queue`.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueView {
    /// Open items nobody holds.
    pending: i64,
    /// Items a reviewer holds.
    claimed: i64,
    /// When the oldest pending item was made, else `null`.
    #[schema(format = DateTime, required = true)]
    oldest_pending_at: Option<String>,
    /// Open items by reason (an item with two counts in both).
    by_reason: ByReason,
}

/// Who holds an item.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReviewerView {
    /// `key` or `user`.
    #[serde(rename = "type")]
    kind: &'static str,
    /// The key's or dashboard user's id.
    #[schema(value_type = uuid::Uuid)]
    id: uuid::Uuid,
}

/// A review item.
#[derive(Debug, Serialize, ToSchema)]
pub struct ItemView {
    /// Its id.
    #[schema(value_type = uuid::Uuid)]
    item_id: ReviewItemId,
    /// The job under review.
    #[schema(value_type = uuid::Uuid)]
    job_id: moderation_shared::domain::JobId,
    /// The job's type.
    #[serde(rename = "type")]
    kind: String,
    /// Why: `band`, `sample`, `appeal`.
    reasons: Vec<&'static str>,
    /// The job's model scores, when a model ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>, nullable = false)]
    scores: Option<Value>,
    /// `pending`, `claimed` or `decided` (a claim past its expiry is `pending`).
    state: &'static str,
    /// Who holds it while claimed, else `null`.
    #[schema(required = true)]
    claimed_by: Option<ReviewerView>,
    /// When the claim ends, else `null`.
    #[schema(format = DateTime, required = true)]
    claim_expires_at: Option<String>,
    /// When it was made.
    #[schema(format = DateTime)]
    created_at: String,
    /// When it was decided, else `null`.
    #[schema(format = DateTime, required = true)]
    decided_at: Option<String>,
    /// The appeal it decides, else `null`.
    #[schema(value_type = Option<uuid::Uuid>, required = true)]
    appeal_id: Option<uuid::Uuid>,
}

impl ItemView {
    fn new(item: ReviewItem, scores: Option<Value>) -> Self {
        Self {
            item_id: item.id,
            job_id: item.job_id,
            kind: item.job_type,
            reasons: item.reasons.iter().map(|r| r.as_str()).collect(),
            scores,
            state: item.state.as_str(),
            claimed_by: item.claimed_by.map(|(kind, id)| ReviewerView {
                kind: kind.as_str(),
                id,
            }),
            claim_expires_at: item.claim_expires_at.map(format_millis),
            created_at: format_millis(item.created_at),
            decided_at: item.decided_at.map(format_millis),
            appeal_id: item.appeal_id.map(|a| a.0),
        }
    }
}

/// What was submitted: the text, a chat's messages, or the media URL (never an audio
/// transcript).
#[derive(Debug, Serialize, ToSchema)]
pub struct ContentView {
    /// The text (a chat as `role: content` lines) or the media URL; `null` once erased.
    #[schema(required = true)]
    text: Option<String>,
    /// A chat's messages, when it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>, nullable = false)]
    messages: Option<Value>,
}

/// A review item with its job's content and current decision.
#[derive(Debug, Serialize, ToSchema)]
pub struct ItemDetail {
    /// The item.
    #[serde(flatten)]
    item: ItemView,
    /// What was submitted.
    content: ContentView,
    /// The job's current decision.
    is_prohibited: Option<bool>,
    /// The job's current categories.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>, nullable = false)]
    categories: Option<Value>,
    /// The job's current revision.
    revision: i32,
}

/// A page of items.
#[derive(Debug, Serialize, ToSchema)]
pub struct ItemPage {
    /// Oldest first.
    items: Vec<ItemView>,
    /// Pass as `cursor` for the next page; `null` on the last.
    #[schema(required = true)]
    next_cursor: Option<String>,
}

/// The listing's query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ItemsQuery {
    /// `pending`, `claimed` or `decided`; default all.
    state: Option<String>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    /// 1 to 1000; default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
}

/// A reviewer's decision.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecideBody {
    /// Whether the job is rejected.
    is_prohibited: bool,
    /// Categories to set: `ai_adult_general`, `underage`, `nsfw` (images and videos) and
    /// `custom.<name>` for a custom category the job ran.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    categories: Option<BTreeMap<String, bool>>,
    /// 1 to 2000 characters; required when the decision changes the job's outcome. Never sent
    /// in a webhook.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, min_length = 1, max_length = 2000)]
    note: Option<String>,
}

/// The job's decision after the reviewer's.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionView {
    /// The job.
    #[schema(value_type = uuid::Uuid)]
    job_id: moderation_shared::domain::JobId,
    /// Its new revision.
    revision: i32,
    /// `review` or `appeal`.
    decided_by: &'static str,
    /// Whether it is rejected.
    is_prohibited: bool,
    /// Why, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    reason: Option<String>,
    /// Its categories.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>, nullable = false)]
    categories: Option<Value>,
    /// The reviewer's note.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    note: Option<String>,
    /// When.
    #[schema(format = DateTime)]
    decided_at: String,
    /// Whether it changed the job's outcome (`job.revised` was sent).
    changed: bool,
    /// The appeal it decided: `upheld` or `overturned`; absent for other items.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    appeal_state: Option<&'static str>,
}

#[utoipa::path(get, path = "/api/v1/review/queue", operation_id = "review_queue", tag = "review", responses(
    (status = 200, description = "The account's open review items, counted.", body = QueueView),
))]
pub(crate) async fn queue(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await?;
    let counts = review_items::queue(&client, principal.account_id, state.floor()).await?;
    Ok(HttpResponse::Ok().json(QueueView {
        pending: counts.pending,
        claimed: counts.claimed,
        oldest_pending_at: counts.oldest_pending_at.map(format_millis),
        by_reason: ByReason {
            band: counts.band,
            sample: counts.sample,
            appeal: counts.appeal,
        },
    }))
}

#[utoipa::path(get, path = "/api/v1/review/items", operation_id = "list_review_items", tag = "review",
    params(ItemsQuery),
    responses(
        (status = 200, description = "A page of the account's review items, oldest first.",
         body = ItemPage),
        (status = 400, description = "An unknown state, a limit out of range or a bad cursor.",
         body = ErrorBody),
    ))]
pub(crate) async fn list(
    state: web::Data<AppState>,
    principal: Principal,
    query: web::Query<ItemsQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let wanted = query
        .state
        .map(|raw| {
            raw.parse::<ReviewItemState>().map_err(|_| {
                ApiError::InvalidRequest(format!(
                    "unknown state {raw:?}: use pending, claimed or decided"
                ))
            })
        })
        .transpose()?;
    let limit = cursor::limit(query.limit)?;
    let after = query
        .cursor
        .as_deref()
        .map(cursor::decode)
        .transpose()?
        .map(|(_, id)| ReviewItemId(id));
    let client = state.pool.get().await?;
    let mut items = review_items::page(
        &client,
        principal.account_id,
        wanted,
        after,
        limit + 1,
        state.floor(),
    )
    .await?;
    let next_cursor = if items.len() as i64 > limit {
        items.truncate(limit as usize);
        items.last().map(|i| cursor::encode(i.created_at, i.id.0))
    } else {
        None
    };
    Ok(HttpResponse::Ok().json(ItemPage {
        items: items.into_iter().map(|i| ItemView::new(i, None)).collect(),
        next_cursor,
    }))
}

#[utoipa::path(get, path = "/api/v1/review/items/{id}", operation_id = "get_review_item", tag = "review",
    params(("id" = Uuid, Path, description = "The item's id.")),
    responses(
        (status = 200, description = "The item with its job's content, scores and decision.",
         body = ItemDetail),
        (status = 400, description = "The id is not a UUID.", body = ErrorBody),
        (status = 404, description = "No such item of this account.", body = ErrorBody),
    ))]
pub(crate) async fn get(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<ReviewItemId>,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await?;
    let account = principal.account_id;
    let floor = state.floor();
    let item = review_items::get(&client, account, id.into_inner(), floor)
        .await?
        .ok_or_else(|| ApiError::NotFound("no such review item".to_owned()))?;
    Ok(HttpResponse::Ok().json(detail(&client, account, item, floor).await?))
}

/// An item with what its job holds.
async fn detail(
    client: &deadpool_postgres::Object,
    account: moderation_shared::domain::AccountId,
    item: ReviewItem,
    floor: uuid::Uuid,
) -> Result<ItemDetail, ApiError> {
    let job = jobs::get(client, account, item.job_id, floor)
        .await?
        .ok_or_else(|| ApiError::NotFound("no such job".to_owned()))?;
    let (text, messages) = jobs::content(client, account, item.job_id, floor)
        .await?
        .unwrap_or_default();
    Ok(ItemDetail {
        content: ContentView { text, messages },
        is_prohibited: job.is_prohibited,
        categories: job.categories,
        revision: job.revision,
        item: ItemView::new(item, job.scores),
    })
}

#[utoipa::path(post, path = "/api/v1/review/claim", operation_id = "claim_review_item", tag = "review",
    responses(
        (status = 200, description = "The oldest pending item (appeals first), now held by the \
         caller for 10 minutes, with its job's content.", body = ItemDetail),
        (status = 204, description = "No item is pending."),
    ))]
pub(crate) async fn claim(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await?;
    let (account, floor) = (principal.account_id, state.floor());
    match review_items::claim(&client, account, principal.actor(), floor).await? {
        Some(item) => Ok(HttpResponse::Ok().json(detail(&client, account, item, floor).await?)),
        None => Ok(HttpResponse::NoContent().finish()),
    }
}

#[utoipa::path(post, path = "/api/v1/review/items/{id}/release", operation_id = "release_review_item", tag = "review",
    params(("id" = Uuid, Path, description = "The item's id.")),
    responses(
        (status = 200, description = "The item, pending again.", body = ItemView),
        (status = 400, description = "The id is not a UUID.", body = ErrorBody),
        (status = 404, description = "No such item of this account.", body = ErrorBody),
        (status = 409, description = "The caller does not hold the item.", body = ErrorBody),
    ))]
pub(crate) async fn release(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<ReviewItemId>,
) -> Result<HttpResponse, ApiError> {
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let (account, floor) = (principal.account_id, state.floor());
    let item = review::release(&tx, account, principal.actor(), id.into_inner(), floor).await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(ItemView::new(item, None)))
}

#[utoipa::path(post, path = "/api/v1/review/items/{id}/decide", operation_id = "decide_review_item", tag = "review",
    params(("id" = Uuid, Path, description = "The item's id.")),
    request_body = DecideBody,
    responses(
        (status = 200, description = "The job's new decision (a revision: uphold or overturn).",
         body = DecisionView),
        (status = 400, description = "A field breaks its rule, an unknown category, or no note \
         for a changed outcome.", body = ErrorBody),
        (status = 404, description = "No such item of this account.", body = ErrorBody),
        (status = 409, description = "The caller does not hold the item, it is decided already, \
         or it is an appeal of a job the caller decided before.", body = ErrorBody),
    ))]
pub(crate) async fn decide(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<ReviewItemId>,
    body: web::Json<DecideBody>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let input = DecisionInput {
        is_prohibited: body.is_prohibited,
        categories: body.categories.unwrap_or_default(),
        note: body.note,
    };
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let item = id.into_inner();
    let decided = review::decide(
        &tx,
        principal.account_id,
        principal.actor(),
        item,
        &input,
        state.floor(),
    )
    .await?;
    tx.commit().await?;
    telemetry::count_review_decision(decided.changed);
    Ok(HttpResponse::Ok().json(DecisionView {
        job_id: decided.job_id,
        revision: decided.revision,
        decided_by: decided.decided_by.as_str(),
        is_prohibited: decided.is_prohibited,
        reason: decided.reason,
        categories: decided.categories,
        note: decided.note,
        decided_at: format_millis(decided.decided_at),
        changed: decided.changed,
        appeal_state: decided.appeal.map(|a| a.state.as_str()),
    }))
}
