//! Job reads: one job, its progress, and the listing by status with a cursor.

use actix_web::{web, HttpResponse};
use moderation_shared::{
    clock::format_millis,
    db::jobs::{self, Job},
    domain::{FailureCode, JobId, JobStatus},
    webhook_body::ReviewView,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{
    openapi::{
        schema::{AdditionalProperties, ObjectBuilder, Type},
        Object,
    },
    IntoParams, ToSchema,
};

use super::{cursor, resource};
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// Registers the routes under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/job/{id}").route(web::get().to(get_job)))
        .service(resource("/job/{id}/content").route(web::delete().to(erase_content)))
        .service(resource("/job/{id}/progress").route(web::get().to(get_progress)))
        .service(resource("/jobs").route(web::get().to(list_jobs)));
}

fn not_found() -> ApiError {
    ApiError::NotFound("no such job".to_owned())
}

async fn load(state: &AppState, principal: &Principal, id: JobId) -> Result<Job, ApiError> {
    let client = state.pool.get().await?;
    jobs::get(&client, principal.account_id, id, state.floor())
        .await?
        .ok_or_else(not_found)
}

#[utoipa::path(get, path = "/api/v1/job/{id}", tag = "jobs",
    params(("id" = Uuid, Path, description = "The job's id.")),
    responses(
        (status = 200, description = "The job.", body = JobView),
        (status = 400, description = "The id is not a UUID.", body = ErrorBody),
        (status = 404, description = "No such job of this account.", body = ErrorBody),
    ))]
pub(crate) async fn get_job(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<JobId>,
) -> Result<HttpResponse, ApiError> {
    let job = load(&state, &principal, id.into_inner()).await?;
    Ok(HttpResponse::Ok().json(JobView::from(job)))
}

/// Where a job is in its processing.
#[derive(Debug, Serialize, ToSchema)]
pub struct Progress {
    /// The job's id.
    #[schema(value_type = Uuid)]
    job_id: JobId,
    /// `queued`, `processing`, `completed` or `failed`.
    status: &'static str,
    /// `queued`, `fetching`, `transcribing`, `classifying`, `done` or `failed`.
    stage: &'static str,
    /// How many times a worker took it.
    attempts: i32,
    /// When it last changed (RFC 3339, milliseconds).
    #[schema(format = DateTime)]
    updated_at: String,
}

#[utoipa::path(delete, path = "/api/v1/job/{id}/content", operation_id = "erase_job_content",
    tag = "jobs",
    params(("id" = Uuid, Path, description = "The job's id.")),
    responses(
        (status = 204, description = "The job's content (text, chat messages or media URL) is \
         erased, now or before; its decision, scores and categories stay. A job erased before \
         it was classified fails with `CONTENT_ERASED`."),
        (status = 400, description = "The id is not a UUID.", body = ErrorBody),
        (status = 404, description = "No such job of this account.", body = ErrorBody),
    ))]
pub(crate) async fn erase_content(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<JobId>,
) -> Result<HttpResponse, ApiError> {
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let found = jobs::erase_content(
        &tx,
        principal.actor(),
        principal.account_id,
        id.into_inner(),
        state.floor(),
    )
    .await?;
    if !found {
        return Err(ApiError::NotFound("no such job".to_owned()));
    }
    tx.commit().await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(get, path = "/api/v1/job/{id}/progress", tag = "jobs",
    params(("id" = Uuid, Path, description = "The job's id.")),
    responses(
        (status = 200, description = "The job's stage.", body = Progress),
        (status = 400, description = "The id is not a UUID.", body = ErrorBody),
        (status = 404, description = "No such job of this account.", body = ErrorBody),
    ))]
pub(crate) async fn get_progress(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<JobId>,
) -> Result<HttpResponse, ApiError> {
    let job = load(&state, &principal, id.into_inner()).await?;
    Ok(HttpResponse::Ok().json(Progress {
        job_id: job.id,
        status: job.status.as_str(),
        stage: job.stage.as_str(),
        attempts: job.attempts,
        updated_at: format_millis(job.updated_at),
    }))
}

/// The job object of the contract (section 3).
#[derive(Debug, Serialize, ToSchema)]
pub struct JobView {
    /// The job's id.
    #[schema(value_type = Uuid)]
    job_id: JobId,
    /// `text`, `image`, `video` or `audio` (older jobs may hold a historical type).
    #[serde(rename = "type")]
    kind: String,
    /// `queued`, `processing`, `completed` or `failed`.
    status: &'static str,
    /// When it was submitted (RFC 3339, milliseconds).
    #[schema(format = DateTime)]
    created_at: String,
    /// When it finished, else `null`.
    #[schema(format = DateTime, required = true)]
    completed_at: Option<String>,
    /// The decision: `null` until completed.
    #[schema(required = true)]
    is_prohibited: Option<bool>,
    /// Why it was rejected; present only when `is_prohibited` is true.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    reason: Option<String>,
    /// Category results, when any ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = categories_schema)]
    categories: Option<Value>,
    /// The built-in models' scores in [0, 1] (3 decimals) of the categories a model scored
    /// (`harassment`, `hate`, `violence`, `self_harm`, `sexual`, `nsfw`, `custom.<name>`);
    /// absent when no model ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = scores_schema)]
    scores: Option<Value>,
    /// The number of its current decision once completed: 0 for the model's, one more for each
    /// human decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    revision: Option<i32>,
    /// Who took its current decision once completed: `model`, `review` or `appeal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    decided_by: Option<&'static str>,
    /// Its review, once it went to one: `pending` while an item is open, then `decided`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    review: Option<ReviewView>,
    /// The active policy version that decided it; present once completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    policy_version: Option<i32>,
    /// What the shadow policy version would have decided, when one ran (never in a webhook).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    shadow: Option<ShadowView>,
    /// Text and audio jobs: the detected language of the text or the speech (ISO 639-1),
    /// `null` when unknown; absent for images and videos.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, pattern = "^[a-z]{2}$")]
    language: Option<Option<String>>,
    /// Why it failed; present only on failed jobs.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    error: Option<JobError>,
}

/// The shadow policy version's decision on a job.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ShadowView {
    /// The shadow version.
    policy_version: i32,
    /// Whether it would reject the job.
    is_prohibited: bool,
    /// The categories it would set, when the job has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = categories_schema)]
    categories: Option<Value>,
}

/// Why a job failed.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobError {
    /// `MEDIA_UNREACHABLE`, `MEDIA_TOO_LARGE`, `MEDIA_TOO_LONG`, `MEDIA_UNSUPPORTED`,
    /// `URL_NOT_ALLOWED`, `CLASSIFIER_UNAVAILABLE` or `INTERNAL`.
    code: &'static str,
    /// A sentence for people.
    message: String,
}

/// The `categories` object: the visual categories of image and video jobs (`nsfw` absent when
/// the account's NSFW check is off) and `custom` when a custom category ran.
fn categories_schema() -> Object {
    let flag = || ObjectBuilder::new().schema_type(Type::Boolean);
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "Image and video jobs carry the three visual categories (`nsfw` absent when the \
             account's NSFW check is off); any job carries `custom` when a custom category ran.",
        ))
        .property("ai_adult_general", flag())
        .property("underage", flag())
        .property("nsfw", flag())
        .property(
            "custom",
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .additional_properties(Some(AdditionalProperties::RefOr(flag().into()))),
        )
        .build()
}

/// The `scores` object: a number in [0, 1] per category a built-in model scored.
fn scores_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "A score in [0, 1] (3 decimals) per category a built-in model scored: the text \
             categories `harassment`, `hate`, `violence`, `self_harm`, `sexual`, the image and \
             video category `nsfw`, and `custom.<name>` for custom categories judged by meaning.",
        ))
        .additional_properties(Some(AdditionalProperties::RefOr(
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(0.0))
                .maximum(Some(1.0))
                .into(),
        )))
        .build()
}

impl From<Job> for JobView {
    fn from(job: Job) -> Self {
        let decided = job.status == JobStatus::Completed;
        let prohibited = job.is_prohibited.filter(|_| decided);
        let spoken_or_written = matches!(job.kind.as_str(), "text" | "audio" | "chat");
        Self {
            job_id: job.id,
            kind: job.kind,
            status: job.status.as_str(),
            created_at: format_millis(job.created_at),
            completed_at: job.completed_at.map(format_millis),
            is_prohibited: prohibited,
            reason: job.reason.filter(|_| prohibited == Some(true)),
            categories: job.categories,
            scores: job.scores.filter(|_| decided),
            revision: decided.then_some(job.revision),
            decided_by: decided.then_some(job.decided_by.as_str()),
            review: job
                .review_state
                .filter(|_| decided)
                .map(|state| ReviewView {
                    state,
                    reasons: job.review_reasons,
                }),
            policy_version: job.policy_version.filter(|_| decided),
            shadow: job
                .shadow
                .filter(|_| decided)
                .and_then(|shadow| serde_json::from_value(shadow).ok()),
            language: spoken_or_written.then_some(job.language),
            error: (job.status == JobStatus::Failed).then(|| JobError {
                code: job.error_code.unwrap_or(FailureCode::Internal).as_str(),
                message: job
                    .error_message
                    .unwrap_or_else(|| "the job could not be processed".to_owned()),
            }),
        }
    }
}

/// A page of jobs.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobList {
    /// Oldest first.
    jobs: Vec<JobView>,
    /// Pass as `cursor` for the next page; `null` on the last.
    #[schema(required = true)]
    next_cursor: Option<String>,
}

/// The listing's query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Comma-separated statuses (`queued`, `processing`, `completed`, `failed`); default
    /// `queued,processing`.
    status: Option<String>,
    /// 1 to 1000; default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/jobs", tag = "jobs", params(ListQuery), responses(
    (status = 200, description = "A page of the account's jobs, oldest first.", body = JobList),
    (status = 400, description = "An unknown status, a limit out of range or a bad cursor.",
     body = ErrorBody),
))]
pub(crate) async fn list_jobs(
    state: web::Data<AppState>,
    principal: Principal,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let statuses = parse_statuses(query.status.as_deref().unwrap_or("queued,processing"))?;
    let limit = cursor::limit(query.limit)?;
    let after = query
        .cursor
        .as_deref()
        .map(cursor::decode)
        .transpose()?
        .map(|(at, id)| (at, JobId(id)));
    let client = state.pool.get().await?;
    // One more than asked tells whether another page exists.
    let mut found = jobs::list(
        &client,
        principal.account_id,
        &statuses,
        after,
        limit + 1,
        state.floor(),
    )
    .await?;
    let next_cursor = if found.len() as i64 > limit {
        found.truncate(limit as usize);
        found.last().map(|j| cursor::encode(j.created_at, j.id.0))
    } else {
        None
    };
    Ok(HttpResponse::Ok().json(JobList {
        jobs: found.into_iter().map(JobView::from).collect(),
        next_cursor,
    }))
}

fn parse_statuses(raw: &str) -> Result<Vec<JobStatus>, ApiError> {
    let mut statuses = Vec::new();
    for name in raw.split(',').map(str::trim) {
        let status = name.parse::<JobStatus>().map_err(|_| {
            ApiError::InvalidRequest(format!(
                "unknown status {name:?}: use queued, processing, completed or failed, comma-separated"
            ))
        })?;
        if !statuses.contains(&status) {
            statuses.push(status);
        }
    }
    Ok(statuses)
}
