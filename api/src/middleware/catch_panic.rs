//! A panicking handler answered as a generic 500.

use std::panic::AssertUnwindSafe;

use actix_web::{
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    middleware::Next,
};
use futures_util::FutureExt;

use crate::error::ApiError;

/// Turns a panicking handler into a generic 500 instead of a dropped connection. The panic
/// becomes an [`ApiError::Internal`], whose body says nothing of the cause.
///
/// It must not clone the request before routing (actix needs sole ownership to route), so it
/// answers with an error that the server renders, rather than building a response itself.
pub async fn catch_panic(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    match AssertUnwindSafe(next.call(req)).catch_unwind().await {
        Ok(res) => res,
        Err(_) => Err(ApiError::Internal(anyhow::anyhow!("request handler panicked")).into()),
    }
}
