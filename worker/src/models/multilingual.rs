//! The multilingual sentence encoder: Universal Sentence Encoder multilingual v3 (16 languages:
//! ar, de, en, es, fr, it, ja, ko, nl, pl, pt, ru, th, tr, zh-cn, zh-tw; Apache-2.0), prepared by
//! `scripts/models.d/multilingual.py` into `APP_MODEL_DIR/multilingual/`, its matrix products
//! run by rten-gemm on weights packed at load. Its embeddings are aligned across languages (a
//! sentence and its translation land close together), so a head trained mostly on English text
//! scores the other languages too.
//!
//! The forward pass, as the package's numpy one: the SentencePiece pieces of a text (between
//! `<s>` and `</s>`) look up rows of a 128,010 x 512 word table kept as bytes (each row's chunk,
//! `id % 17`, has its own scale and offset: dequantised per run, never as a whole); a projection
//! to three 256-wide branches (layer-normalised together), each a two-layer n-gram convolution
//! (orders 2, 3 and 5, with residual connections, windows never crossing into another text);
//! the word row and the three branches layer-normalised, summed over the text, projected and
//! divided by the square root of its length; a 4-layer network with two skip connections,
//! `tanh`, and unit length.
//!
//! A run keeps to one core, as MiniLM's do ([`CorePools`]): the inference slots run one batch
//! per core. (On candle's matrix products, which split every product over all the cores, the
//! threads waiting for each other's share spun for 5.6 % of a text worker's time at
//! saturation.)

use std::path::Path;

use anyhow::{anyhow, bail, Context};
use candle_core::{Device, Tensor};
use rten_gemm::{BiasVector, GemmExecutor, GemmInputA, GemmInputB, GemmOptions, PackedBMatrix};
use rten_tensor::NdTensorView;

mod pieces;

use pieces::Pieces;

use super::onnx::CorePools;

/// The files the worker reads, relative to `APP_MODEL_DIR`.
pub const FILES: [&str; 3] = [
    "multilingual/encoder.safetensors",
    "multilingual/table.u8",
    "multilingual/tokenizer.json",
];

/// The gauge's name for the encoder.
pub const MODEL: &str = "text_multilingual";

/// The length of an embedding.
pub const DIM: usize = 512;

/// The width of each convolution branch.
const BRANCH: usize = 256;

/// The width of the features summed over a text: the word row and the three branches.
const FEATURES: usize = DIM + 3 * BRANCH;

/// The word table's quantisation chunks: row `r` belongs to chunk `r % CHUNKS`.
const CHUNKS: usize = 17;

/// The convolution branches: (n-gram order, how many tokens of the window lie before the
/// token).
const ORDERS: [(usize, usize); 3] = [(2, 0), (3, 1), (5, 2)];

/// Pieces read of a text at most (with `<s>` and `</s>`); the caller cuts long texts into
/// segments first.
const MAX_PIECES: usize = 256;

/// The unknown piece, `<s>` and `</s>`.
const UNKNOWN: u32 = 0;
const START: u32 = 1;
const END: u32 = 2;

/// A weight matrix (`depth` x `width`), packed at load for rten-gemm's kernel on this CPU.
struct Weights {
    packed: PackedBMatrix<f32>,
    depth: usize,
    width: usize,
}

impl Weights {
    /// The matrix `tensor` (2-dimensional, f32), packed by `gemm`.
    fn pack(gemm: &GemmExecutor<f32>, tensor: &Tensor) -> anyhow::Result<Self> {
        let (depth, width) = tensor.dims2()?;
        let values = tensor.flatten_all()?.to_vec1::<f32>()?;
        let matrix = NdTensorView::try_from_data([depth, width], values.as_slice())
            .map_err(|err| anyhow!("a {depth} x {width} matrix: {err:?}"))?;
        Ok(Self {
            packed: gemm.prepack_b(matrix),
            depth,
            width,
        })
    }

    /// `a` (rows of `depth`) times the matrix, plus `bias` (one value a column) when given,
    /// into `out` (rows of `width`), which it replaces, or to which it is added with
    /// `accumulate`.
    fn multiply(
        &self,
        gemm: &GemmExecutor<f32>,
        a: &[f32],
        bias: Option<&[f32]>,
        accumulate: bool,
        out: &mut [f32],
    ) -> anyhow::Result<()> {
        let rows = a.len() / self.depth;
        let a = NdTensorView::try_from_data([rows, self.depth], a)
            .map_err(|err| anyhow!("rows of {} for a depth of {}: {err:?}", a.len(), self.depth))?;
        gemm.gemm(
            out,
            GemmInputA::Unpacked(a),
            GemmInputB::Packed(&self.packed),
            GemmOptions {
                beta: if accumulate { 1.0 } else { 0.0 },
                bias: bias.map(BiasVector::Row),
                ..GemmOptions::default()
            },
        )
        .map_err(|err| anyhow!("matrix product: {err}"))
    }

    /// `a` (rows of `depth`) times the matrix, plus `bias` when given.
    fn product(
        &self,
        gemm: &GemmExecutor<f32>,
        a: &[f32],
        bias: Option<&[f32]>,
    ) -> anyhow::Result<Vec<f32>> {
        let mut out = vec![0.0; a.len() / self.depth * self.width];
        self.multiply(gemm, a, bias, false, &mut out)?;
        Ok(out)
    }
}

/// One convolution branch's two layers.
struct Branch {
    order: usize,
    left: usize,
    w1: Weights,
    b1: Vec<f32>,
    w2: Weights,
    b2: Vec<f32>,
}

/// The encoder, loaded once; `embed` may be called from several threads at once.
pub struct Encoder {
    tokenizer: Pieces,
    /// The word table, one byte a value, rows in piece order.
    table: Vec<u8>,
    /// Per chunk, the scale and the offset of its bytes.
    scale: [f32; CHUNKS],
    low: [f32; CHUNKS],
    /// The three branches' input projections side by side (512 x 768), their bias and their
    /// joint layer norm.
    projection: Weights,
    projection_bias: Vec<f32>,
    branch_norm: (Vec<f32>, Vec<f32>),
    branches: Vec<Branch>,
    /// The layer norm over the word row and the branches ([`FEATURES`] wide).
    norm: (Vec<f32>, Vec<f32>),
    /// The projection of the summed tokens (1280 x 512) and its bias.
    pool: Weights,
    pool_bias: Vec<f32>,
    /// The 4-layer network: d0 (512 x 320), p1 (512 x 320), d1 (320 x 320), d2 (320 x 512),
    /// p3 (320 x 512), d3 (512 x 512).
    d0: Weights,
    p1: Weights,
    d1: Weights,
    d2: Weights,
    p3: Weights,
    d3: Weights,
    eps: f32,
    /// The runs' single-thread pools.
    pools: CorePools,
}

impl Encoder {
    /// Loads `encoder.safetensors`, `table.u8` (the word table's bytes, read straight into
    /// memory: no second copy at load) and `tokenizer.json` from `dir/multilingual`.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let dir = dir.join("multilingual");
        let tokenizer = Pieces::load(&dir.join("tokenizer.json"))?;
        let path = dir.join("encoder.safetensors");
        let tensors = candle_core::safetensors::load(&path, &Device::Cpu)
            .with_context(|| format!("reading {}", path.display()))?;
        let take = |name: &str| {
            tensors
                .get(name)
                .cloned()
                .with_context(|| format!("{}: no tensor {name}", path.display()))
        };
        let vector = |t: Tensor| -> anyhow::Result<Vec<f32>> { Ok(t.to_vec1::<f32>()?) };
        let eps = vector(take("eps")?)?.first().copied().unwrap_or(1e-12);
        let table_path = dir.join("table.u8");
        let table = std::fs::read(&table_path)
            .with_context(|| format!("reading {}", table_path.display()))?;
        if table.is_empty() || table.len() % DIM != 0 {
            bail!("{}: not rows of {DIM} bytes", table_path.display());
        }
        let chunk_values = |t: Tensor| -> anyhow::Result<[f32; CHUNKS]> {
            <[f32; CHUNKS]>::try_from(vector(t)?)
                .map_err(|v| anyhow!("{} chunk values, expected {CHUNKS}", v.len()))
        };
        let scale = chunk_values(take("scale")?)?;
        let low = chunk_values(take("lo")?)?;
        let gemm = GemmExecutor::<f32>::new();
        let weights = |name: &str| -> anyhow::Result<Weights> {
            Weights::pack(&gemm, &take(name)?)
                .with_context(|| format!("{}: {name}", path.display()))
        };
        let mut projections = Vec::new();
        let mut biases = Vec::new();
        let mut gammas = Vec::new();
        let mut betas = Vec::new();
        let mut branches = Vec::new();
        for (order, left) in ORDERS {
            projections.push(take(&format!("proj{order}"))?);
            biases.extend(vector(take(&format!("proj_b{order}"))?)?);
            gammas.extend(vector(take(&format!("ln_g{order}"))?)?);
            betas.extend(vector(take(&format!("ln_b{order}"))?)?);
            branches.push(Branch {
                order,
                left,
                w1: weights(&format!("w1_{order}"))?,
                b1: vector(take(&format!("b1_{order}"))?)?,
                w2: weights(&format!("w2_{order}"))?,
                b2: vector(take(&format!("b2_{order}"))?)?,
            });
        }
        let encoder = Self {
            tokenizer,
            table,
            scale,
            low,
            projection: Weights::pack(&gemm, &Tensor::cat(&projections, 1)?)?,
            projection_bias: biases,
            branch_norm: (gammas, betas),
            branches,
            norm: (vector(take("ln_g")?)?, vector(take("ln_b")?)?),
            pool: weights("cnn_W")?,
            pool_bias: vector(take("cnn_b")?)?,
            d0: weights("d0")?,
            p1: weights("p1")?,
            d1: weights("d1")?,
            d2: weights("d2")?,
            p3: weights("p3")?,
            d3: weights("d3")?,
            eps,
            pools: CorePools::default(),
        };
        let probe = encoder.embed(&["a sentence".to_owned()])?;
        if probe.first().map(Vec::len) != Some(DIM) {
            bail!("{} does not give {DIM}-long embeddings", path.display());
        }
        Ok(encoder)
    }

    /// The piece ids of `text` as the package gives them: `<s>`, the pieces (one unknown
    /// piece a character without a piece), `</s>`; one unknown piece for a text without any.
    pub fn pieces(&self, text: &str) -> anyhow::Result<Vec<u32>> {
        let mut ids = vec![START];
        ids.extend(self.tokenizer.encode(text)?);
        if ids.len() == 1 {
            ids.push(UNKNOWN);
        }
        ids.truncate(MAX_PIECES - 1);
        ids.push(END);
        Ok(ids)
    }

    /// The embeddings of `texts` (unit length, [`DIM`] long), in order, computed in one run
    /// on one core.
    pub fn embed(&self, texts: &[String]) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let pieces = texts
            .iter()
            .map(|text| self.pieces(text))
            .collect::<anyhow::Result<Vec<_>>>()?;
        self.pools.run(|| self.forward(&pieces))
    }

    /// The forward pass over the texts' pieces (each at least one).
    fn forward(&self, pieces: &[Vec<u32>]) -> anyhow::Result<Vec<Vec<f32>>> {
        // An executor per run: it is neither `Send` nor `Sync`. It picks the same kernel as the
        // one that packed the weights at load (the CPU's best).
        let gemm = GemmExecutor::<f32>::new();
        let mut tokens = 0;
        let mut spans = Vec::with_capacity(pieces.len());
        for ids in pieces {
            spans.push((tokens, ids.len()));
            tokens += ids.len();
        }
        // Each token's features: its word row, then the three branches' outputs.
        let mut features = vec![0.0; tokens * FEATURES];
        let rows = self.table.len() / DIM;
        for (&id, row) in pieces
            .iter()
            .flatten()
            .zip(features.as_chunks_mut::<FEATURES>().0)
        {
            let id = id as usize;
            if id >= rows {
                bail!("piece {id} is outside the word table");
            }
            let (scale, low) = (self.scale[id % CHUNKS], self.low[id % CHUNKS]);
            let bytes = &self.table[id * DIM..(id + 1) * DIM];
            for (value, &byte) in row.iter_mut().zip(bytes) {
                *value = f32::from(byte) * scale + low;
            }
        }
        let words = columns(&features, FEATURES, 0, DIM);
        let mut projected = self
            .projection
            .product(&gemm, &words, Some(&self.projection_bias))?;
        layer_norm(&mut projected, &self.branch_norm, self.eps)?;
        let width = self.projection.width;
        for (i, branch) in self.branches.iter().enumerate() {
            let input = columns(&projected, width, i * BRANCH, BRANCH);
            let mut hidden = convolve(&gemm, &input, branch, &spans, &branch.w1, &branch.b1)?;
            relu_add(&mut hidden, &input);
            let mut out = convolve(&gemm, &hidden, branch, &spans, &branch.w2, &branch.b2)?;
            relu_add(&mut out, &hidden);
            let at = DIM + i * BRANCH;
            for (row, part) in features
                .as_chunks_mut::<FEATURES>()
                .0
                .iter_mut()
                .zip(out.as_chunks::<BRANCH>().0)
            {
                row[at..at + BRANCH].copy_from_slice(part);
            }
        }
        layer_norm(&mut features, &self.norm, self.eps)?;
        let mut sums = vec![0.0; spans.len() * FEATURES];
        for (&(start, len), sum) in spans.iter().zip(sums.as_chunks_mut::<FEATURES>().0) {
            for row in features[start * FEATURES..(start + len) * FEATURES]
                .as_chunks::<FEATURES>()
                .0
            {
                sum.iter_mut().zip(row).for_each(|(s, v)| *s += v);
            }
        }
        let mut pooled = self.pool.product(&gemm, &sums, None)?;
        for (&(_, len), row) in spans.iter().zip(pooled.chunks_exact_mut(self.pool.width)) {
            let len = len as f32;
            let root = len.sqrt();
            for (value, bias) in row.iter_mut().zip(&self.pool_bias) {
                *value = (*value + len * bias) / root;
            }
        }
        let mut y0 = self.d0.product(&gemm, &pooled, None)?;
        relu(&mut y0);
        let mut y1 = self.p1.product(&gemm, &pooled, None)?;
        self.d1.multiply(&gemm, &y0, None, true, &mut y1)?;
        relu(&mut y1);
        let mut y2 = self.d2.product(&gemm, &y1, None)?;
        relu(&mut y2);
        let mut z = self.p3.product(&gemm, &y1, None)?;
        self.d3.multiply(&gemm, &y2, None, true, &mut z)?;
        let eps = self.eps;
        Ok(z.chunks_exact(self.d3.width)
            .map(|row| {
                let row: Vec<f32> = row.iter().map(|v| v.tanh()).collect();
                let norm = row.iter().map(|x| x * x).sum::<f32>().max(eps).sqrt();
                row.into_iter().map(|x| x / norm).collect()
            })
            .collect())
    }
}

/// Columns `first..first + count` of `x` (rows of `width`), contiguous.
fn columns(x: &[f32], width: usize, first: usize, count: usize) -> Vec<f32> {
    x.chunks_exact(width)
        .flat_map(|row| &row[first..first + count])
        .copied()
        .collect()
}

/// `max(x, 0)` in place.
fn relu(x: &mut [f32]) {
    x.iter_mut().for_each(|v| *v = v.max(0.0));
}

/// `max(x, 0) + residual` in place.
fn relu_add(x: &mut [f32], residual: &[f32]) {
    x.iter_mut()
        .zip(residual)
        .for_each(|(v, r)| *v = v.max(0.0) + r);
}

/// One convolution layer of `branch` over `x` (tokens x 256): each token's window of
/// `branch.order` rows (starting `branch.left` before it; rows outside its own text are zero)
/// side by side, times `weight`, plus `bias`.
fn convolve(
    gemm: &GemmExecutor<f32>,
    x: &[f32],
    branch: &Branch,
    spans: &[(usize, usize)],
    weight: &Weights,
    bias: &[f32],
) -> anyhow::Result<Vec<f32>> {
    let tokens = x.len() / BRANCH;
    let mut windows = vec![0.0; tokens * branch.order * BRANCH];
    let mut slots = windows.as_chunks_mut::<BRANCH>().0.iter_mut();
    for &(start, len) in spans {
        for t in start..start + len {
            for k in 0..branch.order {
                let Some(slot) = slots.next() else {
                    bail!("more windows than tokens");
                };
                match (t + k).checked_sub(branch.left) {
                    Some(at) if at >= start && at < start + len => {
                        slot.copy_from_slice(&x[at * BRANCH..(at + 1) * BRANCH]);
                    }
                    _ => {}
                }
            }
        }
    }
    weight.product(gemm, &windows, Some(bias))
}

/// Each row of `x` (rows as wide as `gamma`) less its mean, divided by its standard deviation
/// (`eps` added to the variance), times `gamma` plus `beta`, in place.
fn layer_norm(x: &mut [f32], (gamma, beta): &(Vec<f32>, Vec<f32>), eps: f32) -> anyhow::Result<()> {
    let width = gamma.len();
    if width == 0 || beta.len() != width || !x.len().is_multiple_of(width) {
        bail!(
            "a layer norm of {width} ({} offsets) for {} values",
            beta.len(),
            x.len()
        );
    }
    for row in x.chunks_exact_mut(width) {
        let mean = row.iter().sum::<f32>() / width as f32;
        row.iter_mut().for_each(|v| *v -= mean);
        let variance = row.iter().map(|v| v * v).sum::<f32>() / width as f32;
        let inverse = 1.0 / (variance + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *v = *v * inverse * g + b;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sentence with the package's ids and embedding, as the preparing script stored it
    /// (`multilingual/reference.json`).
    #[derive(serde::Deserialize)]
    struct Reference {
        text: String,
        ids: Vec<u32>,
        embedding: Vec<f32>,
    }

    fn reference(dir: &Path) -> Vec<Reference> {
        let raw = std::fs::read(dir.join("multilingual").join("reference.json")).unwrap();
        serde_json::from_slice(&raw).unwrap()
    }

    #[tokio::test]
    #[ignore = "needs the prepared models: TEST_MODEL_DIR"]
    async fn multilingual_encoder_gives_the_packages_ids_and_embeddings() {
        let dir =
            std::path::PathBuf::from(std::env::var_os("TEST_MODEL_DIR").expect("TEST_MODEL_DIR"));
        let encoder = Encoder::load(&dir).unwrap();
        let reference = reference(&dir);
        let texts: Vec<String> = reference.iter().map(|r| r.text.clone()).collect();

        let one_run = encoder.embed(&texts).unwrap();

        assert!(reference.len() >= 10);
        for (
            Reference {
                text,
                ids,
                embedding: expected,
            },
            got,
        ) in reference.iter().zip(&one_run)
        {
            assert_eq!(&encoder.pieces(text).unwrap(), ids, "{text:?}");
            let cosine: f32 = expected.iter().zip(got).map(|(a, b)| a * b).sum();
            let largest = expected
                .iter()
                .zip(got)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(
                cosine > 0.9999 && largest < 1e-3,
                "{text:?}: {cosine} {largest}"
            );
            let alone = encoder.embed(std::slice::from_ref(text)).unwrap();
            let same: f32 = alone[0].iter().zip(got).map(|(a, b)| a * b).sum();
            assert!(same > 0.99999, "{text:?} alone and in a run: {same}");
        }
        // Runs at once each take a single-thread pool of their own and give the same values;
        // every pool goes back to the stack (the load's probe made the first).
        let together = crate::models::at_once(3, || encoder.embed(&texts).unwrap());
        assert!(together.iter().all(|run| *run == one_run));
        let idle = encoder.pools.idle();
        assert!((1..=3).contains(&idle), "{idle} idle pools");
    }
}
