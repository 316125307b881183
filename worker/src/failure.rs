//! Why a job could not be classified, and whether trying again could help.

use moderation_shared::{db::DbError, domain::FailureCode};

/// A job that did not get a verdict on this try.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Failure {
    /// The contract error code (`MEDIA_UNREACHABLE`, `CLASSIFIER_UNAVAILABLE`, ...).
    pub code: FailureCode,
    /// A sentence for the client; never internal detail, never the content.
    pub message: String,
    /// Whether another try may succeed (the job goes back to the queue while it has tries).
    pub retryable: bool,
}

impl Failure {
    /// A failure no retry can fix.
    pub fn permanent(code: FailureCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retryable: false,
        }
    }

    /// A failure another try may not meet.
    pub fn transient(code: FailureCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retryable: true,
        }
    }
}

impl From<DbError> for Failure {
    fn from(err: DbError) -> Self {
        tracing::warn!(error = ?err, "Database failure during a job");
        Self::transient(
            FailureCode::Internal,
            "The service failed while processing the job.",
        )
    }
}

impl From<crate::classify::openai::ProviderError> for Failure {
    fn from(err: crate::classify::openai::ProviderError) -> Self {
        tracing::warn!(error = %err, "The model server gave no verdict");
        Self::permanent(err.code(), err.message())
    }
}
