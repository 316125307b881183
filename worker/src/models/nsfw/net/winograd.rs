//! 3x3 convolutions (stride 1, padding 1) by Winograd's minimal filtering (Lavin and Gray,
//! "Fast Algorithms for Convolutional Neural Networks", 2015): the input is cut into tiles, each
//! tile and each 3x3 kernel are transformed, and an output tile is then a product position by
//! position, done as one matrix product per position over all tiles and channels on rten-gemm.
//! Two tilings ([`Tiling`]): F(4x4, 3x3), 6x6 input tiles, 36 multiplications for 16 outputs
//! instead of 144 (interpolation points 0, ±1, ±2); and F(2x2, 3x3), 4x4 tiles, 16 for 4
//! instead of 36, whose products have 4 times as many rows (better on small images).
//!
//! Images are channels last, so every transform runs along a vector of channels; the
//! transforms are compiled for the CPU's widest vectors through rten-simd's dispatch.

mod transforms;

use anyhow::{anyhow, ensure};
use rten_gemm::{GemmExecutor, GemmInputA, GemmInputB, GemmOptions, PackedBMatrix};
use rten_simd::{Isa, SimdOp};
use rten_tensor::NdTensorView;

use transforms::{Four, Transforms, Two};

/// The size of the output tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tiling {
    /// F(2x2, 3x3).
    Two,
    /// F(4x4, 3x3).
    Four,
}

/// A 3x3 convolution's weights, transformed: one `in_channels x out_channels` matrix per
/// position of the input tile.
pub struct Winograd {
    tiling: Tiling,
    weights: Vec<PackedBMatrix<f32>>,
    in_channels: usize,
    out_channels: usize,
}

/// What becomes of the convolution's output: plus the `bias` of its channel, plus
/// `residual`, then the ReLU if `relu`.
pub struct Epilogue<'a> {
    /// One value per output channel.
    pub bias: &'a [f32],
    /// As long as the output.
    pub residual: Option<&'a [f32]>,
    pub relu: bool,
}

impl Winograd {
    /// Transforms `weights` (`out_channels x in_channels x 3 x 3`, ONNX's order) for `tiling`.
    pub fn new(
        gemm: &GemmExecutor<f32>,
        tiling: Tiling,
        weights: &[f32],
        out_channels: usize,
        in_channels: usize,
    ) -> Self {
        let transformed = match tiling {
            Tiling::Two => transform_weights::<Two>(weights, out_channels, in_channels),
            Tiling::Four => transform_weights::<Four>(weights, out_channels, in_channels),
        };
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
            tiling,
            weights,
            in_channels,
            out_channels,
        }
    }

    /// How many values of scratch space [`Winograd::run`] needs for an image of `size`: the
    /// transformed tiles, their products and two tiles' work.
    pub fn scratch_len(&self, size: [usize; 2]) -> usize {
        let (out, positions) = match self.tiling {
            Tiling::Two => (Two::OUT, Two::POSITIONS),
            Tiling::Four => (Four::OUT, Four::POSITIONS),
        };
        let tiles = Grid::new(size, out).tiles();
        let (c, k) = (self.in_channels, self.out_channels);
        positions * tiles * (c + k) + 2 * positions * c.max(k)
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
        let run = Run {
            gemm,
            weights: &self.weights,
            input,
            size,
            channels: [c, k],
            out,
            epilogue,
            scratch,
        };
        match self.tiling {
            Tiling::Two => run.tiled::<Two>(),
            Tiling::Four => run.tiled::<Four>(),
        }
    }
}

/// `G g Gᵀ` of every kernel `g`: one `in_channels x out_channels` matrix per position.
fn transform_weights<T: Transforms>(
    weights: &[f32],
    out_channels: usize,
    in_channels: usize,
) -> Vec<Vec<f32>> {
    let mut transformed = vec![vec![0.0f32; in_channels * out_channels]; T::POSITIONS];
    for (index, kernel) in weights.as_chunks::<9>().0.iter().enumerate() {
        let (out_channel, in_channel) = (index / in_channels, index % in_channels);
        // G g, then that times Gᵀ.
        let half: Vec<[f32; 3]> = T::G
            .iter()
            .map(|g| {
                std::array::from_fn(|column| (0..3).map(|k| g[k] * kernel[k * 3 + column]).sum())
            })
            .collect();
        for (i, row) in half.iter().enumerate() {
            for (j, g) in T::G.iter().enumerate() {
                transformed[i * T::TILE + j][in_channel * out_channels + out_channel] =
                    (0..3).map(|k| row[k] * g[k]).sum();
            }
        }
    }
    transformed
}

/// One convolution's run.
struct Run<'a> {
    gemm: &'a GemmExecutor<f32>,
    weights: &'a [PackedBMatrix<f32>],
    input: &'a [f32],
    size: [usize; 2],
    /// In and out.
    channels: [usize; 2],
    out: &'a mut [f32],
    epilogue: &'a Epilogue<'a>,
    scratch: &'a mut [f32],
}

impl Run<'_> {
    fn tiled<T: Transforms>(self) -> anyhow::Result<()> {
        let grid = Grid::new(self.size, T::OUT);
        let tiles = grid.tiles();
        let [c, k] = self.channels;
        let (transformed, rest) = self.scratch.split_at_mut(T::POSITIONS * tiles * c);
        let (products, work) = rest.split_at_mut(T::POSITIONS * tiles * k);
        InputTransform::<T> {
            input: self.input,
            channels: c,
            grid: &grid,
            transformed,
            work,
            tiling: std::marker::PhantomData,
        }
        .dispatch();
        for (position, weights) in self.weights.iter().enumerate() {
            // Position `position` of every tile: rows `POSITIONS * c` apart.
            let a = NdTensorView::from_data_with_strides(
                [tiles, c],
                &transformed[position * c..],
                [T::POSITIONS * c, 1],
            )
            .map_err(|err| anyhow!("transformed tiles: {err}"))?;
            self.gemm
                .gemm(
                    &mut products[position * tiles * k..][..tiles * k],
                    GemmInputA::Unpacked(a),
                    GemmInputB::Packed(weights),
                    GemmOptions::default(),
                )
                .map_err(|err| anyhow!("matrix product: {err}"))?;
        }
        OutputTransform::<T> {
            products,
            channels: k,
            grid: &grid,
            out: self.out,
            epilogue: self.epilogue,
            work,
            tiling: std::marker::PhantomData,
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
    fn new([height, width]: [usize; 2], out: usize) -> Self {
        Self {
            height,
            width,
            rows: height.div_ceil(out),
            columns: width.div_ceil(out),
        }
    }

    fn tiles(&self) -> usize {
        self.rows * self.columns
    }
}

/// `Bᵀ d B` of every input tile `d` (zero outside the image) into `transformed[tile]
/// [position]`, each a vector of channels.
struct InputTransform<'a, T> {
    input: &'a [f32],
    channels: usize,
    grid: &'a Grid,
    transformed: &'a mut [f32],
    work: &'a mut [f32],
    tiling: std::marker::PhantomData<T>,
}

impl<T: Transforms> SimdOp for InputTransform<'_, T> {
    type Output = ();

    #[inline(always)]
    fn eval<I: Isa>(self, _isa: I) {
        let c = self.channels;
        let (side, out_side) = (T::TILE, T::OUT);
        let Grid {
            height,
            width,
            columns,
            ..
        } = *self.grid;
        let (patch, across) = self.work.split_at_mut(T::POSITIONS * c);
        let across = &mut across[..T::POSITIONS * c];
        let empty: &[f32] = &[];
        for (tile, target) in self
            .transformed
            .chunks_exact_mut(T::POSITIONS * c)
            .enumerate()
        {
            let (top, left) = ((tile / columns) * out_side, (tile % columns) * out_side);
            // `patch[i][j]`: the image's pixel (top + i - 1, left + j - 1).
            for (i, row) in patch.chunks_exact_mut(side * c).enumerate() {
                let Some(y) = (top + i).checked_sub(1).filter(|&y| y < height) else {
                    row.fill(0.0);
                    continue;
                };
                let first = usize::from(left == 0);
                let end = (width + 1 - left).min(side);
                row[..first * c].fill(0.0);
                row[end * c..].fill(0.0);
                let start = (y * width + left + first - 1) * c;
                row[first * c..end * c].copy_from_slice(&self.input[start..][..(end - first) * c]);
            }
            // Down each column j into `across[j][i]`, then along each row i into
            // `target[i][j]`.
            for (j, out) in across.chunks_exact_mut(side * c).enumerate() {
                let mut d = [empty; 6];
                for (i, v) in d.iter_mut().take(side).enumerate() {
                    *v = &patch[(i * side + j) * c..][..c];
                }
                T::input_1d(&d[..side], out);
            }
            for (i, out) in target.chunks_exact_mut(side * c).enumerate() {
                let mut d = [empty; 6];
                for (j, v) in d.iter_mut().take(side).enumerate() {
                    *v = &across[(j * side + i) * c..][..c];
                }
                T::input_1d(&d[..side], out);
            }
        }
    }
}

/// `Aᵀ m A` of every tile's products plus the epilogue, into the output pixels.
struct OutputTransform<'a, T> {
    products: &'a [f32],
    channels: usize,
    grid: &'a Grid,
    out: &'a mut [f32],
    epilogue: &'a Epilogue<'a>,
    work: &'a mut [f32],
    tiling: std::marker::PhantomData<T>,
}

impl<T: Transforms> SimdOp for OutputTransform<'_, T> {
    type Output = ();

    #[inline(always)]
    fn eval<I: Isa>(self, _isa: I) {
        let k = self.channels;
        let (side, out_side) = (T::TILE, T::OUT);
        let Grid {
            height,
            width,
            rows,
            columns,
        } = *self.grid;
        let tiles = rows * columns;
        let (down, across) = self.work.split_at_mut(side * out_side * k);
        let across = &mut across[..out_side * out_side * k];
        let bias = &self.epilogue.bias[..k];
        let empty: &[f32] = &[];
        for tile in 0..tiles {
            let (top, left) = ((tile / columns) * out_side, (tile % columns) * out_side);
            // Down each column j into `down[j][i]`, then along each row i into `across[i][j]`.
            for (j, out) in down.chunks_exact_mut(out_side * k).enumerate() {
                let mut m = [empty; 6];
                for (i, v) in m.iter_mut().take(side).enumerate() {
                    *v = &self.products[((i * side + j) * tiles + tile) * k..][..k];
                }
                T::output_1d(&m[..side], out);
            }
            for (i, out) in across.chunks_exact_mut(out_side * k).enumerate() {
                let mut m = [empty; 6];
                for (j, v) in m.iter_mut().take(side).enumerate() {
                    *v = &down[(j * out_side + i) * k..][..k];
                }
                T::output_1d(&m[..side], out);
            }
            let visible = out_side.min(width - left);
            for i in 0..out_side.min(height - top) {
                let at = ((top + i) * width + left) * k;
                let target = &mut self.out[at..][..visible * k];
                let values = &across[i * out_side * k..][..visible * k];
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
