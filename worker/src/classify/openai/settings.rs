//! Settings of the OpenAI-compatible provider: where the model server is, which models to ask,
//! and how patiently. Read from `APP_OPENAI_*` and the model variables.

use std::{fmt, str::FromStr, time::Duration};

use moderation_shared::{
    config::{env_millis, env_opt, env_or, env_raw, extra_ca_pem_from_env, ConfigError, Secret},
    domain::Modality,
};
use reqwest::Url;

/// The per-request deadline when `APP_OPENAI_TIMEOUT_MS` is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The backoff base when `APP_OPENAI_RETRY_BASE_MS` is unset.
pub const DEFAULT_RETRY_BASE: Duration = Duration::from_millis(500);

/// `APP_OPENAI_RESPONSE_FORMAT`: how the answer's JSON schema is asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ResponseFormat {
    /// `json_schema`: `{"type": "json_schema", "json_schema": {"name", "strict", "schema"}}`
    /// (OpenAI, vLLM, Ollama, llama.cpp's `llama-server`).
    JsonSchema,
    /// `json_object`: `{"type": "json_object", "schema": <schema>}` (llama.cpp's Python
    /// server, which refuses `json_schema`).
    JsonObject,
    /// `auto` (the default): `json_schema` until the server rejects it with a 4xx about the
    /// response format, then `json_object` for the rest of the process.
    #[default]
    Auto,
}

impl FromStr for ResponseFormat {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "json_schema" => Ok(Self::JsonSchema),
            "json_object" => Ok(Self::JsonObject),
            "auto" => Ok(Self::Auto),
            other => Err(format!(
                "expected json_schema, json_object or auto, got {other:?}"
            )),
        }
    }
}

impl fmt::Display for ResponseFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::JsonSchema => "json_schema",
            Self::JsonObject => "json_object",
            Self::Auto => "auto",
        })
    }
}

/// Settings of the `openai` provider.
#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// `APP_OPENAI_BASE_URL`: the API root the OpenAI SDKs call `base_url`, under which
    /// `chat/completions` and `audio/transcriptions` live (`https://api.openai.com/v1`). A bare
    /// origin (`http://127.0.0.1:8000`) gets `/v1` appended; any other path is kept as given.
    /// Never has a trailing slash, a query or credentials.
    pub base_url: Url,
    /// `APP_OPENAI_API_KEY`: sent as `Authorization: Bearer`; no header when unset.
    pub api_key: Option<Secret<String>>,
    /// `APP_TEXT_MODEL`: the model judging prompts, chats and transcripts.
    pub text_model: Option<String>,
    /// `APP_VISION_MODEL`: the model judging images and videos.
    pub vision_model: Option<String>,
    /// `APP_TRANSCRIBE_MODEL`: the model transcribing audio.
    pub transcribe_model: Option<String>,
    /// `APP_OPENAI_RESPONSE_FORMAT`: `json_schema`, `json_object` or `auto` (default).
    pub response_format: ResponseFormat,
    /// `APP_OPENAI_TIMEOUT_MS`: the deadline of one request, connection to last byte
    /// (default 60 000).
    pub timeout: Duration,
    /// `APP_OPENAI_RETRY_BASE_MS`: the wait before the second try; it doubles for every
    /// further try (default 500).
    pub retry_base: Duration,
    /// `APP_OPENAI_MAX_TOKENS`: sent as `max_tokens` when set.
    pub max_tokens: Option<u32>,
    /// `APP_EXTRA_CA_FILE`: PEM roots trusted besides the system's.
    pub extra_ca_pem: Option<Vec<u8>>,
}

impl OpenAiSettings {
    /// Settings for the server at `base_url` with the defaults and no model names.
    pub fn new(base_url: &str) -> Result<Self, ConfigError> {
        Ok(Self {
            base_url: api_root(base_url)
                .map_err(|reason| ConfigError::new("APP_OPENAI_BASE_URL", reason))?,
            api_key: None,
            text_model: None,
            vision_model: None,
            transcribe_model: None,
            response_format: ResponseFormat::Auto,
            timeout: DEFAULT_TIMEOUT,
            retry_base: DEFAULT_RETRY_BASE,
            max_tokens: None,
            extra_ca_pem: None,
        })
    }

    /// Reads `APP_OPENAI_BASE_URL` (required), `APP_OPENAI_API_KEY`, the three model
    /// variables, `APP_OPENAI_RESPONSE_FORMAT`, `APP_OPENAI_TIMEOUT_MS`,
    /// `APP_OPENAI_RETRY_BASE_MS`, `APP_OPENAI_MAX_TOKENS` and `APP_EXTRA_CA_FILE`.
    pub fn from_env() -> Result<Self, ConfigError> {
        let base_url = env_raw("APP_OPENAI_BASE_URL")?.ok_or_else(|| {
            ConfigError::new(
                "APP_OPENAI_BASE_URL",
                "required when APP_CLASSIFIER is openai",
            )
        })?;
        let max_tokens = env_opt::<u32>("APP_OPENAI_MAX_TOKENS")?;
        if max_tokens == Some(0) {
            return Err(ConfigError::new(
                "APP_OPENAI_MAX_TOKENS",
                "must be at least 1",
            ));
        }
        let extra_ca_pem = extra_ca_pem_from_env()?;
        Ok(Self {
            api_key: env_raw("APP_OPENAI_API_KEY")?.map(|key| Secret::new(key.trim().to_owned())),
            text_model: model_from_env("APP_TEXT_MODEL")?,
            vision_model: model_from_env("APP_VISION_MODEL")?,
            transcribe_model: model_from_env("APP_TRANSCRIBE_MODEL")?,
            response_format: env_or("APP_OPENAI_RESPONSE_FORMAT", ResponseFormat::Auto)?,
            timeout: env_millis("APP_OPENAI_TIMEOUT_MS", DEFAULT_TIMEOUT, 1..)?,
            retry_base: env_millis("APP_OPENAI_RETRY_BASE_MS", DEFAULT_RETRY_BASE, 0..)?,
            max_tokens,
            extra_ca_pem,
            ..Self::new(&base_url)?
        })
    }

    /// Fails, naming the variable, when a model that jobs of `modalities` need is not set:
    /// text needs the text model, images and videos the vision model, audio the transcription
    /// model and the text model.
    pub fn require_models(&self, modalities: &[Modality]) -> Result<(), ConfigError> {
        for &modality in modalities {
            let needed: &[(&'static str, &Option<String>)] = match modality {
                Modality::Text => &[("APP_TEXT_MODEL", &self.text_model)],
                Modality::Image | Modality::Video => &[("APP_VISION_MODEL", &self.vision_model)],
                Modality::Audio => &[
                    ("APP_TRANSCRIBE_MODEL", &self.transcribe_model),
                    ("APP_TEXT_MODEL", &self.text_model),
                ],
            };
            if let Some((name, _)) = needed.iter().find(|(_, model)| model.is_none()) {
                return Err(ConfigError::new(
                    name,
                    format!(
                        "required for {} jobs with the openai classifier",
                        modality.as_str()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The URL of `path` (`chat/completions`) under the API root.
    pub(super) fn endpoint(&self, path: &str) -> Url {
        let mut url = self.base_url.clone();
        // An http(s) URL always has path segments; the guard only satisfies the type.
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().extend(path.split('/'));
        }
        url
    }
}

fn model_from_env(name: &'static str) -> Result<Option<String>, ConfigError> {
    Ok(env_raw(name)?.map(|model| model.trim().to_owned()))
}

/// Parses and normalises `APP_OPENAI_BASE_URL`: http or https, no credentials, query or
/// fragment; `/v1` added to a bare origin; no trailing slash.
fn api_root(raw: &str) -> Result<Url, String> {
    let mut url = Url::parse(raw.trim()).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "expected an http or https URL, got {}",
            url.scheme()
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("put credentials in APP_OPENAI_API_KEY, not in the URL".to_owned());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("must not have a query or a fragment".to_owned());
    }
    let path = url.path().trim_end_matches('/').to_owned();
    url.set_path(if path.is_empty() { "/v1" } else { &path });
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_origin_gets_v1_appended() {
        let url = api_root("http://127.0.0.1:8000").unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:8000/v1");
        let url = api_root("https://api.openai.com/").unwrap();
        assert_eq!(url.as_str(), "https://api.openai.com/v1");
    }

    #[test]
    fn a_url_with_a_path_is_kept_without_its_trailing_slash() {
        let url = api_root("http://localhost:11434/v1/").unwrap();
        assert_eq!(url.as_str(), "http://localhost:11434/v1");
        let url = api_root("https://openrouter.ai/api/v1").unwrap();
        assert_eq!(url.as_str(), "https://openrouter.ai/api/v1");
    }

    #[test]
    fn endpoints_are_joined_under_the_api_root() {
        let settings = OpenAiSettings::new("http://127.0.0.1:8000").unwrap();
        assert_eq!(
            settings.endpoint("chat/completions").as_str(),
            "http://127.0.0.1:8000/v1/chat/completions"
        );
        let settings = OpenAiSettings::new("https://api.openai.com/v1").unwrap();
        assert_eq!(
            settings.endpoint("audio/transcriptions").as_str(),
            "https://api.openai.com/v1/audio/transcriptions"
        );
    }

    #[test]
    fn base_urls_with_another_scheme_credentials_or_a_query_are_refused() {
        for bad in [
            "ftp://host/v1",
            "https://user:pw@host/v1",
            "https://host/v1?x=1",
            "https://host/v1#x",
            "not a url",
        ] {
            let err = OpenAiSettings::new(bad).unwrap_err();
            assert_eq!(err.name, "APP_OPENAI_BASE_URL", "{bad}");
        }
    }

    #[test]
    fn response_format_parses_its_three_values_and_refuses_others() {
        assert_eq!("json_schema".parse(), Ok(ResponseFormat::JsonSchema));
        assert_eq!(" JSON_OBJECT ".parse(), Ok(ResponseFormat::JsonObject));
        assert_eq!("auto".parse(), Ok(ResponseFormat::Auto));
        assert!("text".parse::<ResponseFormat>().is_err());
    }

    #[test]
    fn required_models_follow_the_modalities() {
        let mut settings = OpenAiSettings::new("http://127.0.0.1:8000").unwrap();
        settings.text_model = Some("t".to_owned());
        assert!(settings.require_models(&[Modality::Text]).is_ok());
        let err = settings.require_models(&[Modality::Audio]).unwrap_err();
        assert_eq!(err.name, "APP_TRANSCRIBE_MODEL");
        settings.transcribe_model = Some("w".to_owned());
        assert!(settings.require_models(&[Modality::Audio]).is_ok());
        let err = settings.require_models(&Modality::ALL).unwrap_err();
        assert_eq!(err.name, "APP_VISION_MODEL");
        settings.text_model = None;
        let err = settings.require_models(&[Modality::Audio]).unwrap_err();
        assert_eq!(err.name, "APP_TEXT_MODEL");
    }
}
