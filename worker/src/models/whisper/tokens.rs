//! Whisper's token embedding (vocabulary x state), which the decoder also reads as its output
//! projection. The projection reads the whole table once per decoded token, so its size is
//! that step's memory traffic. Kept as the linear layers multiply ([`Products`]):
//!
//! - with f32 products, in f16: half the memory of f32 (Whisper base: 53 MB, not 106 MB). A
//!   row is widened to f32 where it is read (by `half`'s F16C conversion where the CPU has
//!   it), so every sum is still taken in f32;
//! - with int8 products, in int8 with a scale per token (26.5 MB), as a linear layer's
//!   weights: the hidden state is quantised as a layer's input row, and rten-gemm's int8
//!   vector-matrix product reads the table's rows where they lie (no packed copy). A looked-up
//!   row is the int8 row times its scale.

use std::sync::Arc;

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::VarBuilder;
use half::{f16, slice::HalfFloatSliceExt};
use rayon::prelude::*;
use rten_gemm::{GemmExecutor, GemmInputA, GemmInputB, GemmOptions, QuantParams};
use rten_tensor::NdTensorView;

use super::linear;
use crate::models::Products;

/// Vocabulary rows one rayon task projects onto.
const ROWS_PER_PIECE: usize = 2048;

/// The token embedding, shared by every transcription.
#[derive(Debug, Clone)]
pub struct TokenEmbedding {
    table: Table,
    state: usize,
}

/// The rows, `state` values per token, row-major.
#[derive(Debug, Clone)]
enum Table {
    F16(Arc<[f16]>),
    Int8 { rows: Arc<[i8]>, scales: Arc<[f32]> },
}

impl TokenEmbedding {
    /// Loads `weight` (vocab x state) from `vb`, in f16 or int8 as `products` says.
    pub fn load(
        vocab: usize,
        state: usize,
        vb: VarBuilder<'_>,
        products: Products,
    ) -> Result<Self> {
        let table =
            vb.get_with_hints_dtype((vocab, state), "weight", Default::default(), DType::F16)?;
        let table = table.flatten_all()?.to_vec1::<f16>()?;
        Ok(match products {
            Products::F32 => Self::f16(table, state),
            // Widened a piece at a time: the whole table in f32 would be 106 MB more at load.
            Products::Int8 => {
                let (mut rows, mut scales) = (Vec::with_capacity(table.len()), Vec::new());
                let mut wide = vec![0.0f32; ROWS_PER_PIECE * state];
                for piece in table.chunks(ROWS_PER_PIECE * state) {
                    let wide = &mut wide[..piece.len()];
                    piece.convert_to_f32_slice(wide);
                    let (piece_rows, piece_scales) = linear::quantise_rows(wide, state);
                    rows.extend(piece_rows);
                    scales.extend(piece_scales);
                }
                Self::int8(rows, scales, state)
            }
        })
    }

    fn f16(weights: Vec<f16>, state: usize) -> Self {
        Self {
            table: Table::F16(weights.into()),
            state,
        }
    }

    fn int8(rows: Vec<i8>, scales: Vec<f32>, state: usize) -> Self {
        Self {
            table: Table::Int8 {
                rows: rows.into(),
                scales: scales.into(),
            },
            state,
        }
    }

    fn vocab(&self) -> usize {
        match &self.table {
            Table::F16(weights) => weights.len() / self.state,
            Table::Int8 { scales, .. } => scales.len(),
        }
    }

    /// The embeddings of `tokens`, (1, n, state) in f32. A token outside the vocabulary is an
    /// error.
    pub fn lookup(&self, tokens: &[u32]) -> Result<Tensor> {
        let mut out = vec![0.0f32; tokens.len() * self.state];
        for (&token, wide) in tokens.iter().zip(out.chunks_exact_mut(self.state)) {
            let token = token as usize;
            if token >= self.vocab() {
                candle_core::bail!("token {token} is outside Whisper's vocabulary");
            }
            let start = token * self.state;
            match &self.table {
                Table::F16(weights) => {
                    weights[start..start + self.state].convert_to_f32_slice(wide);
                }
                Table::Int8 { rows, scales } => {
                    for (wide, &value) in wide.iter_mut().zip(&rows[start..start + self.state]) {
                        *wide = f32::from(value) * scales[token];
                    }
                }
            }
        }
        Tensor::from_vec(out, (1, tokens.len(), self.state), &Device::Cpu)
    }

    /// The logits of `hidden` (state values): its dot product with every token's row.
    pub fn logits(&self, hidden: &[f32]) -> Result<Vec<f32>> {
        let state = self.state;
        let mut logits = vec![0.0f32; self.vocab()];
        match &self.table {
            Table::F16(weights) => logits
                .par_chunks_mut(ROWS_PER_PIECE)
                .zip(weights.par_chunks(ROWS_PER_PIECE * state))
                .for_each(|(logits, rows)| {
                    let mut wide = vec![0.0f32; state];
                    for (logit, row) in logits.iter_mut().zip(rows.chunks_exact(state)) {
                        row.convert_to_f32_slice(&mut wide);
                        *logit = dot(hidden, &wide);
                    }
                }),
            Table::Int8 { rows, scales } => {
                let mut quantised = vec![0u8; state];
                let scale = linear::quantise_input_row(hidden, &mut quantised);
                let mut sums = vec![0i32; logits.len()];
                // The table read as its transpose (state x vocab): rten-gemm's vector-matrix
                // product walks each token's row where it lies.
                let table = NdTensorView::from_data([logits.len(), state], &rows[..]);
                GemmExecutor::<u8, i8, i32>::default()
                    .gemm(
                        &mut sums,
                        GemmInputA::Unpacked(NdTensorView::from_data([1, state], &quantised[..])),
                        GemmInputB::Unpacked(table.transposed()),
                        GemmOptions {
                            a_quant: Some(QuantParams {
                                zero_point: &[linear::ZERO_POINT],
                            }),
                            ..GemmOptions::default()
                        },
                    )
                    .map_err(|err| {
                        candle_core::Error::Msg(format!("int8 token projection: {err}"))
                    })?;
                for ((logit, &sum), &row_scale) in logits.iter_mut().zip(&sums).zip(&scales[..]) {
                    *logit = sum as f32 * (scale * row_scale);
                }
            }
        }
        Ok(logits)
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
        let embedding = TokenEmbedding::f16(narrow, state);

        let logits = embedding.logits(&hidden).unwrap();

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
    fn int8_logits_match_the_f32_product_within_quantisation_error() {
        // More rows than rten-gemm's column blocks, a state that is not a multiple of four.
        let (vocab, state) = (3001, 30);
        let (wide, _) = table(vocab, state);
        let hidden: Vec<f32> = (0..state).map(|i| (i as f32 - 9.5) / 7.0).collect();
        let (rows, scales) = linear::quantise_rows(&wide, state);
        let embedding = TokenEmbedding::int8(rows, scales, state);

        let logits = embedding.logits(&hidden).unwrap();

        assert_eq!(logits.len(), vocab);
        let exact: Vec<f32> = wide
            .chunks_exact(state)
            .map(|row| dot(&hidden, row))
            .collect();
        let largest = exact.iter().fold(0.0f32, |max, v| max.max(v.abs()));
        for (token, (ours, exact)) in logits.iter().zip(&exact).enumerate() {
            assert!(
                (ours - exact).abs() <= 0.02 * largest,
                "token {token}: {ours}, not {exact}"
            );
        }
    }

    #[test]
    fn an_int8_lookup_is_the_row_within_half_a_step_and_refuses_one_outside_the_vocabulary() {
        let (wide, _) = table(10, 12);
        let (rows, scales) = linear::quantise_rows(&wide, 12);
        let embedding = TokenEmbedding::int8(rows, scales, 12);

        let rows = embedding.lookup(&[3, 0, 9]).unwrap();

        let rows = rows.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (i, token) in [3usize, 0, 9].into_iter().enumerate() {
            let row = &wide[token * 12..(token + 1) * 12];
            let step = row.iter().fold(0.0f32, |max, v| max.max(v.abs())) / 127.0;
            for (ours, exact) in rows[i * 12..(i + 1) * 12].iter().zip(row) {
                assert!(
                    (ours - exact).abs() <= step / 2.0 + 1e-6,
                    "{ours} vs {exact}"
                );
            }
        }
        assert!(embedding.lookup(&[10]).is_err());
    }

    #[test]
    fn lookup_widens_the_rows_of_the_tokens_and_refuses_one_outside_the_vocabulary() {
        let (wide, narrow) = table(10, 12);
        let embedding = TokenEmbedding::f16(narrow, 12);

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
