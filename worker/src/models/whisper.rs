//! The speech model of the `local` provider (contracts 10 and 18): Whisper (MIT), base (99
//! languages, the default) or tiny.en (English only, faster: `APP_SPEECH_MODEL=tiny.en`),
//! prepared by `scripts/models` into `APP_MODEL_DIR/whisper-base/` and `APP_MODEL_DIR/whisper/`
//! and run on the CPU with candle.
//!
//! A clip is decoded and cut into windows of at most 30 s ([`pcm`]); each becomes a log-mel
//! spectrogram ([`mel`]) that the encoder reads once, and the decoder then picks the likeliest
//! token at each step (greedy, no timestamps) until end-of-text. Base detects the language on
//! the first window with speech (the likeliest language token after the start token) and
//! transcribes every window in it; an unsure detection still picks the likeliest. A window Whisper
//! judges to hold no speech is skipped, the rule of openai-whisper and faster-whisper: the
//! probability of the no-speech token is above [`NO_SPEECH_THRESHOLD`] and the decoded text's
//! mean log-probability is below [`LOGPROB_THRESHOLD`]. So music and noise give no transcript.
//!
//! The transcript is held in a [`Transcript`], whose `Debug` shows only its length: it is
//! handed to the text check and dropped, never stored, logged or queued.

mod decode;
mod decoder;
mod encoder;
mod linear;
pub mod mel;
mod ops;
pub mod pcm;
mod tokens;

use std::{fmt, path::Path};

use anyhow::Context;
use bytes::Bytes;
use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use candle_transformers::models::whisper::Config;
use moderation_shared::domain::FailureCode;
use tokenizers::Tokenizer;

use crate::{failure::Failure, models::Products};

/// `APP_SPEECH_MODEL`: which Whisper transcribes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpeechModel {
    /// `base` (the default): Whisper base, 99 languages.
    #[default]
    Base,
    /// `tiny.en`: Whisper tiny.en, English only, about twice as fast.
    TinyEn,
}

impl SpeechModel {
    /// The value of `APP_SPEECH_MODEL` naming it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Base => "base",
            Self::TinyEn => "tiny.en",
        }
    }

    /// The model named `name` (`base` or `tiny.en`).
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Base, Self::TinyEn]
            .into_iter()
            .find(|model| model.name() == name)
    }

    /// Its directory under `APP_MODEL_DIR`.
    pub fn dir(self) -> &'static str {
        match self {
            Self::Base => "whisper-base",
            Self::TinyEn => "whisper",
        }
    }

    /// The files the worker reads, relative to `APP_MODEL_DIR`.
    pub fn files(self) -> [String; 3] {
        ["model.safetensors", "config.json", "tokenizer.json"]
            .map(|file| format!("{}/{file}", self.dir()))
    }
}

/// Above this probability of the no-speech token (and with a low [`LOGPROB_THRESHOLD`]) a
/// window holds no speech: OpenAI's default.
pub const NO_SPEECH_THRESHOLD: f32 = 0.6;

/// Below this mean log-probability of the decoded tokens a window Whisper also gave a high
/// no-speech probability is skipped: OpenAI's default.
pub const LOGPROB_THRESHOLD: f32 = -1.0;

/// Text heard in a clip, with its language. Never printed: `Debug` shows only the length and
/// the language.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Transcript {
    text: String,
    language: Option<&'static str>,
}

impl Transcript {
    /// A transcript of `text` in an unknown language (an external provider's, for one).
    pub fn new(text: String) -> Self {
        Self {
            text,
            language: None,
        }
    }

    /// The words.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The language Whisper heard, ISO 639-1 (`en` for tiny.en); `None` when unknown (no
    /// speech, an external provider, a language without an ISO 639-1 code).
    pub fn language(&self) -> Option<&'static str> {
        self.language
    }

    /// Whether nothing was said.
    pub fn is_empty(&self) -> bool {
        self.text.trim().is_empty()
    }
}

impl fmt::Debug for Transcript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Transcript({} bytes, {:?})",
            self.text.len(),
            self.language
        )
    }
}

/// Whisper with its tokenizer and mel filters, loaded once per worker process; each
/// transcription works on its own copy of the decoder's caches (the weights are shared).
pub struct Whisper {
    config: Config,
    encoder: encoder::Encoder,
    decoder: decoder::Decoder,
    tokenizer: Tokenizer,
    filters: Vec<f32>,
    tokens: decode::Tokens,
}

impl Whisper {
    /// Loads `model` as prepared in `dir` (`APP_MODEL_DIR`), its linear layers in int8 where
    /// this CPU multiplies int8 exactly, else in f32 ([`Products::for_this_cpu`]).
    pub fn load(dir: &Path, model: SpeechModel) -> anyhow::Result<Self> {
        Self::load_with(dir, model, Products::for_this_cpu())
    }

    /// Loads `model` as prepared in `dir`, its linear layers multiplying as `products` says.
    pub fn load_with(dir: &Path, model: SpeechModel, products: Products) -> anyhow::Result<Self> {
        let dir = dir.join(model.dir());
        let config: Config = serde_json::from_slice(
            &std::fs::read(dir.join("config.json")).context("reading whisper/config.json")?,
        )
        .context("parsing whisper/config.json")?;
        let tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| anyhow::anyhow!("reading whisper/tokenizer.json: {e}"))?;
        let weights = std::fs::read(dir.join("model.safetensors"))
            .context("reading whisper/model.safetensors")?;
        // f32 on the CPU: candle's f16 matrix products are slower here than f32's.
        let vars = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .context("parsing whisper/model.safetensors")?;
        let encoder = encoder::Encoder::load(vars.clone(), &config, products)
            .context("loading Whisper's encoder from whisper/model.safetensors")?;
        let decoder = decoder::Decoder::load(vars, &config, products)
            .context("loading Whisper's decoder from whisper/model.safetensors")?;
        let tokens = decode::Tokens::new(&tokenizer, &config)?;
        tracing::info!(
            model = model.name(),
            products = products.name(),
            "Whisper loaded"
        );
        Ok(Self {
            filters: mel::filters(config.num_mel_bins),
            config,
            encoder,
            decoder,
            tokenizer,
            tokens,
        })
    }

    /// Transcribes the audio in `bytes`, skipping windows without speech. Blocking CPU work:
    /// run it through [`super::Inference`].
    pub fn transcribe(&self, audio: impl Into<Bytes>) -> Result<Transcript, Failure> {
        let mut text = String::new();
        // A multilingual model's language, from the first window with speech on.
        let mut language = (!self.tokens.multilingual()).then_some("en");
        pcm::windows(audio.into(), |samples| {
            let window = self.window(samples, language)?;
            if window.is_speech() {
                language = language.or(window.language);
                let words = self
                    .tokenizer
                    .decode(&window.tokens, true)
                    .map_err(|e| model_failed(anyhow::anyhow!("{e}")))?;
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(words.trim());
            }
            Ok(())
        })?;
        let language = if text.trim().is_empty() {
            None
        } else {
            language.and_then(iso_639_1)
        };
        Ok(Transcript { text, language })
    }

    /// Decodes one window of 16 kHz samples, in `language` when it is known.
    fn window(
        &self,
        samples: &[f32],
        language: Option<&'static str>,
    ) -> Result<decode::Window, Failure> {
        let mel = mel::spectrogram(&self.config, &self.filters, samples);
        // The multilingual model reads the whole window: with less of the padding its language
        // detection failed on short clips (docs/models-audio.md); tiny.en reads the sound and
        // 3 s after it.
        let frames = if self.tokens.multilingual() {
            candle_transformers::models::whisper::N_FRAMES
        } else {
            mel::frames_read(samples.len())
        };
        decode::greedy(
            &self.encoder,
            &self.decoder,
            &self.tokens,
            mel,
            frames,
            language,
        )
        .map_err(|e| model_failed(e.into()))
    }
}

/// The largest magnitude in the f32 tensor `t`, for tests that compare tensors.
#[cfg(test)]
fn largest_magnitude(t: &candle_core::Tensor) -> f32 {
    t.abs()
        .and_then(|t| t.max_all())
        .and_then(|t| t.to_scalar::<f32>())
        .unwrap()
}

/// The ISO 639-1 code of a Whisper language code: most are one already; Javanese's is `jv`,
/// Cantonese counts as Chinese, Hawaiian has none.
fn iso_639_1(code: &'static str) -> Option<&'static str> {
    match code {
        "haw" => None,
        "jw" => Some("jv"),
        "yue" => Some("zh"),
        other => Some(other),
    }
}

/// The model failed on a clip: a bug or a broken model, not the clip's fault and not worth a
/// retry. The cause is logged (it never holds the content).
fn model_failed(err: anyhow::Error) -> Failure {
    tracing::error!(error = ?err, "Whisper failed on a clip");
    Failure::permanent(FailureCode::Internal, "Transcribing the audio failed.")
}
