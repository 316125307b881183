//! Whisper's linear layers (`x W^T + b`): in f32 by candle, or in int8 by rten-gemm where this
//! CPU multiplies int8 exactly, the scheme faster-whisper (CTranslate2) runs with `int8`:
//!
//! - the weights are quantised once, at load: symmetric, one scale per output (per row of W),
//!   packed for rten-gemm's kernel on this CPU;
//! - each input row is quantised when the layer runs, symmetrically with a scale of its own
//!   (its largest magnitude maps to 127), so a row's result never depends on the rows beside
//!   it (on the other frames of a window). rten-gemm takes int8 inputs as uint8 with a zero
//!   point: 128 for every row. One zero point for all rows is also what rten-gemm 0.27 packs
//!   right: with a zero point per row, its packing of the inputs gives every panel of rows the
//!   first panel's zero points (`packing::int8::pack_a_impl`);
//! - the products are summed in int32, then scaled back to f32 by the row's scale times the
//!   output's, and the bias is added in f32.
//!
//! The layer norms, the softmax, the attention's own products (of activations by activations)
//! and the convolutions stay in f32.

use std::{fmt, sync::Arc};

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::VarBuilder;
use rayon::prelude::*;
use rten_gemm::{GemmExecutor, GemmInputA, GemmInputB, GemmOptions, PackedBMatrix, QuantParams};
use rten_tensor::NdTensorView;

use crate::models::Products;

/// Input rows one rayon task quantises or scales back.
const ROWS_PER_PIECE: usize = 16;

/// Whisper's linear layers: in f32 by candle, or in int8 by rten-gemm's int8 kernel for this
/// CPU.
impl Products {
    /// The layer `input` -> `output` named by `vb` (`weight`, and `bias` when `bias`).
    pub fn load(
        self,
        input: usize,
        output: usize,
        bias: bool,
        vb: VarBuilder<'_>,
    ) -> Result<Linear> {
        let weight = vb.get((output, input), "weight")?;
        let bias = bias.then(|| vb.get(output, "bias")).transpose()?;
        self.layer(weight, bias)
    }

    /// The layer of `weight` (output x input) and `bias` (output).
    pub fn layer(self, weight: Tensor, bias: Option<Tensor>) -> Result<Linear> {
        match self {
            Self::F32 => Ok(Linear::F32(candle_nn::Linear::new(weight, bias))),
            Self::Int8 => Ok(Linear::Int8(Arc::new(Int8Linear::new(
                &weight,
                bias.as_ref(),
            )?))),
        }
    }
}

/// A linear layer, in f32 or int8 ([`Products`]).
#[derive(Clone)]
pub enum Linear {
    F32(candle_nn::Linear),
    Int8(Arc<Int8Linear>),
}

impl fmt::Debug for Linear {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::F32(linear) => linear.fmt(f),
            Self::Int8(linear) => write!(f, "Int8Linear({} -> {})", linear.depth, linear.width),
        }
    }
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Self::F32(linear) => linear.forward(x),
            Self::Int8(linear) => linear.forward(x),
        }
    }
}

/// A linear layer's weights in int8, packed for rten-gemm's int8 kernel on this CPU (the
/// one `GemmExecutor::default` picks; an executor is made per product, since it cannot be
/// shared between threads, and making one costs a feature check), with their scales.
pub struct Int8Linear {
    /// W^T (depth x width), one scale per column.
    packed: PackedBMatrix<i8>,
    scales: Vec<f32>,
    bias: Option<Vec<f32>>,
    depth: usize,
    width: usize,
}

impl Int8Linear {
    fn new(weight: &Tensor, bias: Option<&Tensor>) -> Result<Self> {
        let (width, depth) = weight.dims2()?;
        let weight = weight
            .to_dtype(DType::F32)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let (quantised, scales) = quantise_rows(&weight, depth);
        let rows = NdTensorView::from_data([width, depth], quantised.as_slice());
        let packed = GemmExecutor::<u8, i8, i32>::default().prepack_b(rows.transposed());
        let bias = bias
            .map(|bias| bias.to_dtype(DType::F32)?.to_vec1::<f32>())
            .transpose()?;
        if bias.as_ref().is_some_and(|bias| bias.len() != width) {
            candle_core::bail!("a bias of another length than the layer's {width} outputs");
        }
        Ok(Self {
            packed,
            scales,
            bias,
            depth,
            width,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut shape = x.dims().to_vec();
        if shape.last() != Some(&self.depth) {
            candle_core::bail!("a linear layer of depth {} given {shape:?}", self.depth);
        }
        let values = x.flatten_all()?.to_vec1::<f32>()?;
        let rows = values.len() / self.depth;
        let mut quantised = vec![0u8; values.len()];
        let mut row_scales = vec![0.0f32; rows];
        let chunk = ROWS_PER_PIECE * self.depth;
        quantised
            .par_chunks_mut(chunk)
            .zip(values.par_chunks(chunk))
            .zip(row_scales.par_chunks_mut(ROWS_PER_PIECE))
            .for_each(|((out, values), scales)| {
                for ((out, values), scale) in out
                    .chunks_exact_mut(self.depth)
                    .zip(values.chunks_exact(self.depth))
                    .zip(scales)
                {
                    *scale = quantise_input_row(values, out);
                }
            });
        let zero_points = vec![ZERO_POINT; rows];
        let mut sums = vec![0i32; rows * self.width];
        GemmExecutor::<u8, i8, i32>::default()
            .gemm(
                &mut sums,
                GemmInputA::Unpacked(NdTensorView::from_data(
                    [rows, self.depth],
                    quantised.as_slice(),
                )),
                GemmInputB::Packed(&self.packed),
                GemmOptions {
                    a_quant: Some(QuantParams {
                        zero_point: &zero_points,
                    }),
                    ..GemmOptions::default()
                },
            )
            .map_err(|err| candle_core::Error::Msg(format!("int8 matrix product: {err}")))?;
        let mut out = vec![0.0f32; sums.len()];
        let chunk = ROWS_PER_PIECE * self.width;
        out.par_chunks_mut(chunk)
            .zip(sums.par_chunks(chunk))
            .zip(row_scales.par_chunks(ROWS_PER_PIECE))
            .for_each(|((out, sums), scales)| {
                for ((out, sums), &row_scale) in out
                    .chunks_exact_mut(self.width)
                    .zip(sums.chunks_exact(self.width))
                    .zip(scales)
                {
                    for ((value, &sum), &scale) in out.iter_mut().zip(sums).zip(&self.scales) {
                        *value = sum as f32 * (row_scale * scale);
                    }
                    if let Some(bias) = &self.bias {
                        for (value, bias) in out.iter_mut().zip(bias) {
                            *value += bias;
                        }
                    }
                }
            });
        if let Some(last) = shape.last_mut() {
            *last = self.width;
        }
        Tensor::from_vec(out, shape, &Device::Cpu)
    }
}

/// Rounds to the nearest integer, ties to even, without SSE4.1's `round` (which the compiler
/// may not assume): adding and removing 1.5 * 2^23 leaves the integer, for |x| < 2^22.
#[inline(always)]
fn round(x: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0;
    (x + ROUND) - ROUND
}

/// The uint8 that stands for an input's zero: an int8 input `q` is passed as `q + 128`.
pub(super) const ZERO_POINT: u8 = 128;

/// The scale that maps `values`' largest magnitude to 127 (1 for a row of zeros).
fn symmetric_scale(values: &[f32]) -> f32 {
    let largest = values
        .iter()
        .fold(0.0f32, |max, value| max.max(value.abs()));
    if largest > 0.0 {
        largest / 127.0
    } else {
        1.0
    }
}

/// `rows` (of `depth` values each) quantised symmetrically to int8, one scale a row, with the
/// scales.
pub(super) fn quantise_rows(rows: &[f32], depth: usize) -> (Vec<i8>, Vec<f32>) {
    let mut quantised = vec![0i8; rows.len()];
    let scales = quantised
        .chunks_exact_mut(depth)
        .zip(rows.chunks_exact(depth))
        .map(|(out, row)| {
            let scale = symmetric_scale(row);
            let inverse = 1.0 / scale;
            for (out, value) in out.iter_mut().zip(row) {
                *out = round(value * inverse).clamp(-127.0, 127.0) as i8;
            }
            scale
        })
        .collect();
    (quantised, scales)
}

/// `row` quantised symmetrically to int8, stored as uint8 around [`ZERO_POINT`] into `out`;
/// returns the scale.
pub(super) fn quantise_input_row(row: &[f32], out: &mut [u8]) -> f32 {
    let scale = symmetric_scale(row);
    let inverse = 1.0 / scale;
    for (out, &value) in out.iter_mut().zip(row) {
        *out = (round(value * inverse).clamp(-127.0, 127.0) + f32::from(ZERO_POINT)) as u8;
    }
    scale
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `rows` x `columns` matrix of values in about [-range, range], spread unevenly.
    fn matrix(rows: usize, columns: usize, seed: usize, range: f32) -> Tensor {
        let values: Vec<f32> = (0..rows * columns)
            .map(|i| ((i * 7919 + seed * 104_729) % 2001) as f32 / 1000.0 - 1.0)
            .map(|v| v * v * v.signum() * range)
            .collect();
        Tensor::from_vec(values, (rows, columns), &Device::Cpu).unwrap()
    }

    /// The largest difference between `a` and `b`, and `b`'s largest magnitude.
    fn largest_difference(a: &Tensor, b: &Tensor) -> (f32, f32) {
        (
            super::super::largest_magnitude(&(a - b).unwrap()),
            super::super::largest_magnitude(b),
        )
    }

    #[test]
    fn an_int8_layer_computes_the_f32_layers_product_within_quantisation_error() {
        let (depth, width) = (96, 40);
        let weight = matrix(width, depth, 1, 0.2);
        let bias = matrix(1, width, 2, 1.0).squeeze(0).unwrap();
        // Rows of very different ranges, and a third dimension as the encoder's (1, n, d).
        let x = Tensor::cat(&[matrix(3, depth, 3, 5.0), matrix(2, depth, 4, 0.01)], 0)
            .unwrap()
            .unsqueeze(0)
            .unwrap();

        let f32s = Products::F32
            .layer(weight.clone(), Some(bias.clone()))
            .unwrap()
            .forward(&x)
            .unwrap();
        let int8 = Products::Int8
            .layer(weight, Some(bias))
            .unwrap()
            .forward(&x)
            .unwrap();

        assert_eq!(int8.dims(), &[1, 5, width]);
        // Each row against its own range: the small rows are not drowned by the large ones.
        for row in 0..5 {
            let (ours, theirs) = (int8.get(0).unwrap(), f32s.get(0).unwrap());
            let (worst, scale) =
                largest_difference(&ours.get(row).unwrap(), &theirs.get(row).unwrap());
            assert!(worst <= 0.02 * scale, "row {row}: {worst} of {scale}");
        }
    }

    #[test]
    fn every_rows_result_is_its_result_alone_whatever_rows_are_beside_it() {
        // Forty rows of ranges from 0.01 to 40 (more than rten-gemm's panels of rows, whose
        // zero points it packs wrong when they differ): each row, multiplied in the batch,
        // gives what it gives alone.
        let (depth, width) = (64, 24);
        let layer = Products::Int8
            .layer(matrix(width, depth, 5, 0.3), None)
            .unwrap();
        let rows: Vec<Tensor> = (0..40)
            .map(|i| matrix(1, depth, 6 + i, 0.01 * 1.2f32.powi(i as i32)))
            .collect();
        let batch = layer.forward(&Tensor::cat(&rows, 0).unwrap()).unwrap();

        for (i, row) in rows.iter().enumerate() {
            let alone = layer.forward(row).unwrap();
            assert_eq!(
                alone.to_vec2::<f32>().unwrap(),
                batch.narrow(0, i, 1).unwrap().to_vec2::<f32>().unwrap(),
                "row {i}"
            );
        }
    }

    #[test]
    fn input_rows_quantise_around_128_with_their_own_scale() {
        let mut out = [0u8; 4];
        let scale = quantise_input_row(&[-1.0, 0.0, 0.5, 2.0], &mut out);
        assert!((scale - 2.0 / 127.0).abs() < 1e-7);
        assert_eq!(out, [128 - 64, 128, 128 + 32, 128 + 127]);

        let scale = quantise_input_row(&[0.0; 4], &mut out);
        assert_eq!((scale, out), (1.0, [128; 4]));
    }
}
