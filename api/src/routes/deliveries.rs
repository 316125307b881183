//! The webhook delivery log (contract 11): the account's deliveries and their attempts, a
//! resend of one, and a recover of every delivery abandoned in a window. Resends and recovers
//! are recorded here and carried out by the dispatcher.

use actix_web::{web, HttpResponse};
use moderation_shared::{
    clock::{self, format_millis},
    db::delivery_log::{self, Attempt, Delivery, Filter, Resend},
    domain::{DeliveryId, DeliveryState, JobId},
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};

use super::{cursor, export::parse_instant, resource};
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// Registers the routes under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    // `recover` before `{id}`, which would match it too.
    cfg.service(resource("/deliveries").route(web::get().to(list)))
        .service(resource("/deliveries/recover").route(web::post().to(recover)))
        .service(resource("/deliveries/{id}").route(web::get().to(get)))
        .service(resource("/deliveries/{id}/resend").route(web::post().to(resend)));
}

fn not_found() -> ApiError {
    ApiError::NotFound("no such delivery".to_owned())
}

/// A delivery of the log.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryView {
    /// The delivery's id: the body's `delivery_id` and the `webhook-id` header.
    #[schema(value_type = Uuid)]
    delivery_id: DeliveryId,
    /// What it tells: `job.completed`, `job.revised`, `appeal.decided` or `ping`.
    event: &'static str,
    /// Its job (`null` for a `ping`).
    #[schema(value_type = Option<Uuid>, required = true)]
    job_id: Option<JobId>,
    /// Where it is sent.
    url: String,
    /// `pending`, `held` (its URL is disabled or paused: not attempted), `delivered`,
    /// `abandoned` or `undeliverable`.
    status: &'static str,
    /// Attempts made or under way, resends and recovered schedules included.
    attempts: i32,
    /// When the next attempt is due (the schedule's, or a resend's), else `null`.
    #[schema(format = DateTime, required = true)]
    next_attempt_at: Option<String>,
    /// The status code of the latest attempt, `null` when it got no response.
    #[schema(required = true)]
    last_status_code: Option<i32>,
    /// When its job completed and the delivery was made (RFC 3339, milliseconds).
    #[schema(format = DateTime)]
    created_at: String,
    /// When it was delivered, abandoned or found undeliverable, else `null`.
    #[schema(format = DateTime, required = true)]
    finished_at: Option<String>,
}

impl From<Delivery> for DeliveryView {
    fn from(d: Delivery) -> Self {
        Self {
            delivery_id: d.id,
            event: d.event.as_str(),
            job_id: d.job_id,
            url: d.url,
            status: d.state.as_str(),
            attempts: d.attempts,
            next_attempt_at: d.next_attempt_at.map(format_millis),
            last_status_code: d.last_status_code,
            created_at: format_millis(d.created_at),
            finished_at: d.finished_at.map(format_millis),
        }
    }
}

/// One attempt, as it ended.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptView {
    /// Its number, from 1; resends and recovered schedules continue the count.
    attempt: i32,
    /// When the schedule wanted it (for a resend, when it was asked for).
    #[schema(format = DateTime)]
    scheduled_at: String,
    /// When its request started.
    #[schema(format = DateTime)]
    started_at: String,
    /// How long it took, in milliseconds.
    duration_ms: i32,
    /// The response's status, `null` when none came.
    #[schema(required = true)]
    status_code: Option<i32>,
    /// Why it failed without a response (timeout, refused connection, ...), else `null`.
    #[schema(required = true)]
    error: Option<String>,
    /// At most 2 KB of the response body, else `null`.
    #[schema(required = true)]
    response_excerpt: Option<String>,
}

impl From<Attempt> for AttemptView {
    fn from(a: Attempt) -> Self {
        Self {
            attempt: a.attempt,
            scheduled_at: format_millis(a.scheduled_at),
            started_at: format_millis(a.started_at),
            duration_ms: a.duration_ms,
            status_code: a.status_code,
            error: a.error,
            response_excerpt: a.response_excerpt,
        }
    }
}

/// A delivery with every attempt.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryDetail {
    #[serde(flatten)]
    delivery: DeliveryView,
    /// Every attempt, oldest first.
    attempts_log: Vec<AttemptView>,
}

/// A page of the log.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryList {
    /// Newest first.
    deliveries: Vec<DeliveryView>,
    /// Pass as `cursor` for the next page; `null` on the last.
    #[schema(required = true)]
    next_cursor: Option<String>,
}

/// The log's query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Only this job's delivery.
    #[param(value_type = Option<Uuid>)]
    job_id: Option<String>,
    /// Comma-separated states (`pending`, `held`, `delivered`, `abandoned`,
    /// `undeliverable`); default all.
    status: Option<String>,
    /// Only deliveries created at or after this date-time.
    #[param(value_type = Option<String>, format = DateTime)]
    since: Option<String>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    /// 1 to 1000; default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
}

#[utoipa::path(get, path = "/api/v1/deliveries", operation_id = "list_deliveries", tag = "webhooks", params(ListQuery), responses(
    (status = 200, description = "A page of the account's deliveries, newest first.",
     body = DeliveryList),
    (status = 400, description = "A bad job id, status, date-time, limit or cursor.",
     body = ErrorBody),
))]
pub(crate) async fn list(
    state: web::Data<AppState>,
    principal: Principal,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let limit = cursor::limit(query.limit)?;
    let filter = Filter {
        floor: state.floor(),
        job_id: query
            .job_id
            .as_deref()
            .map(|raw| {
                raw.trim()
                    .parse()
                    .map(JobId)
                    .map_err(|_| ApiError::InvalidRequest(format!("job_id {raw:?} is not a UUID")))
            })
            .transpose()?,
        states: parse_states(query.status.as_deref())?,
        since: query
            .since
            .as_deref()
            .map(|raw| instant("since", raw))
            .transpose()?,
    };
    let after = query
        .cursor
        .as_deref()
        .map(cursor::decode)
        .transpose()?
        .map(|(at, id)| (at, DeliveryId(id)));
    let client = state.pool.get().await?;
    // One more than asked tells whether another page exists.
    let mut found =
        delivery_log::list(&client, principal.account_id, &filter, after, limit + 1).await?;
    let next_cursor = if found.len() as i64 > limit {
        found.truncate(limit as usize);
        found.last().map(|d| cursor::encode(d.created_at, d.id.0))
    } else {
        None
    };
    Ok(HttpResponse::Ok().json(DeliveryList {
        deliveries: found.into_iter().map(DeliveryView::from).collect(),
        next_cursor,
    }))
}

fn parse_states(raw: Option<&str>) -> Result<Vec<DeliveryState>, ApiError> {
    let mut states = Vec::new();
    for name in raw.into_iter().flat_map(|r| r.split(',')).map(str::trim) {
        let state = name.parse::<DeliveryState>().map_err(|_| {
            ApiError::InvalidRequest(format!(
                "unknown status {name:?}: use pending, held, delivered, abandoned or \
                 undeliverable, comma-separated"
            ))
        })?;
        if !states.contains(&state) {
            states.push(state);
        }
    }
    Ok(states)
}

fn instant(field: &str, raw: &str) -> Result<OffsetDateTime, ApiError> {
    parse_instant(raw).ok_or_else(|| {
        ApiError::InvalidRequest(format!(
            "{field} {raw:?} is not a date-time (RFC 3339, e.g. 2026-01-31T12:00:00Z)"
        ))
    })
}

#[utoipa::path(get, path = "/api/v1/deliveries/{id}", operation_id = "get_delivery", tag = "webhooks",
    params(("id" = Uuid, Path, description = "The delivery's id.")),
    responses(
        (status = 200, description = "The delivery and every attempt.", body = DeliveryDetail),
        (status = 400, description = "The id is not a UUID.", body = ErrorBody),
        (status = 404, description = "No such delivery of this account.", body = ErrorBody),
    ))]
pub(crate) async fn get(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<DeliveryId>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let client = state.pool.get().await?;
    let delivery = delivery_log::get(&client, principal.account_id, id, state.floor())
        .await?
        .ok_or_else(not_found)?;
    let attempts = delivery_log::attempts(&client, id).await?;
    Ok(HttpResponse::Ok().json(DeliveryDetail {
        delivery: delivery.into(),
        attempts_log: attempts.into_iter().map(AttemptView::from).collect(),
    }))
}

#[utoipa::path(post, path = "/api/v1/deliveries/{id}/resend", operation_id = "resend_delivery", tag = "webhooks",
    params(("id" = Uuid, Path, description = "The delivery's id.")),
    responses(
        (status = 202, description = "One more attempt, outside the schedule, leaves now with \
          the same body and `delivery_id` and fresh signatures. A resend asked for while \
          another of the same delivery waits or runs joins it.", body = DeliveryView),
        (status = 400, description = "The id is not a UUID.", body = ErrorBody),
        (status = 404, description = "No such delivery of this account.", body = ErrorBody),
        (status = 409, description = "The delivery is still `pending` (its schedule runs) or \
          `held` (its URL is disabled or paused: enable or resume it).", body = ErrorBody),
    ))]
pub(crate) async fn resend(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<DeliveryId>,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await?;
    let (account, floor) = (principal.account_id, state.floor());
    match delivery_log::request_resend(&client, account, id.into_inner(), floor).await? {
        Resend::Requested(delivery) => {
            Ok(HttpResponse::Accepted().json(DeliveryView::from(delivery)))
        }
        Resend::StillPending => Err(ApiError::Conflict(
            "the delivery is still pending (its schedule runs) or held (its URL is disabled or \
             paused: enable or resume it); resend it once it has ended"
                .to_owned(),
        )),
        Resend::NotFound => Err(not_found()),
    }
}

/// The recover body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecoverBody {
    /// Deliveries created at or after this date-time.
    #[schema(format = DateTime)]
    since: String,
    /// Deliveries created before this date-time; default now.
    #[schema(format = DateTime)]
    until: Option<String>,
}

/// How many deliveries a recover restarts.
#[derive(Debug, Serialize, ToSchema)]
pub struct Recovered {
    /// The `abandoned` deliveries of the window, each starting a fresh schedule.
    count: i64,
}

#[utoipa::path(post, path = "/api/v1/deliveries/recover", operation_id = "recover_deliveries", tag = "webhooks",
    request_body = RecoverBody,
    responses(
        (status = 202, description = "Every `abandoned` delivery of the account created in the \
          window starts a fresh schedule (attempt numbers continue in its log). Recovered \
          deliveries are sent beside everyone's new ones, never ahead of them.",
         body = Recovered),
        (status = 400, description = "A missing or bad date-time, or `until` not after `since`.",
         body = ErrorBody),
    ))]
pub(crate) async fn recover(
    state: web::Data<AppState>,
    principal: Principal,
    body: web::Json<RecoverBody>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let since = instant("since", &body.since)?;
    let until = match body.until.as_deref() {
        Some(raw) => instant("until", raw)?,
        None => clock::now(),
    };
    if until <= since {
        return Err(ApiError::InvalidRequest(
            "until must be later than since".to_owned(),
        ));
    }
    let client = state.pool.get().await?;
    let count = delivery_log::request_recover(&client, principal.account_id, since, until).await?;
    Ok(HttpResponse::Accepted().json(Recovered { count }))
}
