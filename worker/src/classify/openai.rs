//! The `openai` provider: any OpenAI-compatible model server (OpenAI, vLLM, Ollama, llama.cpp,
//! speaches). Text and chats go to `chat/completions` with a JSON schema built from the
//! account's policy; images and videos go to the vision model as `data:` URLs of the fetched
//! bytes, base64-encoded while the request body streams out (never held whole); audio goes to
//! `audio/transcriptions`, sharing the fetched bytes, and the transcript through the text check.
//!
//! Timeouts, 408, 429, 5xx, refusals, cut answers and answers that do not match the schema
//! are retried with exponential backoff, [`MODEL_CALL_MAX_TRIES`] tries in all, then the call
//! fails with [`ProviderError::Unavailable`]: doubt is never a pass. Any other 4xx fails at
//! once with [`ProviderError::Rejected`], except a rejection of the `json_schema` response
//! format in `auto` mode, which switches the process to `json_object` with the schema.
//!
//! The server is the operator's, so requests do not go through the URL guard. Request and
//! response bodies (the content, transcripts, the model's words) are never logged.

mod answer;
mod error;
mod media;
mod payload;
mod prompt;
mod settings;
mod wire;

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use moderation_shared::domain::Modality;
use reqwest::Url;

pub use error::{Problem, ProviderError};
pub use settings::{OpenAiSettings, ResponseFormat, DEFAULT_RETRY_BASE, DEFAULT_TIMEOUT};

use super::{Media, Policy, TextContent, Verdict};
use media::DataUrl;
use payload::ChatPayload;
use wire::{backoff, Attempt, ChatRequest, Sent, Wire};

/// Tries per call before it fails with [`ProviderError::Unavailable`].
pub const MODEL_CALL_MAX_TRIES: u32 = 5;

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
            data_url: None,
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
        let data_url = DataUrl::new(kind, media);
        let request = ChatRequest {
            model: model(&self.settings.vision_model, "APP_VISION_MODEL")?,
            messages: prompt::visual_messages(kind, data_url.placeholder().to_owned(), policy),
            schema: prompt::visual_schema(policy),
            max_tokens: self.settings.max_tokens,
            data_url: Some(Arc::new(data_url)),
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
        let bytes = &media.bytes;
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

    /// Runs `attempt` up to [`MODEL_CALL_MAX_TRIES`] times, waiting between tries.
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
            if tried >= MODEL_CALL_MAX_TRIES {
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

    async fn post_chat(&self, body: ChatPayload) -> Sent {
        let request = self
            .authorised(self.client.post(self.chat_url.clone()))
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        Sent::read(body.attach_to(request).send().await).await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_images_and_videos_are_visual_kinds() {
        assert_eq!(VisualKind::try_from(Modality::Image), Ok(VisualKind::Image));
        assert_eq!(VisualKind::try_from(Modality::Video), Ok(VisualKind::Video));
        assert_eq!(VisualKind::try_from(Modality::Audio), Err(Modality::Audio));
    }
}
