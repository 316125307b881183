//! The encoder's element-wise hot spots as candle custom operations: the attention's softmax
//! and the GELU after each convolution and first MLP layer. candle computes their exponentials
//! and hyperbolic tangents one at a time through libm (about a sixth of the encoder's time);
//! [`exp`] here is a branch-free polynomial the compiler vectorises, accurate to a few units in
//! the last place, so the transcripts do not change.

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// Rows of at least this many values are split among rayon's threads one row at a time; the
/// element-wise GELU is split in pieces of this size.
const PIECE: usize = 16 * 1024;

/// `e^x`, for `x` in about [-87, 88]: `2^n * e^f` with `n` the nearest integer to `x / ln 2`,
/// `f = x - n ln 2` (ln 2 in two parts, Cody and Waite's, so `f` keeps its precision) and `e^f`
/// (|f| <= ln 2 / 2) its Taylor polynomial of degree 7. Below -87 the result is flushed to
/// about 1e-38, as the softmax wants.
#[inline(always)]
fn exp(x: f32) -> f32 {
    // Adding and removing 1.5 * 2^23 rounds to the nearest integer without SSE4.1's `round`.
    const ROUND: f32 = 12_582_912.0;
    const LN2_HIGH: f32 = 0.693_359_4;
    const LN2_LOW: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let f = (x - n * LN2_HIGH) - n * LN2_LOW;
    let p = 1.0
        + f * (1.0
            + f * (0.5
                + f * (1.0 / 6.0
                    + f * (1.0 / 24.0 + f * (1.0 / 120.0 + f * (1.0 / 720.0 + f / 5040.0))))));
    // 2^n built from its exponent bits; n is within [-126, 127] after the clamp.
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    p * scale
}

/// `values` folded with `op` in eight independent lanes, which the compiler keeps in vector
/// registers (a single running value would be a chain of dependent scalar steps).
#[inline(always)]
fn lanes(values: &[f32], init: f32, op: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = [init; 8];
    let (chunks, remainder) = values.as_chunks::<8>();
    let rest = remainder.iter().copied().fold(init, &op);
    for chunk in chunks {
        for (a, v) in acc.iter_mut().zip(chunk) {
            *a = op(*a, *v);
        }
    }
    acc.into_iter().fold(rest, op)
}

/// Softmax over the last dimension of a contiguous f32 tensor.
struct Softmax;

impl CustomOp1 for Softmax {
    fn name(&self) -> &'static str {
        "whisper-softmax"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("whisper-softmax takes f32");
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("whisper-softmax takes a contiguous tensor");
        };
        let width = layout.dims().last().copied().unwrap_or(1).max(1);
        let mut out = data[start..end].to_vec();
        let row = |values: &mut [f32]| {
            let max = lanes(values, f32::NEG_INFINITY, f32::max);
            for value in values.iter_mut() {
                *value = exp(*value - max);
            }
            let inverse = 1.0 / lanes(values, 0.0, |a, b| a + b);
            for value in values.iter_mut() {
                *value *= inverse;
            }
        };
        let rows_per_piece = (PIECE / width).max(1);
        out.par_chunks_mut(width * rows_per_piece)
            .for_each(|piece| piece.chunks_mut(width).for_each(row));
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

/// GELU, the tanh approximation candle's `gelu` computes, of a contiguous f32 tensor.
struct Gelu;

impl CustomOp1 for Gelu {
    fn name(&self) -> &'static str {
        "whisper-gelu"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("whisper-gelu takes f32");
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("whisper-gelu takes a contiguous tensor");
        };
        let mut out = data[start..end].to_vec();
        out.par_chunks_mut(PIECE).for_each(|piece| {
            for value in piece {
                let x = *value;
                let inner = (2.0 / std::f32::consts::PI).sqrt() * (x + 0.044_715 * x * x * x);
                // tanh(y) = 1 - 2 / (e^(2y) + 1), which saturates correctly at both ends.
                let tanh = 1.0 - 2.0 / (exp(2.0 * inner) + 1.0);
                *value = 0.5 * x * (1.0 + tanh);
            }
        });
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

/// Softmax over the last dimension of `x` (f32).
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op1_no_bwd(&Softmax)
}

/// GELU (tanh approximation) of `x` (f32).
pub fn gelu(x: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op1_no_bwd(&Gelu)
}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::*;

    #[test]
    fn exp_is_within_a_few_ulps_of_the_standard_library() {
        for i in -8_700..8_800 {
            let x = i as f32 / 100.0 + 0.003;
            let (ours, std) = (exp(x), x.exp());
            assert!(
                ((ours - std) / std).abs() < 5e-7,
                "exp({x}) = {ours}, not {std}"
            );
        }
        assert_eq!(exp(-1000.0), exp(-87.0));
        assert!(exp(-87.0) < 1e-37);
    }

    #[test]
    fn softmax_and_gelu_match_candles() {
        let values: Vec<f32> = (0..3 * 1500)
            .map(|i| ((i * 7919 % 2000) as f32 / 100.0) - 10.0)
            .collect();
        let x = Tensor::from_vec(values, (3, 1500), &Device::Cpu).unwrap();

        let pairs = [
            (
                softmax_last_dim(&x).unwrap(),
                candle_nn::ops::softmax_last_dim(&x).unwrap(),
            ),
            (gelu(&x).unwrap(), x.gelu().unwrap()),
        ];

        for (ours, candles) in pairs {
            let worst = (ours - &candles)
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            let scale = candles
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert!(worst <= 1e-6 * scale, "differs by {worst} (of {scale})");
        }
    }
}
