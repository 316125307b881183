//! Why the model server gave no verdict. Nothing here carries the content or the server's
//! answer text: only statuses, error codes the server names and our own descriptions.

use std::fmt;

use moderation_shared::domain::FailureCode;

/// One failed try that another try may fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// No complete answer within `APP_OPENAI_TIMEOUT_MS`.
    Timeout,
    /// The server could not be reached, or the connection broke.
    Connection,
    /// A status worth retrying: 408, 429 or 5xx.
    Status(u16),
    /// The model refused to answer (`message.refusal`).
    Refusal,
    /// The answer was cut short (`finish_reason` `length`).
    Truncated,
    /// The server's own content filter withheld the answer (`finish_reason`
    /// `content_filter`).
    Filtered,
    /// The answer did not parse or did not match the schema; says what was wrong, never
    /// what the answer said.
    Invalid(String),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout => f.write_str("timed out"),
            Self::Connection => f.write_str("connection failed"),
            Self::Status(status) => write!(f, "HTTP {status}"),
            Self::Refusal => f.write_str("the model refused"),
            Self::Truncated => f.write_str("the answer was cut short (finish_reason length)"),
            Self::Filtered => f.write_str("the server filtered the answer"),
            Self::Invalid(what) => write!(f, "invalid answer: {what}"),
        }
    }
}

/// The provider gave no verdict; the job fails with [`ProviderError::code`].
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// Every try failed in a way a retry could fix (timeouts, 429, 5xx, refusals, cut or
    /// invalid answers).
    #[error("the model server failed {tries} tries; the last: {last}")]
    Unavailable {
        /// Tries made.
        tries: u32,
        /// What went wrong on the last one.
        last: Problem,
    },
    /// The server answered with a status no retry can fix: a 4xx other than 408 and 429 (bad
    /// key, unknown model, a request it cannot take) or a redirect.
    #[error("the model server refused the request with HTTP {status}{}", server_code(.code))]
    Rejected {
        /// The status.
        status: u16,
        /// The error `code` or `type` the server named, if any (never its message).
        code: Option<String>,
    },
    /// The model this content needs is not configured.
    #[error("no model is configured: set {0}")]
    NoModel(&'static str),
    /// The request body could not be serialised.
    #[error("the request to the model server could not be built")]
    Request,
}

fn server_code(code: &Option<String>) -> String {
    code.as_deref()
        .map(|code| format!(" ({code})"))
        .unwrap_or_default()
}

impl ProviderError {
    /// The contract's error code for the job: always `CLASSIFIER_UNAVAILABLE`.
    pub fn code(&self) -> FailureCode {
        FailureCode::ClassifierUnavailable
    }

    /// A sentence for the client, without internal detail.
    pub fn message(&self) -> &'static str {
        match self {
            Self::Unavailable { .. } => "The classifier did not give a usable answer in time.",
            Self::Rejected { .. } => "The classifier refused the request.",
            Self::NoModel(_) => "The classifier is not configured for this kind of content.",
            Self::Request => "The classifier could not be asked.",
        }
    }
}
