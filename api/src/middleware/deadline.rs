//! Every request answered within the deadline, whatever a dependency does.

use std::time::Duration;

use actix_web::{
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    middleware::Next,
    web,
};

use crate::{error::ApiError, state::AppState};

/// Answers 503 when the request has not been answered within `APP_REQUEST_DEADLINE_MS`: a
/// Postgres or Redis that stops answering (a blackholed network) makes requests fail in time
/// rather than hang. The handler's future is dropped, which drops its pooled connections and
/// requests in flight. A handler that knows more answers first with its own shorter deadline
/// (a submission's 503 carries its `job_id`).
pub async fn deadline(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let limit = req
        .app_data::<web::Data<AppState>>()
        .map_or(Duration::MAX, |state| state.request_deadline);
    match tokio::time::timeout(limit, next.call(req)).await {
        Ok(res) => res,
        Err(_) => Err(ApiError::unavailable(anyhow::anyhow!(
            "the request was not answered within {limit:?}"
        ))
        .into()),
    }
}
