//! HTTP handlers, one module per resource, and the helpers every resource registers with.
//!
//! Routes import nothing above them: `startup` registers them, and `openapi` documents them.

use actix_web::{web, HttpResponse, Resource};

use crate::error::ApiError;

pub mod appeals;
pub mod audit;
mod cursor;
pub mod deliveries;
pub mod endpoint;
pub mod export;
pub mod health;
pub mod jobs;
pub mod me;
pub mod policies;
pub mod policy;
pub mod registry;
pub mod review;
pub mod submissions;
pub mod usage;
pub mod webhooks;

/// A resource answering 405 (not the app's 404) for a method it has no route for.
pub fn resource(path: &str) -> Resource {
    web::resource(path).default_service(web::to(method_not_allowed))
}

async fn method_not_allowed() -> Result<HttpResponse, ApiError> {
    Err(ApiError::MethodNotAllowed)
}

/// Answers a path no resource has (the app's default service).
pub async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::NotFound("no such resource".to_owned()))
}
