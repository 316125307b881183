//! Whisper's text decoder with a cache of the self-attention's keys and values, so each step
//! runs only the new token through the layers (candle-transformers' decoder recomputes the
//! whole sequence at every step). The cross-attention's keys and values are computed once a
//! window. The layout and weights are the Hugging Face ones candle's model reads.

use candle_core::{Device, Module, Result, Tensor, D};
use candle_nn::{layer_norm, LayerNorm, VarBuilder};
use candle_transformers::models::whisper::Config;

use super::{linear::Linear, tokens::TokenEmbedding};
use crate::models::Products;

const LAYER_NORM_EPS: f64 = 1e-5;

#[derive(Debug, Clone)]
struct Attention {
    query: Linear,
    key: Linear,
    value: Linear,
    out: Linear,
    heads: usize,
}

impl Attention {
    fn load(state: usize, heads: usize, vb: VarBuilder<'_>, products: Products) -> Result<Self> {
        Ok(Self {
            query: products.load(state, state, true, vb.pp("q_proj"))?,
            key: products.load(state, state, false, vb.pp("k_proj"))?,
            value: products.load(state, state, true, vb.pp("v_proj"))?,
            out: products.load(state, state, true, vb.pp("out_proj"))?,
            heads,
        })
    }

    /// `x` (1, n, state) to (1, heads, n, state / heads).
    fn split_heads(&self, x: &Tensor) -> Result<Tensor> {
        let (batch, n, state) = x.dims3()?;
        x.reshape((batch, n, self.heads, state / self.heads))?
            .transpose(1, 2)?
            .contiguous()
    }

    /// The keys and values of `x`, split into heads.
    fn keys_values(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        Ok((
            self.split_heads(&self.key.forward(x)?)?,
            self.split_heads(&self.value.forward(x)?)?,
        ))
    }

    /// Attends from `x` to `keys` and `values` (with `mask` added to the scores).
    fn attend(
        &self,
        x: &Tensor,
        keys: &Tensor,
        values: &Tensor,
        mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        let q = self.split_heads(&self.query.forward(x)?)?;
        let scale = 1.0 / ((q.dim(D::Minus1)? as f64).sqrt());
        let mut scores = (q.matmul(&keys.t()?)? * scale)?;
        if let Some(mask) = mask {
            scores = scores.broadcast_add(mask)?;
        }
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let attended = weights.matmul(values)?.transpose(1, 2)?.flatten_from(2)?;
        self.out.forward(&attended)
    }
}

#[derive(Debug, Clone)]
struct Layer {
    self_attn: Attention,
    self_norm: LayerNorm,
    cross_attn: Attention,
    cross_norm: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    mlp_norm: LayerNorm,
}

/// The decoder's weights, shared by every transcription.
#[derive(Debug, Clone)]
pub struct Decoder {
    /// The token embedding, which is also the output projection.
    embed: TokenEmbedding,
    positions: Tensor,
    layers: Vec<Layer>,
    norm: LayerNorm,
}

/// One window's state: the cross-attention's keys and values per layer, and the
/// self-attention's keys and values of the tokens so far.
pub struct Cache {
    cross: Vec<(Tensor, Tensor)>,
    past: Vec<Option<(Tensor, Tensor)>>,
    len: usize,
}

impl Decoder {
    /// Loads `model.decoder.*` from `vb`, its linear layers multiplying as `products` says.
    pub fn load(vb: VarBuilder<'_>, config: &Config, products: Products) -> Result<Self> {
        let vb = vb.pp("model.decoder");
        let state = config.d_model;
        let heads = config.decoder_attention_heads;
        let layers = (0..config.decoder_layers)
            .map(|i| {
                let vb = vb.pp(format!("layers.{i}"));
                Ok(Layer {
                    self_attn: Attention::load(state, heads, vb.pp("self_attn"), products)?,
                    self_norm: layer_norm(state, LAYER_NORM_EPS, vb.pp("self_attn_layer_norm"))?,
                    cross_attn: Attention::load(state, heads, vb.pp("encoder_attn"), products)?,
                    cross_norm: layer_norm(
                        state,
                        LAYER_NORM_EPS,
                        vb.pp("encoder_attn_layer_norm"),
                    )?,
                    fc1: products.load(state, 4 * state, true, vb.pp("fc1"))?,
                    fc2: products.load(4 * state, state, true, vb.pp("fc2"))?,
                    mlp_norm: layer_norm(state, LAYER_NORM_EPS, vb.pp("final_layer_norm"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embed: TokenEmbedding::load(config.vocab_size, state, vb.pp("embed_tokens"), products)?,
            positions: vb.get(
                (config.max_target_positions, state),
                "embed_positions.weight",
            )?,
            layers,
            norm: layer_norm(state, LAYER_NORM_EPS, vb.pp("layer_norm"))?,
        })
    }

    /// The most tokens a window can hold.
    pub fn max_len(&self) -> usize {
        self.positions.dim(0).unwrap_or(0)
    }

    /// A fresh cache for the encoder's output `audio` (1, frames, state).
    pub fn cache(&self, audio: &Tensor) -> Result<Cache> {
        Ok(Cache {
            cross: self
                .layers
                .iter()
                .map(|layer| layer.cross_attn.keys_values(audio))
                .collect::<Result<_>>()?,
            past: vec![None; self.layers.len()],
            len: 0,
        })
    }

    /// Runs `tokens` (at least one, following those already in `cache`) through the decoder
    /// and returns the logits of the last one (all that greedy decoding reads).
    pub fn forward(&self, tokens: &[u32], cache: &mut Cache) -> Result<Vec<f32>> {
        let n = tokens.len();
        if n == 0 {
            candle_core::bail!("the decoder takes at least one token");
        }
        let mut x = self
            .embed
            .lookup(tokens)?
            .broadcast_add(&self.positions.narrow(0, cache.len, n)?)?;
        let mask = (n > 1).then(|| causal_mask(n, cache.len)).transpose()?;
        for ((layer, past), cross) in self.layers.iter().zip(&mut cache.past).zip(&cache.cross) {
            let normed = layer.self_norm.forward(&x)?;
            let (mut keys, mut values) = layer.self_attn.keys_values(&normed)?;
            if let Some((past_keys, past_values)) = past.as_ref() {
                keys = Tensor::cat(&[past_keys, &keys], 2)?;
                values = Tensor::cat(&[past_values, &values], 2)?;
            }
            x = (&x
                + layer
                    .self_attn
                    .attend(&normed, &keys, &values, mask.as_ref())?)?;
            *past = Some((keys, values));
            let normed = layer.cross_norm.forward(&x)?;
            x = (&x + layer.cross_attn.attend(&normed, &cross.0, &cross.1, None)?)?;
            let mlp = layer
                .fc2
                .forward(&layer.fc1.forward(&layer.mlp_norm.forward(&x)?)?.gelu()?)?;
            x = (&x + mlp)?;
        }
        cache.len += n;
        let hidden = self.norm.forward(&x.narrow(1, n - 1, 1)?)?;
        self.embed.logits(&hidden.flatten_all()?.to_vec1::<f32>()?)
    }
}

/// Scores to add so each of `n` new tokens (after `past` cached ones) sees only itself and
/// what came before it.
fn causal_mask(n: usize, past: usize) -> Result<Tensor> {
    let mask: Vec<f32> = (0..n)
        .flat_map(|i| {
            (0..past + n).map(move |j| if j > past + i { f32::NEG_INFINITY } else { 0.0 })
        })
        .collect();
    Tensor::from_vec(mask, (n, past + n), &Device::Cpu)
}
