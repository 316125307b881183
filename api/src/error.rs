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

/// The stable codes of the contract's error body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// `INVALID_REQUEST`, 400.
    InvalidRequest,
    /// `UNAUTHORIZED`, 401.
    Unauthorized,
    /// `FORBIDDEN`, 403.
    Forbidden,
    /// `ACCOUNT_TERMINATED`, 403.
    AccountTerminated,
    /// `NOT_FOUND`, 404.
    NotFound,
    /// `METHOD_NOT_ALLOWED`, 405.
    MethodNotAllowed,
    /// `CONFLICT`, 409.
    Conflict,
    /// `PAYLOAD_TOO_LARGE`, 413.
    PayloadTooLarge,
    /// `UNSUPPORTED_MEDIA_TYPE`, 415.
    UnsupportedMediaType,
    /// `RATE_LIMITED`, 429.
    RateLimited,
    /// `QUOTA_EXCEEDED`, 429.
    QuotaExceeded,
    /// `SERVICE_UNAVAILABLE`, 503.
    ServiceUnavailable,
    /// `INTERNAL_ERROR`, 500.
    Internal,
}

impl ErrorCode {
    /// The codes a bare status produced by the framework can be answered with, first match
    /// wins: a status shared by two codes gets the general one.
    const FOR_BARE_STATUS: [ErrorCode; 11] = [
        ErrorCode::InvalidRequest,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Conflict,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::RateLimited,
        ErrorCode::ServiceUnavailable,
        ErrorCode::Internal,
    ];

    /// The one table: each code's text, its status, and the message of a bare status answered
    /// with it.
    fn row(self) -> (&'static str, StatusCode, &'static str) {
        match self {
            Self::InvalidRequest => (
                "INVALID_REQUEST",
                StatusCode::BAD_REQUEST,
                "the request could not be understood",
            ),
            Self::Unauthorized => (
                "UNAUTHORIZED",
                StatusCode::UNAUTHORIZED,
                "authentication required",
            ),
            Self::Forbidden => ("FORBIDDEN", StatusCode::FORBIDDEN, "forbidden"),
            Self::AccountTerminated => (
                "ACCOUNT_TERMINATED",
                StatusCode::FORBIDDEN,
                "this account was terminated by an administrator",
            ),
            Self::NotFound => ("NOT_FOUND", StatusCode::NOT_FOUND, "no such resource"),
            Self::MethodNotAllowed => (
                "METHOD_NOT_ALLOWED",
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed for this resource",
            ),
            Self::Conflict => ("CONFLICT", StatusCode::CONFLICT, "conflict"),
            Self::PayloadTooLarge => (
                "PAYLOAD_TOO_LARGE",
                StatusCode::PAYLOAD_TOO_LARGE,
                "the request body is too large",
            ),
            Self::UnsupportedMediaType => (
                "UNSUPPORTED_MEDIA_TYPE",
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported content type",
            ),
            Self::RateLimited => (
                "RATE_LIMITED",
                StatusCode::TOO_MANY_REQUESTS,
                "too many requests",
            ),
            Self::QuotaExceeded => (
                "QUOTA_EXCEEDED",
                StatusCode::TOO_MANY_REQUESTS,
                "the daily quota is used up",
            ),
            Self::ServiceUnavailable => (
                "SERVICE_UNAVAILABLE",
                StatusCode::SERVICE_UNAVAILABLE,
                "the service is temporarily unavailable; retry later",
            ),
            Self::Internal => (
                "INTERNAL_ERROR",
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error",
            ),
        }
    }

    /// The code as the body writes it.
    pub fn as_str(self) -> &'static str {
        self.row().0
    }

    /// The status it is answered with.
    pub fn status(self) -> StatusCode {
        self.row().1
    }

    /// What the body says when this code answers a bare status (one with no `ApiError`
    /// behind it).
    pub fn default_message(self) -> &'static str {
        self.row().2
    }

    /// The code of a bare status produced by the framework: the first code of its status, else
    /// `INTERNAL_ERROR` for a 5xx and `INVALID_REQUEST` for anything else.
    pub fn for_status(status: StatusCode) -> Self {
        Self::FOR_BARE_STATUS
            .into_iter()
            .find(|code| code.status() == status)
            .unwrap_or(if status.is_server_error() {
                ErrorCode::Internal
            } else {
                ErrorCode::InvalidRequest
            })
    }
}

impl ApiError {
    /// The stable code of the body (which also gives the status).
    pub fn code(&self) -> ErrorCode {
        match self {
            ApiError::InvalidRequest(_) => ErrorCode::InvalidRequest,
            ApiError::Unauthorized(_) => ErrorCode::Unauthorized,
            ApiError::Forbidden(_) => ErrorCode::Forbidden,
            ApiError::AccountTerminated => ErrorCode::AccountTerminated,
            ApiError::NotFound(_) => ErrorCode::NotFound,
            ApiError::MethodNotAllowed => ErrorCode::MethodNotAllowed,
            ApiError::Conflict(_) => ErrorCode::Conflict,
            ApiError::PayloadTooLarge(_) => ErrorCode::PayloadTooLarge,
            ApiError::UnsupportedMediaType(_) => ErrorCode::UnsupportedMediaType,
            ApiError::RateLimited { .. } => ErrorCode::RateLimited,
            ApiError::QuotaExceeded { .. } => ErrorCode::QuotaExceeded,
            ApiError::ServiceUnavailable { .. } => ErrorCode::ServiceUnavailable,
            ApiError::Internal(_) => ErrorCode::Internal,
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

impl From<tokio_postgres::Error> for ApiError {
    fn from(err: tokio_postgres::Error) -> Self {
        DbError::from(err).into()
    }
}

/// Postgres out of reach, or the connection lost under the statement (a restart, a failover),
/// is a 503: see [`DbError::is_unavailable`].
impl From<DbError> for ApiError {
    fn from(err: DbError) -> Self {
        if err.is_unavailable() {
            ApiError::unavailable(err)
        } else {
            ApiError::Internal(err.into())
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.code().status()
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
            error: self.code().as_str(),
            message,
            status_code: status.as_u16(),
            job_id,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_status_gets_the_general_code_of_its_status() {
        let code =
            |status: u16| ErrorCode::for_status(StatusCode::from_u16(status).unwrap()).as_str();

        assert_eq!(code(400), "INVALID_REQUEST");
        assert_eq!(code(403), "FORBIDDEN");
        assert_eq!(code(408), "INVALID_REQUEST");
        assert_eq!(code(429), "RATE_LIMITED");
        assert_eq!(code(502), "INTERNAL_ERROR");
        assert_eq!(code(503), "SERVICE_UNAVAILABLE");
    }

    #[test]
    fn an_error_is_answered_with_the_status_of_its_code() {
        let terminated = ApiError::AccountTerminated;
        let quota = ApiError::QuotaExceeded {
            message: String::new(),
            retry_after: 1,
        };

        assert_eq!(terminated.status_code(), StatusCode::FORBIDDEN);
        assert_eq!(terminated.code().as_str(), "ACCOUNT_TERMINATED");
        assert_eq!(quota.status_code(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(quota.code().as_str(), "QUOTA_EXCEEDED");
    }
}
