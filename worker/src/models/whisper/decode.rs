//! Greedy decoding of one window: English, no timestamps, at most [`MAX_TOKENS`] tokens.

use anyhow::Context;
use candle_core::{Device, Tensor};
use candle_transformers::models::whisper::{self as m, Config};
use tokenizers::Tokenizer;

use super::{decoder::Decoder, encoder::Encoder, LOGPROB_THRESHOLD, NO_SPEECH_THRESHOLD};

/// The most tokens decoded in a window: half the decoder's context, as OpenAI's `sample_len`.
pub const MAX_TOKENS: usize = 224;

/// The special tokens decoding needs, and the tokens it never picks.
pub struct Tokens {
    start: u32,
    no_timestamps: u32,
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
        Ok(Self {
            start,
            no_timestamps: id(m::NO_TIMESTAMPS_TOKEN)?,
            end,
            no_speech,
            suppress,
            suppress_first,
        })
    }
}

/// What the decoder made of one window.
#[derive(Debug)]
pub struct Window {
    /// The text tokens, without the special ones.
    pub tokens: Vec<u32>,
    /// The probability of the no-speech token at the start.
    pub no_speech: f32,
    /// The mean log-probability of the tokens picked, end-of-text included.
    pub avg_logprob: f32,
}

impl Window {
    /// Whether the window holds speech: not when Whisper expects no speech and is unsure of
    /// what it decoded, and not when it decoded nothing.
    pub fn is_speech(&self) -> bool {
        let silent = self.no_speech > NO_SPEECH_THRESHOLD && self.avg_logprob < LOGPROB_THRESHOLD;
        !silent && !self.tokens.is_empty()
    }
}

/// Decodes the log-mel spectrogram `mel` (80 x 3000) greedily, of which the encoder reads the
/// first `frames`.
pub fn greedy(
    encoder: &Encoder,
    decoder: &Decoder,
    tokens: &Tokens,
    mel: Vec<f32>,
    frames: usize,
) -> candle_core::Result<Window> {
    let bins = mel.len() / m::N_FRAMES;
    let mel = Tensor::from_vec(mel, (1, bins, m::N_FRAMES), &Device::Cpu)?
        .narrow(2, 0, frames)?
        .contiguous()?;
    let audio = encoder.forward(&mel)?;
    let mut cache = decoder.cache(&audio)?;
    let prompt = [tokens.start, tokens.no_timestamps];
    let logits = decoder.forward(&prompt, &mut cache)?;
    // The no-speech probability is read where the start token predicts what follows it.
    let no_speech = log_softmax(&logits.get(0)?.to_vec1::<f32>()?)[tokens.no_speech as usize].exp();
    let mut last = logits.get(prompt.len() - 1)?.to_vec1::<f32>()?;
    let mut text = Vec::new();
    let mut sum_logprob = 0.0f32;
    let limit = MAX_TOKENS.min(decoder.max_len() - prompt.len());
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
            last = decoder
                .forward(&[next as u32], &mut cache)?
                .get(0)?
                .to_vec1::<f32>()?;
        }
    }
    let picked = text.len() + usize::from(text.len() < limit);
    Ok(Window {
        tokens: text,
        no_speech,
        avg_logprob: sum_logprob / picked.max(1) as f32,
    })
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

    fn window(tokens: &[u32], no_speech: f32, avg_logprob: f32) -> Window {
        Window {
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
}
