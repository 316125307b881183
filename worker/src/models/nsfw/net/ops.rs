//! The arithmetic of the network's steps on channels-last images: convolutions as matrix
//! products, their epilogue, pools and the dense head. Element-wise passes are compiled for the
//! CPU's widest vectors through rten-simd's dispatch.

use anyhow::{anyhow, ensure};
use rten_gemm::{BiasVector, GemmExecutor, GemmInputA, GemmInputB, GemmOptions, PackedBMatrix};
use rten_simd::{Isa, SimdOp};
use rten_tensor::NdTensorView;

use super::{graph::Conv, winograd::positive};

/// About how many values of unfolded windows one block of a convolution holds (256 KB).
const UNFOLD_BLOCK: usize = 64 * 1024;

/// An activation: height x width x channels (channels last, whatever the ONNX graph's layout),
/// in a buffer that may be longer.
pub struct Tensor {
    /// At least as long as the shape's product.
    pub buf: Vec<f32>,
    /// Height, width, channels.
    pub shape: [usize; 3],
}

impl Tensor {
    /// How many values the tensor holds.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Its values.
    pub fn data(&self) -> &[f32] {
        &self.buf[..self.len()]
    }

    /// Its values, to write.
    pub fn data_mut(&mut self) -> &mut [f32] {
        let len = self.len();
        &mut self.buf[..len]
    }
}

/// Buffers no longer in use, for the next values.
#[derive(Default)]
pub struct Buffers {
    /// Each may hold any values.
    pub free: Vec<Vec<f32>>,
}

impl Buffers {
    /// A buffer of at least `len` values (contents unspecified): the smallest free one that
    /// fits, else a free one grown.
    pub fn take(&mut self, len: usize) -> Vec<f32> {
        let fitting = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, buf)| buf.len() >= len)
            .min_by_key(|(_, buf)| buf.len())
            .map(|(index, _)| index);
        let mut buf = match fitting {
            Some(index) => self.free.swap_remove(index),
            None => self.free.pop().unwrap_or_default(),
        };
        if buf.len() < len {
            buf.resize(len, 0.0);
        }
        buf
    }

    /// A tensor of `shape` in a taken buffer (values unspecified).
    pub fn tensor(&mut self, shape: [usize; 3]) -> Tensor {
        Tensor {
            buf: self.take(shape.iter().product()),
            shape,
        }
    }
}

/// The convolution as matrix products, bias added: the image itself for a 1x1 kernel of
/// stride 1, else its unfolded windows, a block of output pixels at a time.
pub fn conv_product(
    gemm: &GemmExecutor<f32>,
    conv: &Conv,
    weights: &PackedBMatrix<f32>,
    input: &Tensor,
    out_w: usize,
    out: &mut [f32],
    buffers: &mut Buffers,
) -> anyhow::Result<()> {
    let out_channels = conv.bias.len();
    let depth = conv.kernel[0] * conv.kernel[1] * conv.in_channels;
    let product = |a: &[f32], out: &mut [f32]| {
        gemm.gemm(
            out,
            GemmInputA::Unpacked(NdTensorView::from_data([a.len() / depth, depth], a)),
            GemmInputB::Packed(weights),
            GemmOptions {
                bias: Some(BiasVector::Row(&conv.bias)),
                ..GemmOptions::default()
            },
        )
        .map_err(|err| anyhow!("matrix product: {err}"))
    };
    if conv.kernel == [1, 1] && conv.stride == [1, 1] && conv.pads == [0; 4] {
        return product(input.data(), out);
    }
    let block = (UNFOLD_BLOCK / depth).max(1);
    let mut windows = buffers.take(block * depth);
    let mut result = Ok(());
    for (index, out_block) in out.chunks_mut(block * out_channels).enumerate() {
        let pixels = out_block.len() / out_channels;
        let windows = &mut windows[..pixels * depth];
        unfold(input, conv, out_w, index * block, windows);
        result = product(windows, out_block);
        if result.is_err() {
            break;
        }
    }
    buffers.free.push(windows);
    result
}

/// im2col, channels last: for the output pixels from `first_pixel` on, one row of `windows`
/// each, holding the input pixels its kernel window covers (zero in the padding). A window's
/// row of `kw` pixels is contiguous in the input, whatever the stride.
fn unfold(input: &Tensor, conv: &Conv, out_w: usize, first_pixel: usize, windows: &mut [f32]) {
    let [height, width, channels] = input.shape;
    let [kh, kw] = conv.kernel;
    let [sh, sw] = conv.stride;
    let [top, left, ..] = conv.pads;
    let span = kw * channels;
    let data = input.data();
    for (offset, row) in windows.chunks_exact_mut(kh * span).enumerate() {
        let pixel = first_pixel + offset;
        let (y, x) = (pixel / out_w, pixel % out_w);
        // Window columns `first..end` are inside the image.
        let first = left.saturating_sub(x * sw).min(kw);
        let end = (width + left).saturating_sub(x * sw).clamp(first, kw);
        for (dy, part) in row.chunks_exact_mut(span).enumerate() {
            let Some(in_y) = (y * sh + dy).checked_sub(top).filter(|&v| v < height) else {
                part.fill(0.0);
                continue;
            };
            part[..first * channels].fill(0.0);
            part[end * channels..].fill(0.0);
            let start = (in_y * width + x * sw + first - left) * channels;
            part[first * channels..end * channels]
                .copy_from_slice(&data[start..][..(end - first) * channels]);
        }
    }
}

/// After a convolution's product: plus `residual`, then the ReLU if `relu`, in one pass
/// compiled for the CPU's widest vectors.
pub struct Finish<'a> {
    /// The product, bias added.
    pub out: &'a mut [f32],
    /// Added to `out`, value by value.
    pub residual: Option<&'a [f32]>,
    pub relu: bool,
}

impl SimdOp for Finish<'_> {
    type Output = ();

    #[inline(always)]
    fn eval<I: Isa>(self, _isa: I) {
        match (self.residual, self.relu) {
            (Some(residual), true) => {
                for (o, r) in self.out.iter_mut().zip(residual) {
                    *o = positive(*o + r);
                }
            }
            (Some(residual), false) => {
                for (o, r) in self.out.iter_mut().zip(residual) {
                    *o += r;
                }
            }
            (None, true) => {
                for o in self.out.iter_mut() {
                    *o = positive(*o);
                }
            }
            (None, false) => {}
        }
    }
}

/// The maximum of each window of `kernel`, moved by `stride`, over `input` padded by `pads`
/// (top, left, bottom, right: the padding never wins).
pub fn max_pool(
    input: &Tensor,
    [kh, kw]: [usize; 2],
    [sh, sw]: [usize; 2],
    [top, left, bottom, right]: [usize; 4],
    buffers: &mut Buffers,
) -> anyhow::Result<Tensor> {
    let [height, width, channels] = input.shape;
    ensure!(
        height + top + bottom >= kh && width + left + right >= kw,
        "a {kh}x{kw} pool of a {height}x{width} image"
    );
    let out_h = (height + top + bottom - kh) / sh + 1;
    let out_w = (width + left + right - kw) / sw + 1;
    let mut out = buffers.tensor([out_h, out_w, channels]);
    MaxPool {
        input,
        out: out.data_mut(),
        out_w,
        kernel: [kh, kw],
        stride: [sh, sw],
        offset: [top, left],
    }
    .dispatch();
    Ok(out)
}

/// A max pool's windows, compiled for the CPU's widest vectors (along the channels).
struct MaxPool<'a> {
    input: &'a Tensor,
    out: &'a mut [f32],
    out_w: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    offset: [usize; 2],
}

impl SimdOp for MaxPool<'_> {
    type Output = ();

    #[inline(always)]
    fn eval<I: Isa>(self, _isa: I) {
        let [height, width, channels] = self.input.shape;
        let ([kh, kw], [sh, sw], [top, left]) = (self.kernel, self.stride, self.offset);
        let data = self.input.data();
        for (pixel, maxima) in self.out.chunks_exact_mut(channels).enumerate() {
            let (y, x) = (pixel / self.out_w, pixel % self.out_w);
            maxima.fill(f32::MIN);
            let rows = (y * sh).saturating_sub(top)..(y * sh + kh).saturating_sub(top).min(height);
            let columns =
                (x * sw).saturating_sub(left)..(x * sw + kw).saturating_sub(left).min(width);
            for in_y in rows {
                for in_x in columns.clone() {
                    let values = &data[(in_y * width + in_x) * channels..][..channels];
                    for (m, &v) in maxima.iter_mut().zip(values) {
                        *m = if v > *m { v } else { *m };
                    }
                }
            }
        }
    }
}
