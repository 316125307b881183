//! Whisper's token embedding (vocabulary x state), which the decoder also reads as its output
//! projection, kept in f16: half the memory of f32 (Whisper base: 53 MB, not 106 MB; it was
//! the largest tensor of the worker). A row is widened to f32 where it is read (by `half`'s
//! F16C conversion where the CPU has it), so every sum is still taken in f32. The projection
//! reads the whole table once per decoded token, so halving it also halves that step's memory
//! traffic.

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::VarBuilder;
use half::{f16, slice::HalfFloatSliceExt};
use rayon::prelude::*;

/// Vocabulary rows one rayon task projects onto.
const ROWS_PER_PIECE: usize = 2048;

/// The token embedding, shared by every transcription.
#[derive(Debug, Clone)]
pub struct TokenEmbedding {
    /// Row-major, `state` values per token.
    weights: std::sync::Arc<[f16]>,
    state: usize,
}

impl TokenEmbedding {
    /// Loads `weight` (vocab x state) from `vb`, as f16.
    pub fn load(vocab: usize, state: usize, vb: VarBuilder<'_>) -> Result<Self> {
        let table =
            vb.get_with_hints_dtype((vocab, state), "weight", Default::default(), DType::F16)?;
        Ok(Self::new(table.flatten_all()?.to_vec1::<f16>()?, state))
    }

    fn new(weights: Vec<f16>, state: usize) -> Self {
        Self {
            weights: weights.into(),
            state,
        }
    }

    /// The embeddings of `tokens`, (1, n, state) in f32. A token outside the vocabulary is an
    /// error.
    pub fn lookup(&self, tokens: &[u32]) -> Result<Tensor> {
        let mut out = vec![0.0f32; tokens.len() * self.state];
        for (&token, wide) in tokens.iter().zip(out.chunks_exact_mut(self.state)) {
            let start = token as usize * self.state;
            let Some(row) = self.weights.get(start..start + self.state) else {
                candle_core::bail!("token {token} is outside Whisper's vocabulary");
            };
            row.convert_to_f32_slice(wide);
        }
        Tensor::from_vec(out, (1, tokens.len(), self.state), &Device::Cpu)
    }

    /// The logits of `hidden` (state values): its dot product with every token's row.
    pub fn logits(&self, hidden: &[f32]) -> Vec<f32> {
        let state = self.state;
        let mut logits = vec![0.0f32; self.weights.len() / state];
        logits
            .par_chunks_mut(ROWS_PER_PIECE)
            .zip(self.weights.par_chunks(ROWS_PER_PIECE * state))
            .for_each(|(logits, rows)| {
                let mut wide = vec![0.0f32; state];
                for (logit, row) in logits.iter_mut().zip(rows.chunks_exact(state)) {
                    row.convert_to_f32_slice(&mut wide);
                    *logit = dot(hidden, &wide);
                }
            });
        logits
    }
}

/// The dot product of `a` and `b` (of equal lengths) in eight independent lanes, which the
/// compiler keeps in vector registers.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (a_chunks, a_rest) = a.as_chunks::<8>();
    let (b_chunks, b_rest) = b.as_chunks::<8>();
    for (x, y) in a_chunks.iter().zip(b_chunks) {
        for ((acc, x), y) in acc.iter_mut().zip(x).zip(y) {
            *acc += x * y;
        }
    }
    let rest: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + rest
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of `vocab` rows of `state` values, as f32 and as f16.
    fn table(vocab: usize, state: usize) -> (Vec<f32>, Vec<f16>) {
        let wide: Vec<f32> = (0..vocab * state)
            .map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 1.0)
            .collect();
        let narrow = wide.iter().map(|&v| f16::from_f32(v)).collect();
        (wide, narrow)
    }

    #[test]
    fn logits_match_the_f32_product_over_pieces_and_a_ragged_last_piece() {
        // More rows than one piece and a state that is not a multiple of eight.
        let (vocab, state) = (ROWS_PER_PIECE * 2 + 37, 20);
        let (wide, narrow) = table(vocab, state);
        let hidden: Vec<f32> = (0..state).map(|i| (i as f32 - 9.5) / 7.0).collect();
        let embedding = TokenEmbedding::new(narrow, state);

        let logits = embedding.logits(&hidden);

        assert_eq!(logits.len(), vocab);
        let table = Tensor::from_vec(wide, (vocab, state), &Device::Cpu).unwrap();
        let hidden = Tensor::from_vec(hidden, (1, state), &Device::Cpu).unwrap();
        let expected = hidden
            .matmul(&table.t().unwrap())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        for (token, (ours, f32s)) in logits.iter().zip(&expected).enumerate() {
            // The f16 rounding of each weight: at most 2^-11 of it.
            assert!(
                (ours - f32s).abs() <= 2e-3 * (1.0 + f32s.abs()),
                "token {token}: {ours}, not {f32s}"
            );
        }
    }

    #[test]
    fn lookup_widens_the_rows_of_the_tokens_and_refuses_one_outside_the_vocabulary() {
        let (wide, narrow) = table(10, 12);
        let embedding = TokenEmbedding::new(narrow, 12);

        let rows = embedding.lookup(&[3, 0, 9]).unwrap();

        assert_eq!(rows.dims(), &[1, 3, 12]);
        let rows = rows.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (i, token) in [3usize, 0, 9].into_iter().enumerate() {
            for j in 0..12 {
                let (ours, f32s) = (rows[i * 12 + j], wide[token * 12 + j]);
                assert!((ours - f32s).abs() <= 1e-3, "{ours} vs {f32s}");
            }
        }
        let outside = embedding.lookup(&[10]).unwrap_err().to_string();
        assert!(outside.contains("token 10"), "{outside}");
    }
}
