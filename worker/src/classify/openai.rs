//! The `openai` provider: any OpenAI-compatible model server (OpenAI, vLLM, Ollama, llama.cpp,
//! speaches). Text and chats go to `chat/completions` with a JSON schema built from the
//! account's policy; images and videos go to the vision model as `data:` URLs of the fetched
//! bytes; audio goes to `audio/transcriptions` and the transcript through the text check.
//!
//! Timeouts, 408, 429, 5xx, refusals, cut answers and answers that do not match the schema
//! are retried with exponential backoff, [`MAX_TRIES`] tries in all, then the call fails with
//! [`ProviderError::Unavailable`]: doubt is never a pass. Any other 4xx fails at once with
//! [`ProviderError::Rejected`], except a rejection of the `json_schema` response format in
//! `auto` mode, which switches the process to `json_object` with the schema.
//!
//! The server is the operator's, so requests do not go through the URL guard. Request and
//! response bodies (the content, transcripts, the model's words) are never logged.

mod answer;
mod error;
mod media;
mod prompt;
mod settings;

use std::{
    collections::hash_map::RandomState,
    hash::BuildHasher,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use bytes::Bytes;
use moderation_shared::domain::Modality;
use reqwest::{header::HeaderMap, StatusCode, Url};
use serde::Serialize;
use serde_json::Value;

pub use error::{Problem, ProviderError};
pub use settings::{OpenAiSettings, ResponseFormat, DEFAULT_RETRY_BASE, DEFAULT_TIMEOUT};

use super::{Media, Policy, TextContent, Verdict};
use prompt::Schema;

/// Tries per call before it fails with [`ProviderError::Unavailable`].
pub const MAX_TRIES: u32 = 5;

/// The longest wait a server's `retry-after` can ask for; longer asks are cut to this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// Which kind of visual media a check is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VisualKind {
    /// An image, sent as an `image_url` content part.
    Image,
    /// A video, sent whole as a `video_url` content part.
    Video,
}

impl TryFrom<Modality> for VisualKind {
    type Error = Modality;

    /// Images and videos; any other modality is handed back.
    fn try_from(modality: Modality) -> Result<Self, Self::Error> {
        match modality {
            Modality::Image => Ok(Self::Image),
            Modality::Video => Ok(Self::Video),
            other => Err(other),
        }
    }
}

/// The model server's HTTP client could not be built (a bad extra CA file).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the model server's HTTP client")]
pub struct ClientError(#[from] reqwest::Error);

/// A client of one OpenAI-compatible server, shared by every job of a worker process.
#[derive(Debug)]
pub struct OpenAiProvider {
    settings: OpenAiSettings,
    client: reqwest::Client,
    chat_url: Url,
    transcription_url: Url,
    /// `auto` mode only: the server rejected `json_schema`, so `json_object` is used.
    json_object_learned: AtomicBool,
}

/// How a request asks for JSON, on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    JsonSchema,
    JsonObject,
}

/// One failed try: worth another, or final.
enum Attempt {
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
struct ChatRequest<'a> {
    model: &'a str,
    messages: Value,
    schema: Schema,
    max_tokens: Option<u32>,
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
    fn body(&self, wire: Wire) -> Result<Bytes, Attempt> {
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
        serde_json::to_vec(&body)
            .map(Bytes::from)
            .map_err(|_| Attempt::Fatal(ProviderError::Request))
    }
}

impl OpenAiProvider {
    /// A provider for the server `settings` describe.
    pub fn new(settings: OpenAiSettings) -> Result<Self, ClientError> {
        let mut builder = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("moderation-worker/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = &settings.extra_ca_pem {
            for cert in reqwest::Certificate::from_pem_bundle(pem)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        Ok(Self {
            client: builder.build()?,
            chat_url: settings.endpoint("chat/completions"),
            transcription_url: settings.endpoint("audio/transcriptions"),
            settings,
            json_object_learned: AtomicBool::new(false),
        })
    }

    /// Judges a prompt, chat or transcript with the text model. The verdict has one `custom`
    /// entry per custom category of `policy`, no visual categories, and the model's raw
    /// reason when prohibited.
    pub async fn check_text(
        &self,
        content: TextContent<'_>,
        policy: &Policy,
    ) -> Result<Verdict, ProviderError> {
        let request = ChatRequest {
            model: model(&self.settings.text_model, "APP_TEXT_MODEL")?,
            messages: prompt::text_messages(content, policy),
            schema: prompt::text_schema(policy),
            max_tokens: self.settings.max_tokens,
        };
        let request = &request;
        self.with_retries("chat", move || async move {
            let content = self.complete(request).await?;
            Ok(answer::text_verdict(&content, policy)?)
        })
        .await
    }

    /// Judges an image or a whole video with the vision model. The verdict has the three
    /// visual categories (`nsfw` only when `policy.nsfw_check`; otherwise it is neither asked
    /// nor read), one `custom` entry per custom category, and the model's raw reason when
    /// prohibited.
    pub async fn check_visual(
        &self,
        kind: VisualKind,
        media: &Media,
        policy: &Policy,
    ) -> Result<Verdict, ProviderError> {
        let request = ChatRequest {
            model: model(&self.settings.vision_model, "APP_VISION_MODEL")?,
            messages: prompt::visual_messages(kind, media::data_url(kind, media), policy),
            schema: prompt::visual_schema(policy),
            max_tokens: self.settings.max_tokens,
        };
        let request = &request;
        self.with_retries("chat", move || async move {
            let content = self.complete(request).await?;
            Ok(answer::visual_verdict(&content, policy)?)
        })
        .await
    }

    /// Transcribes audio with the transcription model; an empty string means no speech. The
    /// transcript is the caller's to check and must never be stored or logged.
    pub async fn transcribe(&self, media: &Media) -> Result<String, ProviderError> {
        let model = model(&self.settings.transcribe_model, "APP_TRANSCRIBE_MODEL")?;
        let (file_name, mime) = media::audio_file(media);
        let (file_name, mime) = (file_name.as_str(), mime.as_str());
        let bytes = &Bytes::copy_from_slice(&media.bytes);
        self.with_retries("transcription", move || async move {
            let file =
                reqwest::multipart::Part::stream_with_length(bytes.clone(), bytes.len() as u64)
                    .file_name(file_name.to_owned());
            // A declared type reqwest cannot parse goes without one; the name still tells.
            let file = match file.mime_str(mime) {
                Ok(file) => file,
                Err(_) => {
                    reqwest::multipart::Part::stream_with_length(bytes.clone(), bytes.len() as u64)
                        .file_name(file_name.to_owned())
                }
            };
            let form = reqwest::multipart::Form::new()
                .part("file", file)
                .text("model", model.to_owned())
                .text("response_format", "json");
            let request = self.authorised(self.client.post(self.transcription_url.clone()));
            let body = Sent::read(request.multipart(form).send().await)
                .await
                .into_body()?;
            Ok(answer::transcript(&body)?.trim().to_owned())
        })
        .await
    }

    /// Runs `attempt` up to [`MAX_TRIES`] times, waiting between tries.
    async fn with_retries<T, F, Fut>(
        &self,
        endpoint: &'static str,
        mut attempt: F,
    ) -> Result<T, ProviderError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Attempt>>,
    {
        let mut tried = 0;
        loop {
            tried += 1;
            let (problem, wait) = match attempt().await {
                Ok(value) => return Ok(value),
                Err(Attempt::Fatal(err)) => {
                    tracing::warn!(endpoint, error = %err, "Model server refused the request");
                    return Err(err);
                }
                Err(Attempt::Retry { problem, wait }) => (problem, wait),
            };
            if tried >= MAX_TRIES {
                tracing::warn!(endpoint, tries = tried, %problem, "Model server gave up");
                return Err(ProviderError::Unavailable {
                    tries: tried,
                    last: problem,
                });
            }
            let delay = backoff(self.settings.retry_base, tried, wait);
            tracing::info!(
                endpoint,
                try_number = tried,
                %problem,
                delay_ms = delay.as_millis() as u64,
                "Model server call failed; retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// One try of a chat completion: its content, or why not. In `auto` mode a rejection of
    /// `json_schema` is followed at once by the same request with `json_object`.
    async fn complete(&self, request: &ChatRequest<'_>) -> Result<String, Attempt> {
        let wire = self.wire();
        let sent = self.post_chat(request.body(wire)?).await;
        let outcome = match sent {
            Sent::FormatRejected { .. }
                if wire == Wire::JsonSchema
                    && self.settings.response_format == ResponseFormat::Auto =>
            {
                let retried = self.post_chat(request.body(Wire::JsonObject)?).await;
                if !retried.is_client_error() {
                    self.learn_json_object();
                }
                retried
            }
            other => other,
        };
        let body = outcome.into_body()?;
        Ok(answer::completion_content(&body)?)
    }

    async fn post_chat(&self, body: Bytes) -> Sent {
        let request = self
            .authorised(self.client.post(self.chat_url.clone()))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        Sent::read(request.send().await).await
    }

    fn authorised(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.settings.api_key {
            Some(key) => request.bearer_auth(key.expose()),
            None => request,
        }
    }

    fn wire(&self) -> Wire {
        match self.settings.response_format {
            ResponseFormat::JsonSchema => Wire::JsonSchema,
            ResponseFormat::JsonObject => Wire::JsonObject,
            ResponseFormat::Auto if self.json_object_learned.load(Ordering::Relaxed) => {
                Wire::JsonObject
            }
            ResponseFormat::Auto => Wire::JsonSchema,
        }
    }

    fn learn_json_object(&self) {
        if !self.json_object_learned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "Model server rejects the json_schema response format; using json_object with \
                 the schema from now on (set APP_OPENAI_RESPONSE_FORMAT=json_object to skip \
                 the first try)"
            );
        }
    }
}

fn model<'a>(model: &'a Option<String>, variable: &'static str) -> Result<&'a str, ProviderError> {
    model.as_deref().ok_or(ProviderError::NoModel(variable))
}

/// What one request brought back.
enum Sent {
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
    async fn read(sent: Result<reqwest::Response, reqwest::Error>) -> Self {
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
        let retryable = status.is_server_error()
            || status == StatusCode::TOO_MANY_REQUESTS
            || status == StatusCode::REQUEST_TIMEOUT;
        if retryable {
            return Self::Failed(Problem::Status(status.as_u16()), wait);
        }
        let code = server_code(&body);
        if status.is_client_error() && mentions_response_format(&body) {
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

    fn is_client_error(&self) -> bool {
        matches!(self, Self::FormatRejected { .. } | Self::Rejected { .. })
    }

    fn into_body(self) -> Result<Bytes, Attempt> {
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

/// Whether a 4xx body is about the response format. Only the first 4 KiB are looked at.
fn mentions_response_format(body: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&body[..body.len().min(4096)]).to_ascii_lowercase();
    ["response_format", "json_schema", "json_object"]
        .iter()
        .any(|needle| head.contains(needle))
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
fn backoff(base: Duration, tried: u32, server_wait: Option<Duration>) -> Duration {
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

    #[test]
    fn only_images_and_videos_are_visual_kinds() {
        assert_eq!(VisualKind::try_from(Modality::Image), Ok(VisualKind::Image));
        assert_eq!(VisualKind::try_from(Modality::Video), Ok(VisualKind::Video));
        assert_eq!(VisualKind::try_from(Modality::Audio), Err(Modality::Audio));
    }
}
