//! The multilingual sentence encoder: Universal Sentence Encoder multilingual v3 (16 languages:
//! ar, de, en, es, fr, it, ja, ko, nl, pl, pt, ru, th, tr, zh-cn, zh-tw; Apache-2.0), prepared by
//! `scripts/models.d/multilingual.py` into `APP_MODEL_DIR/multilingual/` and run on candle
//! tensors. Its embeddings are aligned across languages (a sentence and its translation land
//! close together), so a head trained mostly on English text scores the other languages too.
//!
//! The forward pass, as the package's numpy one: the SentencePiece pieces of a text (between
//! `<s>` and `</s>`) look up rows of a 128,010 x 512 word table kept as bytes (each row's chunk,
//! `id % 17`, has its own scale and offset: dequantised per run, never as a whole); a projection
//! to three 256-wide branches (layer-normalised together), each a two-layer n-gram convolution
//! (orders 2, 3 and 5, with residual connections, windows never crossing into another text);
//! the word row and the three branches layer-normalised, summed over the text, projected and
//! divided by the square root of its length; a 4-layer network with two skip connections,
//! `tanh`, and unit length.

use std::path::Path;

use anyhow::{bail, Context};
use candle_core::{DType, Device, Tensor};

mod pieces;

use pieces::Pieces;

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

/// One convolution branch's two layers.
struct Branch {
    order: usize,
    left: usize,
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
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
    projection: Tensor,
    projection_bias: Tensor,
    branch_norm: (Vec<f32>, Vec<f32>),
    branches: Vec<Branch>,
    /// The layer norm over the word row and the branches (1280 wide).
    norm: (Vec<f32>, Vec<f32>),
    /// The projection of the summed tokens (1280 x 512) and its bias.
    pool: Tensor,
    pool_bias: Tensor,
    /// The 4-layer network: d0 (512 x 320), p1 (512 x 320), d1 (320 x 320), d2 (320 x 512),
    /// p3 (320 x 512), d3 (512 x 512).
    d0: Tensor,
    p1: Tensor,
    d1: Tensor,
    d2: Tensor,
    p3: Tensor,
    d3: Tensor,
    eps: f32,
}

impl Encoder {
    /// Loads `encoder.safetensors`, `table.u8` (the word table's bytes, read straight into
    /// memory: no second copy at load) and `tokenizer.json` from `dir/multilingual`.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let dir = dir.join("multilingual");
        let tokenizer = Pieces::load(&dir.join("tokenizer.json"))?;
        let path = dir.join("encoder.safetensors");
        let mut tensors = candle_core::safetensors::load(&path, &Device::Cpu)
            .with_context(|| format!("reading {}", path.display()))?;
        let mut take = |name: &str| {
            tensors
                .remove(name)
                .with_context(|| format!("{}: no tensor {name}", path.display()))
        };
        let eps = take("eps")?
            .to_vec1::<f32>()?
            .first()
            .copied()
            .unwrap_or(1e-12);
        let table_path = dir.join("table.u8");
        let table = std::fs::read(&table_path)
            .with_context(|| format!("reading {}", table_path.display()))?;
        if table.is_empty() || table.len() % DIM != 0 {
            bail!("{}: not rows of {DIM} bytes", table_path.display());
        }
        let chunk_values = |t: Tensor| -> anyhow::Result<[f32; CHUNKS]> {
            <[f32; CHUNKS]>::try_from(t.to_vec1::<f32>()?)
                .map_err(|v| anyhow::anyhow!("{} chunk values, expected {CHUNKS}", v.len()))
        };
        let scale = chunk_values(take("scale")?)?;
        let low = chunk_values(take("lo")?)?;
        let vector = |t: Tensor| t.to_vec1::<f32>();
        let mut projections = Vec::new();
        let mut biases = Vec::new();
        let mut gammas = Vec::new();
        let mut betas = Vec::new();
        let mut branches = Vec::new();
        for (order, left) in ORDERS {
            projections.push(take(&format!("proj{order}"))?);
            biases.push(take(&format!("proj_b{order}"))?);
            gammas.push(take(&format!("ln_g{order}"))?);
            betas.push(take(&format!("ln_b{order}"))?);
            branches.push(Branch {
                order,
                left,
                w1: take(&format!("w1_{order}"))?,
                b1: take(&format!("b1_{order}"))?,
                w2: take(&format!("w2_{order}"))?,
                b2: take(&format!("b2_{order}"))?,
            });
        }
        let encoder = Self {
            tokenizer,
            table,
            scale,
            low,
            projection: Tensor::cat(&projections, 1)?,
            projection_bias: Tensor::cat(&biases, 0)?,
            branch_norm: (
                vector(Tensor::cat(&gammas, 0)?)?,
                vector(Tensor::cat(&betas, 0)?)?,
            ),
            branches,
            norm: (vector(take("ln_g")?)?, vector(take("ln_b")?)?),
            pool: take("cnn_W")?,
            pool_bias: take("cnn_b")?,
            d0: take("d0")?,
            p1: take("p1")?,
            d1: take("d1")?,
            d2: take("d2")?,
            p3: take("p3")?,
            d3: take("d3")?,
            eps,
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

    /// The embeddings of `texts` (unit length, [`DIM`] long), in order, computed in one run.
    pub fn embed(&self, texts: &[String]) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let pieces = texts
            .iter()
            .map(|text| self.pieces(text))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut tokens = 0;
        let mut spans = Vec::with_capacity(pieces.len());
        for ids in &pieces {
            spans.push((tokens, ids.len()));
            tokens += ids.len();
        }
        let rows = self.table.len() / DIM;
        let mut words = Vec::with_capacity(tokens * DIM);
        for &id in pieces.iter().flatten() {
            let id = id as usize;
            if id >= rows {
                bail!("piece {id} is outside the word table");
            }
            let (scale, low) = (self.scale[id % CHUNKS], self.low[id % CHUNKS]);
            let row = &self.table[id * DIM..(id + 1) * DIM];
            words.extend(row.iter().map(|&v| f32::from(v) * scale + low));
        }
        let device = Device::Cpu;
        let words = Tensor::from_vec(words, (tokens, DIM), &device)?;
        let projected = words
            .matmul(&self.projection)?
            .broadcast_add(&self.projection_bias)?;
        let projected = layer_norm(projected, &self.branch_norm, self.eps)?;
        let mut features = vec![words];
        for (i, branch) in self.branches.iter().enumerate() {
            let input = projected.narrow(1, i * BRANCH, BRANCH)?.contiguous()?;
            let hidden = convolve(&input, branch, &spans, &branch.w1, &branch.b1)?;
            let hidden = (hidden.relu()? + &input)?;
            let out = convolve(&hidden, branch, &spans, &branch.w2, &branch.b2)?;
            features.push((out.relu()? + &hidden)?);
        }
        let features = layer_norm(Tensor::cat(&features, 1)?, &self.norm, self.eps)?;
        let sums = spans
            .iter()
            .map(|&(start, len)| features.narrow(0, start, len)?.sum_keepdim(0))
            .collect::<candle_core::Result<Vec<_>>>()?;
        let lengths: Vec<f32> = spans.iter().map(|&(_, len)| len as f32).collect();
        let count = lengths.len();
        let lengths = Tensor::from_vec(lengths, (count, 1), &device)?;
        let pooled = Tensor::cat(&sums, 0)?
            .matmul(&self.pool)?
            .add(&lengths.broadcast_mul(&self.pool_bias.unsqueeze(0)?)?)?
            .broadcast_div(&lengths.sqrt()?)?;
        let y0 = pooled.matmul(&self.d0)?.relu()?;
        let y1 = (pooled.matmul(&self.p1)? + y0.matmul(&self.d1)?)?.relu()?;
        let y2 = y1.matmul(&self.d2)?.relu()?;
        let z = (y1.matmul(&self.p3)? + y2.matmul(&self.d3)?)?.tanh()?;
        let eps = self.eps;
        Ok(z.to_vec2::<f32>()?
            .into_iter()
            .map(|mut v| {
                let norm = v.iter().map(|x| x * x).sum::<f32>().max(eps).sqrt();
                v.iter_mut().for_each(|x| *x /= norm);
                v
            })
            .collect())
    }
}

/// One convolution layer of `branch` over `x` (tokens x 256): each token's window of
/// `branch.order` rows (starting `branch.left` before it; rows outside its own text are zero)
/// side by side, times `weight`, plus `bias`.
fn convolve(
    x: &Tensor,
    branch: &Branch,
    spans: &[(usize, usize)],
    weight: &Tensor,
    bias: &Tensor,
) -> candle_core::Result<Tensor> {
    let tokens = x.dim(0)?;
    // Row `tokens` of the padded input is zero: window slots outside the text point at it.
    let padded = Tensor::cat(
        &[x, &Tensor::zeros((1, BRANCH), DType::F32, x.device())?],
        0,
    )?;
    let mut index = Vec::with_capacity(tokens * branch.order);
    for &(start, len) in spans {
        for t in start..start + len {
            for k in 0..branch.order {
                let at = (t + k).checked_sub(branch.left);
                index.push(match at {
                    Some(at) if at >= start && at < start + len => at as u32,
                    _ => tokens as u32,
                });
            }
        }
    }
    let index = Tensor::from_vec(index, tokens * branch.order, x.device())?;
    padded
        .index_select(&index, 0)?
        .reshape((tokens, branch.order * BRANCH))?
        .matmul(weight)?
        .broadcast_add(bias)
}

/// Each row of `x` less its mean, divided by its standard deviation (`eps` added to the
/// variance), times `gamma` plus `beta`.
fn layer_norm(x: Tensor, (gamma, beta): &(Vec<f32>, Vec<f32>), eps: f32) -> anyhow::Result<Tensor> {
    let (rows, width) = x.dims2()?;
    if gamma.len() != width || beta.len() != width {
        bail!("a layer norm of {} for rows of {width}", gamma.len());
    }
    let mut data = x.flatten_all()?.to_vec1::<f32>()?;
    for row in data.chunks_mut(width) {
        let mean = row.iter().sum::<f32>() / width as f32;
        row.iter_mut().for_each(|v| *v -= mean);
        let variance = row.iter().map(|v| v * v).sum::<f32>() / width as f32;
        let inverse = 1.0 / (variance + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *v = *v * inverse * g + b;
        }
    }
    Ok(Tensor::from_vec(data, (rows, width), &Device::Cpu)?)
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
    }
}
