//! Sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX) run by rten, with its WordPiece tokenizer.
//! A batch of texts is tokenised, padded to its longest member, run once, mean-pooled over the
//! real tokens and normalised to unit length, so a dot product of two embeddings is their
//! cosine similarity. Besides the last layer (the sentence embedding) the third of the six
//! layers is pooled the same way: it keeps word-level cues that the last layer, trained for
//! paraphrase similarity, smooths away, and the head weighs both (docs/models-text.md).
//!
//! MiniLM comes as two files of the same weights ([`Products`]): `model.onnx` multiplies in
//! f32, `model-int8.onnx` quantises each product's input at run time and multiplies in int8,
//! about twice as fast where the CPU has int8 dot-product instructions. Where it has not,
//! rten's int8 kernel may saturate, and the f32 file runs. The int8 file quantises a whole
//! input tensor with one scale, so it embeds each text in a run of its own: a text's
//! embedding then never depends on the texts batched with it.

use std::path::Path;

use anyhow::{anyhow, bail};
use rten::{NodeId, ValueOrView};
use rten_tensor::{prelude::*, NdTensor};
use tokenizers::{Tokenizer, TruncationParams};

use crate::models::{onnx::OnnxModel, Products};

/// Which of MiniLM's two files a worker runs: `model.onnx` (f32: the int8 weights widened to
/// f32 at load, every product in f32) or `model-int8.onnx` (int8, scripts/models.d/text.py:
/// each product's input quantised to uint8 at run time, one scale a tensor, multiplied by the
/// int8 weights into int32).
impl Products {
    /// What a worker runs from the text model's directory `dir`: [`Self::for_this_cpu`], or
    /// f32 when `model-int8.onnx` is not there (a directory prepared before it existed).
    pub fn in_dir(dir: &Path) -> Self {
        match Self::for_this_cpu() {
            Self::Int8 if dir.join(Self::Int8.file()).is_file() => Self::Int8,
            _ => Self::F32,
        }
    }

    /// The model file, in the text model's directory.
    pub fn file(self) -> &'static str {
        match self {
            Self::F32 => "model.onnx",
            Self::Int8 => "model-int8.onnx",
        }
    }
}

/// The length of an embedding.
pub const DIM: usize = 384;

/// The model's output read as the sentence embedding: the last layer.
const SENTENCE_OUTPUT: &str = "last_hidden_state";

/// The output read as the middle embedding: the third layer's (the export's seventh layer
/// normalisation, counting from 0: the embeddings', then two a layer).
const MIDDLE_OUTPUT: &str = "layer_norm_6";

/// Tokens per text at most (the model was trained on 128); longer texts are cut, which is why
/// the caller splits long texts into segments first.
const MAX_TOKENS: usize = 128;

/// A text's token states mean-pooled at two depths, each of unit length and [`DIM`] long.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Embedding {
    /// The last layer: the sentence embedding, compared with prototypes and custom categories.
    pub sentence: Vec<f32>,
    /// The third layer: read by the head only.
    pub middle: Vec<f32>,
}

/// The embedding model, loaded once; `embed` may be called from several threads at once.
pub struct Embedder {
    tokenizer: Tokenizer,
    model: OnnxModel,
    /// The model's inputs, in its order.
    inputs: Vec<(NodeId, Input)>,
    /// The sentence and middle outputs.
    outputs: [NodeId; 2],
    /// Which file runs.
    products: Products,
}

/// An input of the model.
#[derive(Debug, Clone, Copy)]
enum Input {
    Ids,
    Mask,
    Types,
}

impl Embedder {
    /// Loads MiniLM ([`Products::in_dir`]) and `tokenizer.json` from `dir`.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        Self::load_products(dir, Products::in_dir(dir))
    }

    /// Loads `products`' file of MiniLM and `tokenizer.json` from `dir`.
    pub fn load_products(dir: &Path, products: Products) -> anyhow::Result<Self> {
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| anyhow!("{}: {e}", tokenizer_path.display()))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| anyhow!("{}: {e}", tokenizer_path.display()))?;
        let model_path = dir.join(products.file());
        // Prepacked int8 weights: otherwise each product packs its weight anew at every run,
        // most of a short text's time (70 % of a run of one text of 24 tokens in `perf`).
        let model = OnnxModel::load(&model_path, products == Products::Int8)?;
        let inputs = model
            .inputs()
            .into_iter()
            .map(|(id, name)| {
                let input = match name.as_str() {
                    "input_ids" => Input::Ids,
                    "attention_mask" => Input::Mask,
                    "token_type_ids" => Input::Types,
                    other => bail!("{}: unexpected input {other}", model_path.display()),
                };
                Ok((id, input))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let outputs = [model.node(SENTENCE_OUTPUT)?, model.node(MIDDLE_OUTPUT)?];
        let embedder = Self {
            tokenizer,
            model,
            inputs,
            outputs,
            products,
        };
        let probe = embedder.embed(&["a sentence".to_owned()])?;
        let lengths = probe.first().map(|e| (e.sentence.len(), e.middle.len()));
        if lengths != Some((DIM, DIM)) {
            bail!(
                "{} does not give {DIM}-long embeddings",
                model_path.display()
            );
        }
        Ok(embedder)
    }

    /// The embeddings of `texts`, in order: in one run (f32), or in a run each (int8).
    pub fn embed(&self, texts: &[String]) -> anyhow::Result<Vec<Embedding>> {
        match self.products {
            Products::F32 => self.run(texts),
            Products::Int8 => texts.chunks(1).try_fold(Vec::new(), |mut all, text| {
                all.extend(self.run(text)?);
                Ok(all)
            }),
        }
    }

    /// The embeddings of `texts`, in order, in one run.
    fn run(&self, texts: &[String]) -> anyhow::Result<Vec<Embedding>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = texts
            .iter()
            .map(|text| self.tokenizer.encode(text.as_str(), true))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow!("tokenising failed: {e}"))?;
        let batch = encodings.len();
        let width = encodings
            .iter()
            .map(|e| e.get_ids().len())
            .max()
            .unwrap_or(0)
            .max(1);
        let mut ids = NdTensor::<i32, 2>::zeros([batch, width]);
        let mut mask = NdTensor::<i32, 2>::zeros([batch, width]);
        for (row, encoding) in encodings.iter().enumerate() {
            for (col, (&id, &m)) in encoding
                .get_ids()
                .iter()
                .zip(encoding.get_attention_mask())
                .enumerate()
            {
                // Token ids are below the vocabulary's 30522, the mask 0 or 1.
                ids[[row, col]] = i32::try_from(id)?;
                mask[[row, col]] = i32::try_from(m)?;
            }
        }
        let types = NdTensor::<i32, 2>::zeros([batch, width]);
        let inputs = self
            .inputs
            .iter()
            .map(|&(id, input)| {
                let data = match input {
                    Input::Ids => &ids,
                    Input::Mask => &mask,
                    Input::Types => &types,
                };
                (id, ValueOrView::from(data.view()))
            })
            .collect();
        let outputs = self.model.run(inputs, &self.outputs)?;
        let [sentence, middle] = <[rten::Value; 2]>::try_from(outputs)
            .map_err(|outputs| anyhow!("the model gave {} outputs, not 2", outputs.len()))?
            .map(|output| pooled(output, &mask));
        Ok(sentence?
            .into_iter()
            .zip(middle?)
            .map(|(sentence, middle)| Embedding { sentence, middle })
            .collect())
    }
}

/// An `output` of a run over texts padded to the width of `mask`, mean-pooled per text over
/// the tokens `mask` marks.
fn pooled(output: rten::Value, mask: &NdTensor<i32, 2>) -> anyhow::Result<Vec<Vec<f32>>> {
    let hidden: NdTensor<f32, 3> = output
        .try_into()
        .map_err(|e| anyhow!("unexpected output: {e}"))?;
    let [batch, width, dim] = hidden.shape();
    if [batch, width] != mask.shape() || width == 0 || dim == 0 {
        bail!("unexpected output shape {:?}", hidden.shape());
    }
    let hidden = hidden.to_contiguous();
    let mask = mask
        .data()
        .ok_or_else(|| anyhow!("the attention mask is not contiguous"))?;
    Ok(hidden
        .data()
        .chunks(width * dim)
        .zip(mask.chunks(width))
        .map(|(tokens, mask)| mean_pool(tokens, mask, dim))
        .collect())
}

/// The mean of the token vectors of `hidden` (`tokens.len()` rows of `dim`) whose mask is 1,
/// normalised to unit length.
fn mean_pool(hidden: &[f32], mask: &[i32], dim: usize) -> Vec<f32> {
    let mut sum = vec![0f32; dim];
    for (row, _) in hidden.chunks(dim).zip(mask).filter(|(_, &m)| m != 0) {
        for (s, v) in sum.iter_mut().zip(row) {
            *s += v;
        }
    }
    normalise(sum)
}

/// `v` scaled to unit length (a zero vector stays zero).
pub fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_pool_averages_only_masked_tokens_and_normalises() {
        let hidden = [1.0, 0.0, 3.0, 4.0, 100.0, 100.0];
        let pooled = mean_pool(&hidden, &[1, 1, 0], 2);
        // (1+3)/2, (0+4)/2 = (2, 2) -> unit length.
        let expected = std::f32::consts::FRAC_1_SQRT_2;
        assert!((pooled[0] - expected).abs() < 1e-6 && (pooled[1] - expected).abs() < 1e-6);
    }

    #[test]
    fn a_directory_without_the_int8_file_runs_the_f32_one() {
        let dir = std::env::temp_dir().join(format!("minilm-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(Products::F32.file()), b"").unwrap();
        assert_eq!(Products::in_dir(&dir), Products::F32);

        std::fs::write(dir.join(Products::Int8.file()), b"").unwrap();
        assert_eq!(Products::in_dir(&dir), Products::for_this_cpu());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    #[ignore = "needs the prepared models: TEST_MODEL_DIR"]
    fn int8_products_embed_as_the_f32_ones_do() {
        let dir = std::path::PathBuf::from(std::env::var_os("TEST_MODEL_DIR").unwrap());
        let dir = dir.join("text");
        let texts: Vec<String> = [
            "have a lovely day",
            "I will find where you live and hurt your family",
            "the meeting moved to thursday afternoon, bring the slides",
            "go kill yourself, nobody would miss you",
            "kill the lights when you leave please",
            "Honestly you're the dumbest person I've ever had the misfortune of working with.",
        ]
        .map(str::to_owned)
        .to_vec();
        let f32 = Embedder::load_products(&dir, Products::F32).unwrap();
        let int8 = Embedder::load_products(&dir, Products::Int8).unwrap();

        let (a, b) = (f32.embed(&texts).unwrap(), int8.embed(&texts).unwrap());

        let cosine = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(x, y)| x * y).sum::<f32>();
        for (text, (a, b)) in texts.iter().zip(a.iter().zip(&b)) {
            let (sentence, middle) = (
                cosine(&a.sentence, &b.sentence),
                cosine(&a.middle, &b.middle),
            );
            // Measured: 0.98 and more for the sentence; the middle layer, quantised twice
            // fewer times, closer still.
            assert!(
                sentence > 0.97 && middle > 0.97,
                "{text}: {sentence} {middle}"
            );
            assert!(
                sentence < 0.99999,
                "{text}: the int8 file gave the f32 embedding"
            );
        }
    }

    #[test]
    #[ignore = "needs the prepared models: TEST_MODEL_DIR"]
    fn an_int8_embedding_does_not_depend_on_the_texts_beside_it() {
        let dir = std::path::PathBuf::from(std::env::var_os("TEST_MODEL_DIR").unwrap());
        let int8 = Embedder::load_products(&dir.join("text"), Products::Int8).unwrap();
        let text = "see you at the wedding!! what are you wearing?".to_owned();
        // A long text of rare words and symbols beside it: in one run, its large values would
        // set the quantisation scale of every text of the run.
        let loud = "ZZZZ!!!! §§§§ ÆØÅ ∑∆∂ ".repeat(20);

        let batch = [loud, text.clone(), "ok".to_owned()];

        let alone = int8.embed(std::slice::from_ref(&text)).unwrap();
        let beside = int8.embed(&batch).unwrap();

        assert_eq!(alone[0], beside[1]);
        // In one run the others would have moved it.
        assert_ne!(int8.run(&batch).unwrap()[1], alone[0]);
    }

    #[test]
    fn normalise_leaves_a_zero_vector_zero() {
        assert_eq!(normalise(vec![0.0, 0.0]), vec![0.0, 0.0]);
        assert_eq!(normalise(vec![3.0, 4.0]), vec![0.6, 0.8]);
    }
}
