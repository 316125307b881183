//! Job reads: one job, its progress, and the listing by status with a cursor.

use actix_web::{web, HttpResponse};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use moderation_shared::{
    clock::format_millis,
    db::jobs::{self, Job, JobStatus},
    domain::JobId,
};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{auth::Principal, error::ApiError, startup::resource, state::AppState};

/// Default and largest page of `GET /jobs`.
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 1000;

/// Registers the routes under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/job/{id}").route(web::get().to(get_job)))
        .service(resource("/job/{id}/progress").route(web::get().to(get_progress)))
        .service(resource("/jobs").route(web::get().to(list_jobs)));
}

fn not_found() -> ApiError {
    ApiError::NotFound("no such job".to_owned())
}

async fn load(state: &AppState, principal: &Principal, id: Uuid) -> Result<Job, ApiError> {
    let client = state.pool.get().await.map_err(ApiError::unavailable)?;
    jobs::get(&client, principal.account_id, JobId(id))
        .await?
        .ok_or_else(not_found)
}

async fn get_job(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let job = load(&state, &principal, id.into_inner()).await?;
    Ok(HttpResponse::Ok().json(job_json(&job)))
}

async fn get_progress(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let job = load(&state, &principal, id.into_inner()).await?;
    Ok(HttpResponse::Ok().json(json!({
        "job_id": job.id,
        "status": job.status.as_str(),
        "stage": job.stage,
        "attempts": job.attempts,
        "updated_at": format_millis(job.updated_at),
    })))
}

/// The job object of the contract (section 3).
pub fn job_json(job: &Job) -> Value {
    let mut out = Map::new();
    out.insert("job_id".into(), json!(job.id));
    out.insert("type".into(), json!(job.kind));
    out.insert("status".into(), json!(job.status.as_str()));
    out.insert("created_at".into(), json!(format_millis(job.created_at)));
    out.insert(
        "completed_at".into(),
        json!(job.completed_at.map(format_millis)),
    );
    let decided = job.status == JobStatus::Completed;
    let prohibited = job.is_prohibited.filter(|_| decided);
    out.insert("is_prohibited".into(), json!(prohibited));
    if prohibited == Some(true) {
        if let Some(reason) = &job.reason {
            out.insert("reason".into(), json!(reason));
        }
    }
    if let Some(categories) = &job.categories {
        out.insert("categories".into(), categories.clone());
    }
    if job.status == JobStatus::Failed {
        out.insert(
            "error".into(),
            json!({
                "code": job.error_code.as_deref().unwrap_or("INTERNAL"),
                "message": job.error_message.as_deref().unwrap_or("the job could not be processed"),
            }),
        );
    }
    Value::Object(out)
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    status: Option<String>,
    limit: Option<i64>,
    cursor: Option<String>,
}

async fn list_jobs(
    state: web::Data<AppState>,
    principal: Principal,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let statuses = parse_statuses(query.status.as_deref().unwrap_or("queued,processing"))?;
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::InvalidRequest(format!(
            "limit must be 1 to {MAX_LIMIT}"
        )));
    }
    let after = query.cursor.as_deref().map(decode_cursor).transpose()?;
    let client = state.pool.get().await.map_err(ApiError::unavailable)?;
    // One more than asked tells whether another page exists.
    let mut found = jobs::list(&client, principal.account_id, &statuses, after, limit + 1).await?;
    let next_cursor = if found.len() as i64 > limit {
        found.truncate(limit as usize);
        found.last().map(|j| encode_cursor(j.created_at, j.id))
    } else {
        None
    };
    Ok(HttpResponse::Ok().json(json!({
        "jobs": found.iter().map(job_json).collect::<Vec<_>>(),
        "next_cursor": next_cursor,
    })))
}

fn parse_statuses(raw: &str) -> Result<Vec<JobStatus>, ApiError> {
    let mut statuses = Vec::new();
    for name in raw.split(',').map(str::trim) {
        let status = JobStatus::parse(name).ok_or_else(|| {
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

fn encode_cursor(at: OffsetDateTime, id: JobId) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}:{}", at.unix_timestamp_nanos(), id))
}

fn decode_cursor(raw: &str) -> Result<(OffsetDateTime, JobId), ApiError> {
    let invalid = || ApiError::InvalidRequest("invalid cursor".to_owned());
    let bytes = URL_SAFE_NO_PAD.decode(raw).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let (nanos, id) = text.split_once(':').ok_or_else(invalid)?;
    let nanos: i128 = nanos.parse().map_err(|_| invalid())?;
    let at = OffsetDateTime::from_unix_timestamp_nanos(nanos).map_err(|_| invalid())?;
    Ok((at, id.parse().map_err(|_| invalid())?))
}
