//! 3x3 convolutions (stride 1, padding 1) by Winograd's minimal filtering F(4x4, 3x3): each
//! 6x6 input tile and 3x3 kernel are transformed so that 16 outputs cost 36 multiplications
//! instead of 144, done as 36 matrix products (one per position of the transformed tile, over
//! all tiles and channels) on rten-gemm. Lavin and Gray, "Fast Algorithms for Convolutional
//! Neural Networks" (2015), give the transforms; the interpolation points are 0, ±1, ±2.
//!
//! Images are channels last, so every transform runs along a vector of channels; the
//! transforms are compiled for the CPU's widest vectors through rten-simd's dispatch.

use anyhow::{anyhow, ensure};
use rten_gemm::{GemmExecutor, GemmInputA, GemmInputB, GemmOptions, PackedBMatrix};
use rten_simd::{Isa, SimdOp};
use rten_tensor::NdTensorView;

/// Side of an output tile.
const OUT: usize = 4;
/// Side of an input tile.
const TILE: usize = OUT + 2;
/// Positions of a transformed tile.
const POSITIONS: usize = TILE * TILE;

/// `G`: a kernel's 3 taps to the 6 transformed ones.
const G: [[f32; 3]; TILE] = [
    [1.0 / 4.0, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
    [0.0, 0.0, 1.0],
];

/// A 3x3 convolution's weights, transformed: one `in_channels x out_channels` matrix per
/// position of the 6x6 tile.
pub struct Winograd {
    weights: Vec<PackedBMatrix<f32>>,
    in_channels: usize,
    out_channels: usize,
}

/// What becomes of the convolution's output: plus the `bias` of its channel, plus
/// `residual`, then the ReLU if `relu`.
pub struct Epilogue<'a> {
    pub bias: &'a [f32],
    pub residual: Option<&'a [f32]>,
    pub relu: bool,
}

impl Winograd {
    /// Transforms `weights` (`out_channels x in_channels x 3 x 3`, ONNX's order).
    pub fn new(
        gemm: &GemmExecutor<f32>,
        weights: &[f32],
        out_channels: usize,
        in_channels: usize,
    ) -> Self {
        let mut transformed = vec![vec![0.0f32; in_channels * out_channels]; POSITIONS];
        for (index, kernel) in weights.chunks_exact(9).enumerate() {
            let (out_channel, in_channel) = (index / in_channels, index % in_channels);
            // G g Gᵀ, one side at a time.
            let mut half = [[0.0f32; 3]; TILE];
            for (row, g) in half.iter_mut().zip(&G) {
                for (column, value) in row.iter_mut().enumerate() {
                    *value = (0..3).map(|k| g[k] * kernel[k * 3 + column]).sum();
                }
            }
            for (i, row) in half.iter().enumerate() {
                for (j, g) in G.iter().enumerate() {
                    transformed[i * TILE + j][in_channel * out_channels + out_channel] =
                        (0..3).map(|k| row[k] * g[k]).sum();
                }
            }
        }
        let weights = transformed
            .iter()
            .map(|matrix| {
                gemm.prepack_b(NdTensorView::from_data(
                    [in_channels, out_channels],
                    &matrix[..],
                ))
            })
            .collect();
        Self {
            weights,
            in_channels,
            out_channels,
        }
    }

    /// How many values of scratch space [`Winograd::run`] needs for an image of `size`: the
    /// transformed tiles, their products and two tiles' work.
    pub fn scratch_len(&self, size: [usize; 2]) -> usize {
        let tiles = Grid::new(size).tiles();
        let (c, k) = (self.in_channels, self.out_channels);
        POSITIONS * tiles * (c + k) + 2 * POSITIONS * c.max(k)
    }

    /// Convolves `input` (`height x width x in_channels`) into `out` (`height x width x
    /// out_channels`) with a zero padding of 1, then applies `epilogue`. `scratch` holds at
    /// least [`Winograd::scratch_len`] values.
    pub fn run(
        &self,
        gemm: &GemmExecutor<f32>,
        input: &[f32],
        size: [usize; 2],
        out: &mut [f32],
        epilogue: &Epilogue<'_>,
        scratch: &mut [f32],
    ) -> anyhow::Result<()> {
        let grid = Grid::new(size);
        let tiles = grid.tiles();
        let (c, k) = (self.in_channels, self.out_channels);
        ensure!(
            input.len() == size[0] * size[1] * c && out.len() == size[0] * size[1] * k,
            "a 3x3 convolution of {c} to {k} channels given {} and {} values",
            input.len(),
            out.len()
        );
        ensure!(
            scratch.len() >= self.scratch_len(size) && epilogue.bias.len() == k,
            "a 3x3 convolution given too little scratch space or a bias of another length"
        );
        let (transformed, rest) = scratch.split_at_mut(POSITIONS * tiles * c);
        let (products, work) = rest.split_at_mut(POSITIONS * tiles * k);
        InputTransform {
            input,
            channels: c,
            grid: &grid,
            transformed,
            work,
        }
        .dispatch();
        for (position, weights) in self.weights.iter().enumerate() {
            // Position `position` of every tile: rows `POSITIONS * c` apart.
            let a = NdTensorView::from_data_with_strides(
                [tiles, c],
                &transformed[position * c..],
                [POSITIONS * c, 1],
            )
            .map_err(|err| anyhow!("transformed tiles: {err}"))?;
            gemm.gemm(
                &mut products[position * tiles * k..][..tiles * k],
                GemmInputA::Unpacked(a),
                GemmInputB::Packed(weights),
                GemmOptions::default(),
            )
            .map_err(|err| anyhow!("matrix product: {err}"))?;
        }
        OutputTransform {
            products,
            channels: k,
            grid: &grid,
            out,
            epilogue,
            work,
        }
        .dispatch();
        Ok(())
    }
}

/// The image and its tiles.
struct Grid {
    height: usize,
    width: usize,
    rows: usize,
    columns: usize,
}

impl Grid {
    fn new([height, width]: [usize; 2]) -> Self {
        Self {
            height,
            width,
            rows: height.div_ceil(OUT),
            columns: width.div_ceil(OUT),
        }
    }

    fn tiles(&self) -> usize {
        self.rows * self.columns
    }
}

/// Six consecutive vectors of `len` values at the start of `data`.
#[inline(always)]
fn six(data: &mut [f32], len: usize) -> [&mut [f32]; 6] {
    let mut parts = data.chunks_exact_mut(len);
    std::array::from_fn(|_| parts.next().unwrap_or_default())
}

/// `Bᵀ d B` of every 6x6 input tile `d` (zero outside the image) into `transformed[tile]
/// [position]`, each a vector of channels.
struct InputTransform<'a> {
    input: &'a [f32],
    channels: usize,
    grid: &'a Grid,
    transformed: &'a mut [f32],
    work: &'a mut [f32],
}

impl SimdOp for InputTransform<'_> {
    type Output = ();

    #[inline(always)]
    fn eval<I: Isa>(self, _isa: I) {
        let c = self.channels;
        let Grid {
            height,
            width,
            columns,
            ..
        } = *self.grid;
        let (patch, across) = self.work.split_at_mut(POSITIONS * c);
        let across = &mut across[..POSITIONS * c];
        for (tile, target) in self.transformed.chunks_exact_mut(POSITIONS * c).enumerate() {
            let (top, left) = ((tile / columns) * OUT, (tile % columns) * OUT);
            // `patch[i][j]`: the image's pixel (top + i - 1, left + j - 1).
            for (i, row) in patch.chunks_exact_mut(TILE * c).enumerate() {
                let Some(y) = (top + i).checked_sub(1).filter(|&y| y < height) else {
                    row.fill(0.0);
                    continue;
                };
                let first = usize::from(left == 0);
                let end = (width + 1 - left).min(TILE);
                row[..first * c].fill(0.0);
                row[end * c..].fill(0.0);
                let start = (y * width + left + first - 1) * c;
                row[first * c..end * c].copy_from_slice(&self.input[start..][..(end - first) * c]);
            }
            // Down each column j into `across[j][i]`, then along each row i into
            // `target[i][j]`.
            for (j, out) in across.chunks_exact_mut(TILE * c).enumerate() {
                let d = |i: usize| &patch[(i * TILE + j) * c..][..c];
                input_1d([d(0), d(1), d(2), d(3), d(4), d(5)], six(out, c));
            }
            for (i, out) in target.chunks_exact_mut(TILE * c).enumerate() {
                let d = |j: usize| &across[(j * TILE + i) * c..][..c];
                input_1d([d(0), d(1), d(2), d(3), d(4), d(5)], six(out, c));
            }
        }
    }
}

/// `Bᵀ` along six vectors.
#[inline(always)]
fn input_1d([d0, d1, d2, d3, d4, d5]: [&[f32]; 6], [v0, v1, v2, v3, v4, v5]: [&mut [f32]; 6]) {
    let n = v0.len();
    let (d0, d1, d2, d3, d4, d5) = (&d0[..n], &d1[..n], &d2[..n], &d3[..n], &d4[..n], &d5[..n]);
    let (v1, v2, v3, v4, v5) = (
        &mut v1[..n],
        &mut v2[..n],
        &mut v3[..n],
        &mut v4[..n],
        &mut v5[..n],
    );
    for x in 0..n {
        v0[x] = 4.0 * d0[x] - 5.0 * d2[x] + d4[x];
        v1[x] = -4.0 * (d1[x] + d2[x]) + d3[x] + d4[x];
        v2[x] = 4.0 * (d1[x] - d2[x]) - d3[x] + d4[x];
        v3[x] = -2.0 * (d1[x] - d3[x]) - d2[x] + d4[x];
        v4[x] = 2.0 * (d1[x] - d3[x]) - d2[x] + d4[x];
        v5[x] = 4.0 * d1[x] - 5.0 * d3[x] + d5[x];
    }
}

/// `Aᵀ m A` of every tile's products plus the epilogue, into the output pixels.
struct OutputTransform<'a> {
    products: &'a [f32],
    channels: usize,
    grid: &'a Grid,
    out: &'a mut [f32],
    epilogue: &'a Epilogue<'a>,
    work: &'a mut [f32],
}

impl SimdOp for OutputTransform<'_> {
    type Output = ();

    #[inline(always)]
    fn eval<I: Isa>(self, _isa: I) {
        let k = self.channels;
        let Grid {
            height,
            width,
            rows,
            columns,
        } = *self.grid;
        let tiles = rows * columns;
        let (down, across) = self.work.split_at_mut(TILE * OUT * k);
        let across = &mut across[..OUT * OUT * k];
        let bias = &self.epilogue.bias[..k];
        for tile in 0..tiles {
            let (top, left) = ((tile / columns) * OUT, (tile % columns) * OUT);
            // Down each column j into `down[j][i]`, then along each row i into `across[i][j]`.
            for (j, out) in down.chunks_exact_mut(OUT * k).enumerate() {
                let m = |i: usize| &self.products[((i * TILE + j) * tiles + tile) * k..][..k];
                output_1d([m(0), m(1), m(2), m(3), m(4), m(5)], out, k);
            }
            for (i, out) in across.chunks_exact_mut(OUT * k).enumerate() {
                let m = |j: usize| &down[(j * OUT + i) * k..][..k];
                output_1d([m(0), m(1), m(2), m(3), m(4), m(5)], out, k);
            }
            let visible = OUT.min(width - left);
            for i in 0..OUT.min(height - top) {
                let at = ((top + i) * width + left) * k;
                let target = &mut self.out[at..][..visible * k];
                let values = &across[i * OUT * k..][..visible * k];
                for (pixel, values) in target.chunks_exact_mut(k).zip(values.chunks_exact(k)) {
                    for ((o, v), b) in pixel.iter_mut().zip(values).zip(bias) {
                        *o = v + b;
                    }
                }
                if let Some(residual) = self.epilogue.residual {
                    for (o, r) in target.iter_mut().zip(&residual[at..][..visible * k]) {
                        *o += r;
                    }
                }
                if self.epilogue.relu {
                    for o in target.iter_mut() {
                        *o = positive(*o);
                    }
                }
            }
        }
    }
}

/// `Aᵀ` along six vectors into four consecutive vectors of `out`.
#[inline(always)]
fn output_1d([m0, m1, m2, m3, m4, m5]: [&[f32]; 6], out: &mut [f32], n: usize) {
    let (v0, rest) = out.split_at_mut(n);
    let (v1, rest) = rest.split_at_mut(n);
    let (v2, v3) = rest.split_at_mut(n);
    let (v3, m0, m1, m2, m3, m4, m5) = (
        &mut v3[..n],
        &m0[..n],
        &m1[..n],
        &m2[..n],
        &m3[..n],
        &m4[..n],
        &m5[..n],
    );
    for x in 0..n {
        let (a, b) = (m1[x] + m2[x], m1[x] - m2[x]);
        let (c, d) = (m3[x] + m4[x], m3[x] - m4[x]);
        v0[x] = m0[x] + a + c;
        v1[x] = b + 2.0 * d;
        v2[x] = a + 4.0 * c;
        v3[x] = b + 8.0 * d + m5[x];
    }
}

/// `value`, or 0 where it is negative: the ReLU (one instruction; `f32::max` takes three to
/// honour NaN).
#[inline(always)]
pub fn positive(value: f32) -> f32 {
    if value > 0.0 {
        value
    } else {
        0.0
    }
}
