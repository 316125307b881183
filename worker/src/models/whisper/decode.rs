//! Greedy decoding of one window: no timestamps, at most [`MAX_TOKENS`] tokens. An English-only
//! model is prompted `<|startoftranscript|><|notimestamps|>`; a multilingual one first reads
//! the language from the start token's prediction (the likeliest language token: Whisper's
//! own language detection), unless the clip's language is already known from an earlier
//! window, and is then prompted `<|startoftranscript|><|lang|><|transcribe|><|notimestamps|>`.

use anyhow::Context;
use candle_core::{Device, Tensor};
use candle_transformers::models::whisper::{self as m, Config};
use tokenizers::Tokenizer;

use super::{decoder::Decoder, encoder::Encoder, LOGPROB_THRESHOLD, NO_SPEECH_THRESHOLD};

/// The most tokens decoded in a window: half the decoder's context, as OpenAI's `sample_len`.
pub const MAX_TOKENS: usize = 224;

/// Whisper's language codes, in the order of its language tokens (`<|en|>` is the first).
/// Most are ISO 639-1; `haw` (Hawaiian) has no such code and `jw` is Javanese's old one.
pub const LANGUAGES: [&str; 100] = [
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it",
    "id", "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur",
    "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn",
    "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si",
    "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo",
    "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln",
    "ha", "ba", "jw", "su", "yue",
];

/// The vocabulary of a multilingual Whisper, at least.
const MULTILINGUAL_VOCAB: usize = 51_865;

/// The special tokens decoding needs, and the tokens it never picks.
pub struct Tokens {
    start: u32,
    no_timestamps: u32,
    /// A multilingual model's language tokens with their codes, and its `<|transcribe|>`;
    /// none for an English-only model.
    languages: Vec<(u32, &'static str)>,
    transcribe: Option<u32>,
    end: u32,
    no_speech: u32,
    /// 0 or minus infinity per vocabulary entry: the config's suppressed tokens and every
    /// special token but end-of-text.
    suppress: Vec<f32>,
    /// The same, plus a blank and end-of-text, for the first token.
    suppress_first: Vec<f32>,
}

impl Tokens {
    /// Looks the special tokens up in `tokenizer`.
    pub fn new(tokenizer: &Tokenizer, config: &Config) -> anyhow::Result<Self> {
        let id = |name: &str| {
            tokenizer
                .token_to_id(name)
                .with_context(|| format!("whisper/tokenizer.json has no {name}"))
        };
        let no_speech = m::NO_SPEECH_TOKENS
            .iter()
            .find_map(|name| tokenizer.token_to_id(name))
            .context("whisper/tokenizer.json has no no-speech token")?;
        let (start, end) = (id(m::SOT_TOKEN)?, id(m::EOT_TOKEN)?);
        let mut suppress = vec![0.0f32; config.vocab_size];
        let specials = (start as usize)..config.vocab_size;
        for token in config
            .suppress_tokens
            .iter()
            .map(|&t| t as usize)
            .chain(specials)
        {
            if let Some(logit) = suppress.get_mut(token) {
                *logit = f32::NEG_INFINITY;
            }
        }
        let mut suppress_first = suppress.clone();
        let blank = tokenizer.token_to_id("Ġ").unwrap_or(220) as usize;
        for token in [blank, end as usize] {
            if let Some(logit) = suppress_first.get_mut(token) {
                *logit = f32::NEG_INFINITY;
            }
        }
        // OpenAI's rule: an English-only model has 51,864 tokens, a multilingual one more (the
        // English-only tokenizers list the language tokens too).
        let known = if config.vocab_size >= MULTILINGUAL_VOCAB {
            &LANGUAGES[..]
        } else {
            &[]
        };
        let languages: Vec<(u32, &'static str)> = known
            .iter()
            .filter_map(|code| Some((tokenizer.token_to_id(&format!("<|{code}|>"))?, *code)))
            .filter(|(id, _)| (*id as usize) < config.vocab_size)
            .collect();
        let transcribe = if languages.is_empty() {
            None
        } else {
            Some(id(m::TRANSCRIBE_TOKEN)?)
        };
        Ok(Self {
            start,
            no_timestamps: id(m::NO_TIMESTAMPS_TOKEN)?,
            languages,
            transcribe,
            end,
            no_speech,
            suppress,
            suppress_first,
        })
    }
}

impl Tokens {
    /// Whether the model knows more languages than English.
    pub fn multilingual(&self) -> bool {
        !self.languages.is_empty()
    }
}

/// The fewest tokens a window must hold to count as a loop.
const LOOP_MIN_TOKENS: usize = 32;
/// How many times each distinct token of a loop is used, on average, at least.
const LOOP_REPEATS: usize = 4;

/// What the decoder made of one window.
#[derive(Debug)]
pub struct Window {
    /// The language the window was transcribed in (a multilingual model's: detected here or
    /// given), `None` for an English-only model.
    pub language: Option<&'static str>,
    /// The text tokens, without the special ones.
    pub tokens: Vec<u32>,
    /// The probability of the no-speech token at the start.
    pub no_speech: f32,
    /// The mean log-probability of the tokens picked, end-of-text included.
    pub avg_logprob: f32,
}

impl Window {
    /// Whether the window holds speech: not when Whisper expects no speech and is unsure of
    /// what it decoded, nor when it expects no speech and decoded a loop (the same few tokens
    /// over and over: what greedy decoding makes of noise, where Whisper's reference would
    /// fall back to sampling), and not when it decoded nothing. Speech, repeated words
    /// included, comes with a low no-speech probability and is kept.
    pub fn is_speech(&self) -> bool {
        let unlikely = self.no_speech > NO_SPEECH_THRESHOLD;
        let silent = unlikely && (self.avg_logprob < LOGPROB_THRESHOLD || self.is_loop());
        !silent && !self.tokens.is_empty()
    }

    /// Whether the tokens are a loop: at least [`LOOP_MIN_TOKENS`], each distinct token used
    /// [`LOOP_REPEATS`] times or more on average.
    fn is_loop(&self) -> bool {
        let distinct: std::collections::HashSet<u32> = self.tokens.iter().copied().collect();
        self.tokens.len() >= LOOP_MIN_TOKENS && distinct.len() * LOOP_REPEATS <= self.tokens.len()
    }
}

/// Decodes the log-mel spectrogram `mel` (80 x 3000) greedily, of which the encoder reads the
/// first `frames`; a multilingual model in `language` when it is known, else in the language
/// it detects.
pub fn greedy(
    encoder: &Encoder,
    decoder: &Decoder,
    tokens: &Tokens,
    mel: Vec<f32>,
    frames: usize,
    language: Option<&'static str>,
) -> candle_core::Result<Window> {
    let bins = mel.len() / m::N_FRAMES;
    let mel = Tensor::from_vec(mel, (1, bins, m::N_FRAMES), &Device::Cpu)?
        .narrow(2, 0, frames)?
        .contiguous()?;
    let audio = encoder.forward(&mel)?;
    let mut cache = decoder.cache(&audio)?;
    // The start token's prediction: the no-speech probability and, for a multilingual model,
    // the language.
    let first = decoder.forward(&[tokens.start], &mut cache)?;
    let no_speech = log_softmax(&first)[tokens.no_speech as usize].exp();
    let (language, rest) = match tokens.transcribe {
        Some(transcribe) => {
            let (id, code) = match language.and_then(|l| tokens.languages.iter().find(|t| t.1 == l))
            {
                Some(&known) => known,
                None => detect_language(&first, &tokens.languages),
            };
            (Some(code), vec![id, transcribe, tokens.no_timestamps])
        }
        None => (None, vec![tokens.no_timestamps]),
    };
    let prompt_len = 1 + rest.len();
    let mut last = decoder.forward(&rest, &mut cache)?;
    let mut text = Vec::new();
    let mut sum_logprob = 0.0f32;
    let limit = MAX_TOKENS.min(decoder.max_len() - prompt_len);
    for step in 0..limit {
        let mask = if step == 0 {
            &tokens.suppress_first
        } else {
            &tokens.suppress
        };
        let masked: Vec<f32> = last.iter().zip(mask).map(|(l, m)| l + m).collect();
        let next = argmax(&masked);
        sum_logprob += log_softmax(&masked)[next];
        if next == tokens.end as usize {
            break;
        }
        text.push(next as u32);
        if step + 1 < limit {
            last = decoder.forward(&[next as u32], &mut cache)?;
        }
    }
    let picked = text.len() + usize::from(text.len() < limit);
    Ok(Window {
        language,
        tokens: text,
        no_speech,
        avg_logprob: sum_logprob / picked.max(1) as f32,
    })
}

/// The likeliest of `languages` (token, code) by the start token's `logits`; the first
/// (English) when there are none to compare.
fn detect_language(logits: &[f32], languages: &[(u32, &'static str)]) -> (u32, &'static str) {
    languages
        .iter()
        .copied()
        .max_by(|a, b| {
            let score = |id: u32| {
                logits
                    .get(id as usize)
                    .copied()
                    .unwrap_or(f32::NEG_INFINITY)
            };
            score(a.0).total_cmp(&score(b.0))
        })
        .unwrap_or((0, "en"))
}

fn argmax(values: &[f32]) -> usize {
    values
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(i, _)| i)
}

fn log_softmax(values: &[f32]) -> Vec<f32> {
    let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = values.iter().map(|v| (v - max).exp()).sum();
    let log_sum = max + sum.ln();
    values.iter().map(|v| v - log_sum).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_is_a_log_distribution_and_ignores_suppressed_entries() {
        let logprobs = log_softmax(&[1.0, 2.0, f32::NEG_INFINITY, 3.0]);

        let total: f32 = logprobs.iter().map(|l| l.exp()).sum();
        assert!((total - 1.0).abs() < 1e-6);
        assert_eq!(logprobs[2], f32::NEG_INFINITY);
        assert_eq!(argmax(&logprobs), 3);
    }

    #[test]
    fn the_likeliest_language_token_is_the_detected_language() {
        let languages = [(10, "en"), (11, "de"), (12, "es")];
        let mut logits = vec![0.0f32; 20];
        logits[11] = 3.0;
        logits[12] = 2.5;
        logits[5] = 9.0;

        assert_eq!(detect_language(&logits, &languages), (11, "de"));
        assert_eq!(detect_language(&logits, &[]), (0, "en"));
    }

    #[test]
    fn whispers_language_codes_are_its_hundred_and_unique() {
        let mut codes = LANGUAGES.to_vec();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), 100);
        assert_eq!(LANGUAGES[..3], ["en", "zh", "de"]);
    }

    fn window(tokens: &[u32], no_speech: f32, avg_logprob: f32) -> Window {
        Window {
            language: None,
            tokens: tokens.to_vec(),
            no_speech,
            avg_logprob,
        }
    }

    #[test]
    fn a_window_is_skipped_when_whisper_expects_no_speech_and_doubts_its_words() {
        assert!(!window(&[1, 2], 0.9, -1.5).is_speech());
        // Either sign alone keeps the window, as in openai-whisper.
        assert!(window(&[1, 2], 0.9, -0.2).is_speech());
        assert!(window(&[1, 2], 0.1, -1.5).is_speech());
        assert!(!window(&[], 0.1, -0.1).is_speech());
    }

    #[test]
    fn a_loop_is_skipped_only_where_whisper_expects_no_speech() {
        let looping: Vec<u32> = [7, 8].repeat(16);
        let varied: Vec<u32> = (0..32).collect();
        // Thirty-two tokens of two distinct ones: a loop, skipped with a high no-speech
        // probability however sure the decoder was, kept with a low one (repeated speech).
        assert!(!window(&looping, 0.8, -0.1).is_speech());
        assert!(window(&looping, 0.3, -0.1).is_speech());
        assert!(window(&varied, 0.8, -0.1).is_speech());
        // At the edges: 31 tokens are too few; 8 distinct in 32 is a loop, 9 is not.
        assert!(window(&looping[..31], 0.8, -0.1).is_speech());
        let eight: Vec<u32> = (0..8).cycle().take(32).collect();
        let nine: Vec<u32> = (0..9).cycle().take(32).collect();
        assert!(!window(&eight, 0.8, -0.1).is_speech());
        assert!(window(&nine, 0.8, -0.1).is_speech());
    }
}
