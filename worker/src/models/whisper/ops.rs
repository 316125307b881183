//! The encoder's element-wise hot spots as candle custom operations: the attention's softmax
//! and the GELU after each convolution and first MLP layer. candle computes their exponentials
//! and hyperbolic tangents one at a time through libm (about a sixth of the encoder's time);
//! here rten-vecmath's vectorised softmax and tanh-form GELU run, compiled for the CPU's widest
//! vectors (AVX-512, AVX2, NEON) by rten-simd's dispatch at run time.

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use rayon::prelude::*;
use rten_simd::{SimdOp, SimdUnaryOp};
use rten_vecmath::{ApproxGelu, Softmax as VecSoftmax};

/// Rows of at least this many values are split among rayon's threads one row at a time; the
/// element-wise GELU is split in pieces of this size.
const PIECE: usize = 16 * 1024;

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
            VecSoftmax::new_mut(values).dispatch();
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
            ApproxGelu {}.map_mut(piece);
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
            let worst = super::super::largest_magnitude(&(ours - &candles).unwrap());
            let scale = super::super::largest_magnitude(&candles);
            assert!(worst <= 1e-6 * scale, "differs by {worst} (of {scale})");
        }
    }
}
