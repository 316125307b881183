//! Appeals and a job's decisions (contract 14): `POST /api/v1/job/{id}/appeal` (scope
//! `job:appeal`), `GET /api/v1/appeals/{id}` (`job:appeal` or `job:read`), `GET
//! /api/v1/job/{id}/decisions` (`job:read`).

use actix_web::{web, HttpResponse};
use moderation_shared::{
    clock::format_millis,
    db::{
        appeals::{self, Appeal},
        job_decisions, jobs,
    },
    domain::{AppealId, JobId, JobStatus},
    review::{self, Appealed},
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{policies::present, resource};
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// Registers the routes under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/job/{id}/appeal").route(web::post().to(create)))
        .service(resource("/job/{id}/decisions").route(web::get().to(decisions)))
        .service(resource("/appeals/{id}").route(web::get().to(get)));
}

/// An appeal.
#[derive(Debug, Serialize, ToSchema)]
pub struct AppealView {
    /// Its id.
    #[schema(value_type = uuid::Uuid)]
    appeal_id: AppealId,
    /// The appealed job.
    #[schema(value_type = uuid::Uuid)]
    job_id: JobId,
    /// `open`, `upheld` (the decision stands) or `overturned` (a reviewer changed it).
    state: &'static str,
    /// When it was made.
    #[schema(format = DateTime)]
    created_at: String,
    /// When it was decided, else `null`.
    #[schema(format = DateTime, required = true)]
    decided_at: Option<String>,
}

impl From<Appeal> for AppealView {
    fn from(appeal: Appeal) -> Self {
        Self {
            appeal_id: appeal.id,
            job_id: appeal.job_id,
            state: appeal.state.as_str(),
            created_at: format_millis(appeal.created_at),
            decided_at: appeal.decided_at.map(format_millis),
        }
    }
}

/// An appeal's body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AppealBody {
    /// Why the end user contests the decision: 1 to 2000 characters.
    #[schema(min_length = 1, max_length = 2000)]
    reason: String,
    /// The client's own reference, 1 to 200 characters: the same one again answers the same
    /// appeal (200).
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, min_length = 1, max_length = 200)]
    appeal_ref: Option<String>,
}

#[utoipa::path(post, path = "/api/v1/job/{id}/appeal", operation_id = "appeal_job", tag = "review",
    params(("id" = Uuid, Path, description = "The job's id.")),
    request_body = AppealBody,
    responses(
        (status = 201, description = "The appeal, open, with a review item for a reviewer who \
         has not decided the job before.", body = AppealView),
        (status = 200, description = "The job's appeal with this `appeal_ref`, as it stands.",
         body = AppealView),
        (status = 400, description = "A field breaks its rule.", body = ErrorBody),
        (status = 404, description = "No such job of this account.", body = ErrorBody),
        (status = 409, description = "The job is not completed, or has an open appeal.",
         body = ErrorBody),
    ))]
pub(crate) async fn create(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<JobId>,
    body: web::Json<AppealBody>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let appealed = review::appeal(
        &tx,
        principal.account_id,
        principal.actor(),
        id.into_inner(),
        state.floor(),
        &body.reason,
        body.appeal_ref.as_deref(),
    )
    .await?;
    tx.commit().await?;
    Ok(match appealed {
        Appealed::Created(appeal) => HttpResponse::Created().json(AppealView::from(appeal)),
        Appealed::Existing(appeal) => HttpResponse::Ok().json(AppealView::from(appeal)),
    })
}

#[utoipa::path(get, path = "/api/v1/appeals/{id}", operation_id = "get_appeal", tag = "review",
    params(("id" = Uuid, Path, description = "The appeal's id.")),
    responses(
        (status = 200, description = "The appeal.", body = AppealView),
        (status = 400, description = "The id is not a UUID.", body = ErrorBody),
        (status = 404, description = "No such appeal of this account.", body = ErrorBody),
    ))]
pub(crate) async fn get(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<AppealId>,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await?;
    let appeal = appeals::get(
        &client,
        principal.account_id,
        id.into_inner(),
        state.floor(),
    )
    .await?
    .ok_or_else(|| ApiError::NotFound("no such appeal".to_owned()))?;
    Ok(HttpResponse::Ok().json(AppealView::from(appeal)))
}

/// Who took a decision.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionReviewer {
    /// `model`, `key` or `user`.
    #[serde(rename = "type")]
    kind: &'static str,
    /// The key's or dashboard user's id; `null` for the model.
    #[schema(value_type = Option<uuid::Uuid>, required = true)]
    id: Option<uuid::Uuid>,
}

/// One revision of a job's decision.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionEntry {
    /// 0 for the model's, then one per human decision.
    revision: i32,
    /// `model`, `review` or `appeal`.
    decided_by: &'static str,
    /// Whether it rejects the job.
    is_prohibited: bool,
    /// Why, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    reason: Option<String>,
    /// The job's categories under it.
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
    /// Who.
    reviewer: DecisionReviewer,
}

/// `GET /api/v1/job/{id}/decisions`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionHistory {
    /// Oldest first; the last is the job's current decision.
    decisions: Vec<DecisionEntry>,
}

#[utoipa::path(get, path = "/api/v1/job/{id}/decisions", operation_id = "job_decisions", tag = "jobs",
    params(("id" = Uuid, Path, description = "The job's id.")),
    responses(
        (status = 200, description = "Every decision of the job, the model's first; empty \
         until it completes.", body = DecisionHistory),
        (status = 400, description = "The id is not a UUID.", body = ErrorBody),
        (status = 404, description = "No such job of this account.", body = ErrorBody),
    ))]
pub(crate) async fn decisions(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<JobId>,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await?;
    let job = jobs::get(
        &client,
        principal.account_id,
        id.into_inner(),
        state.floor(),
    )
    .await?
    .ok_or_else(|| ApiError::NotFound("no such job".to_owned()))?;
    let stored = job_decisions::list(&client, job.id).await?;
    let decisions = if !stored.is_empty() {
        stored
            .into_iter()
            .map(|d| DecisionEntry {
                revision: d.revision,
                decided_by: d.decided_by.as_str(),
                is_prohibited: d.is_prohibited,
                reason: d.reason.filter(|_| d.is_prohibited),
                categories: d.categories,
                note: d.note,
                decided_at: format_millis(d.decided_at),
                reviewer: DecisionReviewer {
                    kind: d.reviewer.map_or("model", |(kind, _)| kind.as_str()),
                    id: d.reviewer.map(|(_, id)| id),
                },
            })
            .collect()
    } else if job.status == JobStatus::Completed {
        // Never reviewed: its one decision is the model's, on the job itself.
        let prohibited = job.is_prohibited.unwrap_or(false);
        vec![DecisionEntry {
            revision: 0,
            decided_by: "model",
            is_prohibited: prohibited,
            reason: job.reason.filter(|_| prohibited),
            categories: job.categories,
            note: None,
            decided_at: format_millis(job.completed_at.unwrap_or(job.updated_at)),
            reviewer: DecisionReviewer {
                kind: "model",
                id: None,
            },
        }]
    } else {
        Vec::new()
    };
    Ok(HttpResponse::Ok().json(DecisionHistory { decisions }))
}
