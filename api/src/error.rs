//! The one error type of the api and the contract's error body.
//!
//! Every error, including actix-web's own (extractor failures, unknown routes, wrong methods,
//! oversized bodies, panics), leaves as `{"error": CODE, "message": text, "statusCode": n}`,
//! plus `job_id` where a job exists. A 5xx body is always generic; the cause goes to the log.

use actix_web::{
    error::{JsonPayloadError, PathError, QueryPayloadError},
    http::{header, StatusCode},
    HttpRequest, HttpResponse, ResponseError,
};
use moderation_shared::db::DbError;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

/// An error answered to a client.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the request is malformed or breaks a rule.
    #[error("{0}")]
    InvalidRequest(String),
    /// 401: the key is missing, malformed, unknown, disabled, deleted or expired.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// 403: the key lacks the scope the endpoint needs.
    #[error("{0}")]
    Forbidden(String),
    /// 403: the account was terminated.
    #[error("this account was terminated by an administrator")]
    AccountTerminated,
    /// 404.
    #[error("{0}")]
    NotFound(String),
    /// 405.
    #[error("method not allowed for this resource")]
    MethodNotAllowed,
    /// 409.
    #[error("{0}")]
    Conflict(String),
    /// 413.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 415.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 429: a rate window is exhausted or the source is locked out.
    #[error("{message}")]
    RateLimited {
        /// What was exceeded.
        message: String,
        /// Whole seconds until a retry can pass (at least 1).
        retry_after: u64,
    },
    /// 429: the daily quota is used up.
    #[error("{message}")]
    QuotaExceeded {
        /// What was exceeded.
        message: String,
        /// Whole seconds until the quota resets (at least 1).
        retry_after: u64,
    },
    /// 503: a dependency is unavailable; `job_id` when a job was already persisted.
    #[error("the service is temporarily unavailable; retry later")]
    ServiceUnavailable {
        /// The job that exists despite the failure, if any.
        job_id: Option<Uuid>,
        /// The cause, for the log only.
        #[source]
        source: Option<anyhow::Error>,
    },
    /// 500: the cause goes to the log, never to the client.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

/// The contract's error body.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Stable code: `INVALID_REQUEST`, `UNAUTHORIZED`, `FORBIDDEN`, `ACCOUNT_TERMINATED`,
    /// `NOT_FOUND`, `METHOD_NOT_ALLOWED`, `CONFLICT`, `PAYLOAD_TOO_LARGE`,
    /// `UNSUPPORTED_MEDIA_TYPE`, `RATE_LIMITED`, `QUOTA_EXCEEDED`, `INTERNAL_ERROR` or
    /// `SERVICE_UNAVAILABLE`.
    #[schema(example = "INVALID_REQUEST")]
    pub error: &'static str,
    /// A sentence for people.
    pub message: String,
    /// The HTTP status.
    #[serde(rename = "statusCode")]
    pub status_code: u16,
    /// The job concerned, when one exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub job_id: Option<Uuid>,
}

impl ApiError {
    /// The stable code of the body.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) => "INVALID_REQUEST",
            ApiError::Unauthorized(_) => "UNAUTHORIZED",
            ApiError::Forbidden(_) => "FORBIDDEN",
            ApiError::AccountTerminated => "ACCOUNT_TERMINATED",
            ApiError::NotFound(_) => "NOT_FOUND",
            ApiError::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ApiError::Conflict(_) => "CONFLICT",
            ApiError::PayloadTooLarge(_) => "PAYLOAD_TOO_LARGE",
            ApiError::UnsupportedMediaType(_) => "UNSUPPORTED_MEDIA_TYPE",
            ApiError::RateLimited { .. } => "RATE_LIMITED",
            ApiError::QuotaExceeded { .. } => "QUOTA_EXCEEDED",
            ApiError::ServiceUnavailable { .. } => "SERVICE_UNAVAILABLE",
            ApiError::Internal(_) => "INTERNAL_ERROR",
        }
    }

    /// A 503 caused by `source`.
    pub fn unavailable(source: impl Into<anyhow::Error>) -> Self {
        ApiError::ServiceUnavailable {
            job_id: None,
            source: Some(source.into()),
        }
    }
}

impl From<deadpool_postgres::PoolError> for ApiError {
    fn from(err: deadpool_postgres::PoolError) -> Self {
        ApiError::unavailable(err)
    }
}

impl From<DbError> for ApiError {
    fn from(err: DbError) -> Self {
        match err {
            DbError::Pool(_) => ApiError::unavailable(err),
            other => ApiError::Internal(other.into()),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::AccountTerminated => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::RateLimited { .. } | ApiError::QuotaExceeded { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ApiError::ServiceUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        match self {
            ApiError::Internal(source) => {
                tracing::error!(error = ?source, "Request failed with an internal error");
            }
            ApiError::ServiceUnavailable {
                source: Some(source),
                ..
            } => {
                tracing::warn!(error = ?source, "Request failed: a dependency is unavailable");
            }
            _ => {}
        }
        let message = self.to_string();
        let job_id = match self {
            ApiError::ServiceUnavailable { job_id, .. } => *job_id,
            _ => None,
        };
        let mut response = HttpResponse::build(status);
        if let ApiError::RateLimited { retry_after, .. }
        | ApiError::QuotaExceeded { retry_after, .. } = self
        {
            response.insert_header((header::RETRY_AFTER, (*retry_after).max(1).to_string()));
        }
        response.json(ErrorBody {
            error: self.code(),
            message,
            status_code: status.as_u16(),
            job_id,
        })
    }
}

/// The code and message of the contract body for a bare status produced by the framework.
pub fn body_for_status(status: StatusCode) -> (&'static str, &'static str) {
    match status.as_u16() {
        401 => ("UNAUTHORIZED", "authentication required"),
        403 => ("FORBIDDEN", "forbidden"),
        404 => ("NOT_FOUND", "no such resource"),
        405 => ("METHOD_NOT_ALLOWED", "method not allowed for this resource"),
        409 => ("CONFLICT", "conflict"),
        413 => ("PAYLOAD_TOO_LARGE", "the request body is too large"),
        415 => ("UNSUPPORTED_MEDIA_TYPE", "unsupported content type"),
        429 => ("RATE_LIMITED", "too many requests"),
        503 => (
            "SERVICE_UNAVAILABLE",
            "the service is temporarily unavailable; retry later",
        ),
        500..=599 => ("INTERNAL_ERROR", "internal error"),
        _ => ("INVALID_REQUEST", "the request could not be understood"),
    }
}

/// Error handler for `web::Json` extractors.
pub fn json_error(err: JsonPayloadError, _req: &HttpRequest) -> actix_web::Error {
    match err {
        JsonPayloadError::Overflow { limit }
        | JsonPayloadError::OverflowKnownLength { limit, .. } => {
            ApiError::PayloadTooLarge(format!("the JSON body is larger than {limit} bytes"))
        }
        JsonPayloadError::ContentType => ApiError::UnsupportedMediaType(
            "the body must be JSON (content-type: application/json)".to_owned(),
        ),
        JsonPayloadError::Deserialize(e) => {
            ApiError::InvalidRequest(format!("invalid JSON body: {e}"))
        }
        JsonPayloadError::Serialize(e) => ApiError::Internal(e.into()),
        other => ApiError::InvalidRequest(format!("invalid JSON body: {other}")),
    }
    .into()
}

/// Error handler for `web::Query` extractors.
pub fn query_error(err: QueryPayloadError, _req: &HttpRequest) -> actix_web::Error {
    ApiError::InvalidRequest(format!("invalid query string: {err}")).into()
}

/// Error handler for `web::Path` extractors.
pub fn path_error(err: PathError, _req: &HttpRequest) -> actix_web::Error {
    ApiError::InvalidRequest(format!("invalid path parameter: {err}")).into()
}
