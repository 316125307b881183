//! Whisper's audio encoder, the layout and weights of candle-transformers' (and OpenAI's), with
//! the self-attention computed a head and a block of query rows at a time: a block's scores are
//! `ROWS` x 1500 (a few MB, reused by the allocator and kept in cache) where candle's encoder
//! materialises 6 x 1500 x 1500 scores (54 MB) and their softmax per layer. The query, key
//! and value projections are one matrix product, and the attention scale is folded into the
//! query weights at load.

use candle_core::{Device, Module, Result, Tensor, D};
use candle_nn::{conv1d, layer_norm, Conv1d, Conv1dConfig, LayerNorm, VarBuilder};
use candle_transformers::models::whisper::Config;

use super::{linear::Linear, ops};
use crate::models::Products;

const LAYER_NORM_EPS: f64 = 1e-5;

/// Query rows attended at once: 1500 frames in blocks of 250 keep a block's scores at 1.5 MB.
const ROWS: usize = 250;

#[derive(Debug, Clone)]
struct Layer {
    /// Query (pre-scaled), key and value projections stacked: `state` -> 3 x `state`.
    qkv: Linear,
    out: Linear,
    attn_norm: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    mlp_norm: LayerNorm,
}

/// The encoder's weights, shared by every transcription.
#[derive(Debug, Clone)]
pub struct Encoder {
    conv1: Conv1d,
    conv2: Conv1d,
    positions: Tensor,
    layers: Vec<Layer>,
    norm: LayerNorm,
    heads: usize,
}

impl Encoder {
    /// Loads `model.encoder.*` from `vb`, its linear layers multiplying as `products` says.
    pub fn load(vb: VarBuilder<'_>, config: &Config, products: Products) -> Result<Self> {
        let vb = vb.pp("model.encoder");
        let state = config.d_model;
        let heads = config.encoder_attention_heads;
        let conv = |stride| Conv1dConfig {
            padding: 1,
            stride,
            ..Default::default()
        };
        // OpenAI scales queries and keys by head_dim^-1/4 each; the product's scale goes on
        // the queries alone (1/8 for 64-wide heads: a power of two, so exact).
        let scale = 1.0 / ((state / heads) as f64).sqrt();
        let layers = (0..config.encoder_layers)
            .map(|i| {
                let vb = vb.pp(format!("layers.{i}"));
                let attn = vb.pp("self_attn");
                let weight = |name: &str| attn.pp(name).get((state, state), "weight");
                let bias = |name: &str| attn.pp(name).get(state, "bias");
                let qkv_weight = Tensor::cat(
                    &[
                        (weight("q_proj")? * scale)?,
                        weight("k_proj")?,
                        weight("v_proj")?,
                    ],
                    0,
                )?;
                let qkv_bias = Tensor::cat(
                    &[
                        (bias("q_proj")? * scale)?,
                        Tensor::zeros(state, qkv_weight.dtype(), qkv_weight.device())?,
                        bias("v_proj")?,
                    ],
                    0,
                )?;
                Ok(Layer {
                    qkv: products.layer(qkv_weight, Some(qkv_bias))?,
                    out: products.load(state, state, true, attn.pp("out_proj"))?,
                    attn_norm: layer_norm(state, LAYER_NORM_EPS, vb.pp("self_attn_layer_norm"))?,
                    fc1: products.load(state, 4 * state, true, vb.pp("fc1"))?,
                    fc2: products.load(4 * state, state, true, vb.pp("fc2"))?,
                    mlp_norm: layer_norm(state, LAYER_NORM_EPS, vb.pp("final_layer_norm"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            conv1: conv1d(config.num_mel_bins, state, 3, conv(1), vb.pp("conv1"))?,
            conv2: conv1d(state, state, 3, conv(2), vb.pp("conv2"))?,
            positions: sinusoids(config.max_source_positions, state)?,
            layers,
            norm: layer_norm(state, LAYER_NORM_EPS, vb.pp("layer_norm"))?,
            heads,
        })
    }

    /// Encodes the log-mel spectrogram `mel` (1, mels, frames) into (1, frames / 2, state).
    pub fn forward(&self, mel: &Tensor) -> Result<Tensor> {
        let x = ops::gelu(&self.conv1.forward(mel)?)?;
        let x = ops::gelu(&self.conv2.forward(&x)?)?;
        // (state, frames) to (frames, state): the positions' add makes it contiguous.
        let x = x.squeeze(0)?.t()?;
        let frames = x.dim(0)?;
        let mut x = x.broadcast_add(&self.positions.narrow(0, 0, frames)?)?;
        for layer in &self.layers {
            let attended = self.attend(layer, &layer.attn_norm.forward(&x)?)?;
            x = (x + layer.out.forward(&attended)?)?;
            let mlp = layer.fc2.forward(&ops::gelu(
                &layer.fc1.forward(&layer.mlp_norm.forward(&x)?)?,
            )?)?;
            x = (x + mlp)?;
        }
        self.norm.forward(&x)?.unsqueeze(0)
    }

    /// Self-attention of `x` (frames, state) before the output projection, a head and a
    /// block of query rows at a time.
    fn attend(&self, layer: &Layer, x: &Tensor) -> Result<Tensor> {
        let (frames, state) = x.dims2()?;
        let width = state / self.heads;
        let qkv = layer.qkv.forward(x)?;
        let heads = (0..self.heads)
            .map(|head| {
                let q = qkv.narrow(1, head * width, width)?;
                let k = qkv.narrow(1, state + head * width, width)?.t()?;
                let v = qkv.narrow(1, 2 * state + head * width, width)?;
                let blocks = (0..frames)
                    .step_by(ROWS)
                    .map(|row| {
                        let q = q.narrow(0, row, ROWS.min(frames - row))?;
                        ops::softmax_last_dim(&q.matmul(&k)?)?.matmul(&v)
                    })
                    .collect::<Result<Vec<_>>>()?;
                Tensor::cat(&blocks, 0)
            })
            .collect::<Result<Vec<_>>>()?;
        Tensor::cat(&heads, D::Minus1)
    }
}

/// Whisper's sinusoidal positions (length, channels), computed as candle-transformers does.
fn sinusoids(length: usize, channels: usize) -> Result<Tensor> {
    let device = Device::Cpu;
    let increment = 10000f32.ln() / (channels / 2 - 1) as f32;
    let inverse: Vec<f32> = (0..channels / 2)
        .map(|i| (i as f32 * (-increment)).exp())
        .collect();
    let inverse = Tensor::new(inverse.as_slice(), &device)?.unsqueeze(0)?;
    let times = Tensor::arange(0, length as u32, &device)?
        .to_dtype(candle_core::DType::F32)?
        .unsqueeze(1)?;
    let shape = (length, channels / 2);
    let scaled = (times.broadcast_as(shape)? * inverse.broadcast_as(shape)?)?;
    Tensor::cat(&[scaled.sin()?, scaled.cos()?], 1)
}
