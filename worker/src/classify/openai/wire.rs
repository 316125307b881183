//! What goes over HTTP: the chat request in either response format, what a response
//! means (an answer, a rejection, or a failure worth another try), and how long to wait
//! before the next try.

use std::{collections::hash_map::RandomState, hash::BuildHasher, sync::Arc, time::Duration};

use bytes::Bytes;
use reqwest::{header::HeaderMap, StatusCode};
use serde::Serialize;
use serde_json::Value;

use super::{
    error::{Problem, ProviderError},
    media::DataUrl,
    payload::ChatPayload,
    prompt::{self, Schema},
    MAX_RETRY_AFTER,
};

/// How a request asks for JSON, on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wire {
    JsonSchema,
    JsonObject,
}

/// One failed try: worth another, or final.
pub(super) enum Attempt {
    Retry {
        problem: Problem,
        /// How long the server asked us to wait (`retry-after`).
        wait: Option<Duration>,
    },
    Fatal(ProviderError),
}

impl From<Problem> for Attempt {
    fn from(problem: Problem) -> Self {
        Self::Retry {
            problem,
            wait: None,
        }
    }
}

/// A chat completion request, built once per call and sent on every try.
pub(super) struct ChatRequest<'a> {
    /// The model name.
    pub(super) model: &'a str,
    /// The messages: the system prompt, then the content.
    pub(super) messages: Value,
    /// The answer's schema.
    pub(super) schema: Schema,
    /// `max_tokens`, when set.
    pub(super) max_tokens: Option<u32>,
    /// The image or video whose URL `messages` holds as its placeholder.
    pub(super) data_url: Option<Arc<DataUrl>>,
}

#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: &'a Value,
    response_format: FormatBody<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum FormatBody<'a> {
    JsonSchema { json_schema: NamedSchema<'a> },
    JsonObject { schema: &'a Schema },
}

#[derive(Serialize)]
struct NamedSchema<'a> {
    name: &'static str,
    strict: bool,
    schema: &'a Schema,
}

impl ChatRequest<'_> {
    /// The serialised body asking for JSON the `wire` way.
    pub(super) fn body(&self, wire: Wire) -> Result<ChatPayload, Attempt> {
        let response_format = match wire {
            Wire::JsonSchema => FormatBody::JsonSchema {
                json_schema: NamedSchema {
                    name: prompt::SCHEMA_NAME,
                    strict: true,
                    schema: &self.schema,
                },
            },
            Wire::JsonObject => FormatBody::JsonObject {
                schema: &self.schema,
            },
        };
        let body = ChatBody {
            model: self.model,
            messages: &self.messages,
            response_format,
            max_tokens: self.max_tokens,
        };
        let json = serde_json::to_vec(&body).map_err(|_| Attempt::Fatal(ProviderError::Request))?;
        ChatPayload::new(json, self.data_url.as_ref()).ok_or(Attempt::Fatal(ProviderError::Request))
    }
}

/// What one request brought back.
pub(super) enum Sent {
    /// A 2xx and its body.
    Success(Bytes),
    /// A 4xx about the `response_format` (it names `response_format`, `json_schema` or
    /// `json_object`).
    FormatRejected { status: u16, code: Option<String> },
    /// Any other 4xx but 408 and 429.
    Rejected { status: u16, code: Option<String> },
    /// Worth another try.
    Failed(Problem, Option<Duration>),
}

impl Sent {
    /// Reads a response (or the error sending it).
    pub(super) async fn read(sent: Result<reqwest::Response, reqwest::Error>) -> Self {
        let response = match sent {
            Ok(response) => response,
            Err(err) => return Self::Failed(transport_problem(&err), None),
        };
        let status = response.status();
        let wait = retry_after(response.headers());
        let body = match response.bytes().await {
            Ok(body) => body,
            Err(err) => return Self::Failed(transport_problem(&err), None),
        };
        if status.is_success() {
            return Self::Success(body);
        }
        // llama.cpp's Python server answers a `json_schema` request with a 500 whose body
        // is a validation error naming the field ("Input should be 'text' or
        // 'json_object'"): a rejection of the format, not a failure worth retrying.
        let format_rejected = mentions_response_format(&body)
            && (status.is_client_error()
                || (status.is_server_error() && mentions(&body, "'json_object'")));
        let retryable = status.is_server_error()
            || status == StatusCode::TOO_MANY_REQUESTS
            || status == StatusCode::REQUEST_TIMEOUT;
        if retryable && !format_rejected {
            return Self::Failed(Problem::Status(status.as_u16()), wait);
        }
        let code = server_code(&body);
        if format_rejected {
            Self::FormatRejected {
                status: status.as_u16(),
                code,
            }
        } else {
            Self::Rejected {
                status: status.as_u16(),
                code,
            }
        }
    }

    /// Whether the server refused the request with a 4xx.
    pub(super) fn is_client_error(&self) -> bool {
        matches!(self, Self::FormatRejected { .. } | Self::Rejected { .. })
    }

    /// The body of a success; anything else as a failed try.
    pub(super) fn into_body(self) -> Result<Bytes, Attempt> {
        match self {
            Self::Success(body) => Ok(body),
            Self::FormatRejected { status, code } | Self::Rejected { status, code } => {
                Err(Attempt::Fatal(ProviderError::Rejected { status, code }))
            }
            Self::Failed(problem, wait) => Err(Attempt::Retry { problem, wait }),
        }
    }
}

fn transport_problem(err: &reqwest::Error) -> Problem {
    if err.is_timeout() {
        Problem::Timeout
    } else {
        Problem::Connection
    }
}

/// Whether an error body is about the response format. Only the first 4 KiB are looked at.
fn mentions_response_format(body: &[u8]) -> bool {
    ["response_format", "json_schema", "json_object"]
        .iter()
        .any(|needle| mentions(body, needle))
}

/// Whether the first 4 KiB of `body` contain `needle` (ASCII case ignored).
fn mentions(body: &[u8], needle: &str) -> bool {
    let head = String::from_utf8_lossy(&body[..body.len().min(4096)]).to_ascii_lowercase();
    head.contains(&needle.to_ascii_lowercase())
}

/// The error `code` (or else `type`) an OpenAI-style error body names, when it is a short
/// identifier. The message is never kept: it may quote the request.
fn server_code(body: &[u8]) -> Option<String> {
    let body: Value = serde_json::from_slice(body).ok()?;
    let error = body.get("error")?;
    let code = [error.get("code"), error.get("type")]
        .into_iter()
        .flatten()
        .find_map(|value| match value {
            Value::String(code) => Some(code.clone()),
            Value::Number(code) => Some(code.to_string()),
            _ => None,
        })
        .filter(|code| {
            !code.is_empty()
                && code.len() <= 64
                && code
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        });
    code
}

/// `retry-after-ms` (OpenAI) or `retry-after` in whole seconds, at most
/// [`MAX_RETRY_AFTER`].
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|value| value.is_finite() && *value >= 0.0)
    };
    let wait = number("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| number("retry-after"))?;
    Some(Duration::from_secs_f64(
        wait.min(MAX_RETRY_AFTER.as_secs_f64()),
    ))
}

/// The wait after try number `tried` (1-based): `base` doubled per earlier try, with up to
/// half of it taken off at random so workers do not retry in step; at least the server's
/// `retry-after`; never more than [`MAX_RETRY_AFTER`].
pub(super) fn backoff(base: Duration, tried: u32, server_wait: Option<Duration>) -> Duration {
    let full = base.saturating_mul(1u32 << tried.saturating_sub(1).min(16));
    let jitter = RandomState::new().hash_one(tried) % 1024;
    let jittered = full.saturating_sub(full / 2 * u32::try_from(jitter).unwrap_or(0) / 1024);
    jittered
        .max(server_wait.unwrap_or_default())
        .min(MAX_RETRY_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn backoff_doubles_per_try_within_half_jitter() {
        let base = Duration::from_millis(100);
        for tried in 1..=4u32 {
            let full = base * 2u32.pow(tried - 1);
            let wait = backoff(base, tried, None);
            assert!(wait <= full && wait >= full / 2, "try {tried}: {wait:?}");
        }
    }

    #[test]
    fn backoff_waits_at_least_what_the_server_asks_and_at_most_the_cap() {
        let base = Duration::from_millis(1);
        let asked = Duration::from_secs(2);
        assert!(backoff(base, 1, Some(asked)) >= asked);
        assert_eq!(backoff(Duration::from_secs(60), 3, None), MAX_RETRY_AFTER);
    }

    #[test]
    fn retry_after_reads_milliseconds_or_seconds_up_to_the_cap() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("30"));
        assert_eq!(retry_after(&headers), Some(MAX_RETRY_AFTER));
        headers.insert("retry-after", HeaderValue::from_static("31"));
        assert_eq!(retry_after(&headers), Some(MAX_RETRY_AFTER));
        headers.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn format_rejections_are_told_from_other_client_errors() {
        let llama = br#"{"detail":[{"type":"literal_error","loc":["body","response_format","type"],"msg":"Input should be 'text' or 'json_object'"}]}"#;
        assert!(mentions_response_format(llama));
        let auth = br#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        assert!(!mentions_response_format(auth));
    }

    #[test]
    fn only_short_identifiers_are_kept_from_error_bodies() {
        let auth = br#"{"error":{"message":"Incorrect API key sk-123","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        assert_eq!(server_code(auth).as_deref(), Some("invalid_api_key"));
        let llama = br#"{"error":{"code":400,"message":"x","type":"invalid_request_error"}}"#;
        assert_eq!(server_code(llama).as_deref(), Some("400"));
        let prose = br#"{"error":{"code":"the text was: something bad","type":null}}"#;
        assert_eq!(server_code(prose), None);
        assert_eq!(server_code(b"Bad Request"), None);
    }
}
