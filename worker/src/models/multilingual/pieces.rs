//! The multilingual encoder's SentencePiece unigram tokenizer, compact: the `tokenizers` crate's
//! own Unigram model builds a character trie of the 128,010 pieces that costs about 120 MB;
//! here the pieces are one hash map (about 10 MB) and the best segmentation is found by the
//! same Viterbi search over the pieces that start at each character. The normalisation (the
//! model's precompiled nmt_nfkc map, outer whitespace dropped, inner runs collapsed) is the
//! `tokenizers` crate's, read from the same `tokenizer.json`; words are split at spaces and
//! each starts with U+2581, as its Metaspace pre-tokenizer does.

use std::{collections::HashMap, path::Path};

use anyhow::{anyhow, bail, Context};
use serde::Deserialize;
use tokenizers::{NormalizedString, Normalizer, NormalizerWrapper};

/// SentencePiece's marker of a word's start.
const SPACE: char = '\u{2581}';

/// What a piece a known piece does not cover costs: the lowest piece score less this
/// (sentencepiece's and `tokenizers`' `kUnkPenalty`).
const UNKNOWN_PENALTY: f64 = 10.0;

/// The parts of `tokenizer.json` read here.
#[derive(Deserialize)]
struct File {
    normalizer: NormalizerWrapper,
    model: Model,
}

#[derive(Deserialize)]
struct Model {
    unk_id: u32,
    vocab: Vec<(String, f64)>,
}

/// The tokenizer.
pub struct Pieces {
    normalizer: NormalizerWrapper,
    /// Piece to its id and score.
    pieces: HashMap<String, (u32, f64)>,
    /// The longest piece, in characters.
    longest: usize,
    unknown: u32,
    unknown_score: f64,
}

impl Pieces {
    /// Reads `tokenizer.json` (as `scripts/models.d/multilingual.py` wrote it).
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let raw = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let file: File = serde_json::from_slice(&raw)
            .with_context(|| format!("{} is not a unigram tokenizer", path.display()))?;
        drop(raw);
        if file.model.vocab.is_empty() {
            bail!("{}: no pieces", path.display());
        }
        let lowest = file
            .model
            .vocab
            .iter()
            .map(|(_, score)| *score)
            .fold(f64::INFINITY, f64::min);
        let longest = file
            .model
            .vocab
            .iter()
            .map(|(piece, _)| piece.chars().count())
            .max()
            .unwrap_or(1);
        let mut pieces = HashMap::with_capacity(file.model.vocab.len());
        for (id, (piece, score)) in file.model.vocab.into_iter().enumerate() {
            pieces.entry(piece).or_insert((u32::try_from(id)?, score));
        }
        pieces.shrink_to_fit();
        Ok(Self {
            normalizer: file.normalizer,
            pieces,
            longest,
            unknown: file.model.unk_id,
            unknown_score: lowest - UNKNOWN_PENALTY,
        })
    }

    /// The piece ids of `text` (without `<s>` and `</s>`): one unknown piece a character no
    /// piece covers.
    pub fn encode(&self, text: &str) -> anyhow::Result<Vec<u32>> {
        let mut normalized = NormalizedString::from(text);
        self.normalizer
            .normalize(&mut normalized)
            .map_err(|e| anyhow!("normalising failed: {e}"))?;
        let mut ids = Vec::new();
        for word in normalized.get().split(' ').filter(|w| !w.is_empty()) {
            let word: Vec<char> = std::iter::once(SPACE).chain(word.chars()).collect();
            ids.extend(self.best(&word));
        }
        Ok(ids)
    }

    /// The likeliest segmentation of `word` (Viterbi): at each character, every piece that
    /// starts there, or the unknown piece for the character alone when no one-character
    /// piece does; on equal scores the earlier start wins, as in `tokenizers`.
    fn best(&self, word: &[char]) -> Vec<u32> {
        let n = word.len();
        // Per end position: the best score, where its last piece started and its id.
        let mut best: Vec<(f64, usize, u32)> = vec![(f64::NEG_INFINITY, 0, 0); n + 1];
        best[0].0 = 0.0;
        let mut piece = String::new();
        for start in 0..n {
            let base = best[start].0;
            if base == f64::NEG_INFINITY {
                continue;
            }
            piece.clear();
            let mut single = false;
            for end in start + 1..=n.min(start + self.longest) {
                piece.push(word[end - 1]);
                if let Some(&(id, score)) = self.pieces.get(piece.as_str()) {
                    single |= end == start + 1;
                    if base + score > best[end].0 {
                        best[end] = (base + score, start, id);
                    }
                }
            }
            if !single && base + self.unknown_score > best[start + 1].0 {
                best[start + 1] = (base + self.unknown_score, start, self.unknown);
            }
        }
        let mut ids = Vec::new();
        let mut end = n;
        while end > 0 {
            let (_, start, id) = best[end];
            ids.push(id);
            end = start;
        }
        ids.reverse();
        ids
    }
}
