//! `GET /api/v1/usage/volume?period=`: the caller's submitted jobs over time. The series
//! itself (buckets, periods, zeros) is [`moderation_shared::usage`], which the dashboard draws.

use actix_web::{web, HttpResponse};
use moderation_shared::{
    clock,
    usage::{self, Period, Point},
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::resource;
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// Registers the route under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/usage/volume").route(web::get().to(volume)));
}

/// The query string.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct VolumeQuery {
    /// `hour`, `day`, `week` (default) or `month`.
    #[param(example = "week")]
    pub period: Option<String>,
}

/// The response body.
#[derive(Debug, Serialize, ToSchema)]
pub struct Volume {
    /// The period, echoed.
    pub period: &'static str,
    /// `minute`, `hour` or `day`.
    pub bucket: &'static str,
    /// One point per bucket, oldest first.
    pub data: Vec<Point>,
}

/// Answers the caller's series for `period`.
#[utoipa::path(get, path = "/api/v1/usage/volume", operation_id = "usage_volume", tag = "account", params(VolumeQuery),
    responses(
        (status = 200, description = "Jobs submitted per bucket, oldest first, zeros included.",
         body = Volume),
        (status = 400, description = "An unknown period.", body = ErrorBody),
    ))]
pub async fn volume(
    principal: Principal,
    query: web::Query<VolumeQuery>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let period = Period::parse(query.period.as_deref())
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    let (unit, _) = period.bucket();
    let client = state.pool.get().await?;
    let data = usage::series(&client, principal.account_id, period, clock::now()).await?;
    Ok(HttpResponse::Ok().json(Volume {
        period: period.as_str(),
        bucket: unit,
        data,
    }))
}
