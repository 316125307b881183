//! Sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX) run by tract, with its WordPiece tokenizer.
//! A batch of texts is tokenised, padded to its longest member, run once, mean-pooled over the
//! real tokens and normalised to unit length, so a dot product of two embeddings is their
//! cosine similarity. Besides the last layer (the sentence embedding) the third of the six
//! layers is pooled the same way: it keeps word-level cues that the last layer, trained for
//! paraphrase similarity, smooths away, and the head weighs both (docs/models-text.md).

use std::{path::Path, sync::Arc};

use anyhow::{anyhow, bail, Context};
use tokenizers::{Tokenizer, TruncationParams};
use tract_onnx::{
    prelude::*,
    tract_core::ops::{array::Gather, cast::Cast, change_axes::wire_with_rank_broadcast},
};

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
    plan: Arc<TypedRunnableModel>,
    /// The model's inputs, in its order.
    inputs: Vec<Input>,
}

/// An input of the model.
#[derive(Debug, Clone, Copy)]
enum Input {
    Ids,
    Mask,
    Types,
}

impl Embedder {
    /// Loads `model.onnx` and `tokenizer.json` from `dir`.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
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
        let model_path = dir.join("model.onnx");
        let plan = tract_onnx::onnx()
            .model_for_path(&model_path)
            .and_then(|model| model.with_outputs_by_name([SENTENCE_OUTPUT, MIDDLE_OUTPUT]))
            .and_then(|model| model.into_typed())
            .and_then(|model| model.into_decluttered())
            .and_then(|mut model| {
                gather_before_dequantising(&mut model)?;
                model.into_optimized()
            })
            .and_then(|model| model.into_runnable())
            .with_context(|| format!("{} could not be loaded", model_path.display()))?;
        let model = plan.model();
        let inputs = model
            .input_outlets()?
            .iter()
            .map(|outlet| match model.node(outlet.node).name.as_str() {
                "input_ids" => Ok(Input::Ids),
                "attention_mask" => Ok(Input::Mask),
                "token_type_ids" => Ok(Input::Types),
                other => Err(anyhow!(
                    "{}: unexpected input {other}",
                    model_path.display()
                )),
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let embedder = Self {
            tokenizer,
            plan,
            inputs,
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

    /// The embeddings of `texts`, in order.
    pub fn embed(&self, texts: &[String]) -> anyhow::Result<Vec<Embedding>> {
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
        let mut ids = vec![0i64; batch * width];
        let mut mask = vec![0i64; batch * width];
        for (row, encoding) in encodings.iter().enumerate() {
            for (col, (&id, &m)) in encoding
                .get_ids()
                .iter()
                .zip(encoding.get_attention_mask())
                .enumerate()
            {
                ids[row * width + col] = i64::from(id);
                mask[row * width + col] = i64::from(m);
            }
        }
        let types = vec![0i64; batch * width];
        let shape = [batch, width];
        let inputs = self
            .inputs
            .iter()
            .map(|input| {
                let data = match input {
                    Input::Ids => &ids,
                    Input::Mask => &mask,
                    Input::Types => &types,
                };
                Ok(Tensor::from_shape(&shape, data)?.into())
            })
            .collect::<TractResult<TVec<TValue>>>()?;
        let outputs = self.plan.run(inputs)?;
        let [sentence, middle] = [0, 1].map(|i| pooled(&outputs, i, &mask, batch, width));
        Ok(sentence?
            .into_iter()
            .zip(middle?)
            .map(|(sentence, middle)| Embedding { sentence, middle })
            .collect())
    }
}

/// Output `index` of a run over `batch` texts padded to `width` tokens, mean-pooled per text
/// over the tokens `mask` marks.
fn pooled(
    outputs: &TVec<TValue>,
    index: usize,
    mask: &[i64],
    batch: usize,
    width: usize,
) -> anyhow::Result<Vec<Vec<f32>>> {
    let hidden = outputs
        .get(index)
        .ok_or_else(|| anyhow!("the model gave no output {index}"))?
        .to_plain_array_view::<f32>()?;
    let shape = hidden.shape().to_vec();
    if shape.len() != 3 || shape[0] != batch || shape[1] != width {
        bail!("unexpected output shape {shape:?}");
    }
    let dim = shape[2];
    let flat: Vec<f32> = hidden.iter().copied().collect();
    Ok((0..batch)
        .map(|row| {
            let tokens = &mask[row * width..(row + 1) * width];
            mean_pool(
                &flat[row * width * dim..(row + 1) * width * dim],
                tokens,
                dim,
            )
        })
        .collect())
}

/// Picks the rows of a quantised embedding table before dequantising them.
///
/// The model stores its word embeddings (30522 x 384) as int8 times a scale, and tract
/// dequantises the whole table, 47 MB of f32, at every run before `Gather` picks the rows of
/// the text's tokens: that was most of a short text's time. Each `Gather(Mul(Cast(table),
/// scale), ids)` over a constant int8 table and a constant scale becomes
/// `Mul(Cast(Gather(table, ids)), Gather(scale, ids))` (a scale per row, as here) or
/// `Mul(Cast(Gather(table, ids)), scale)` (one scale): the same numbers, for the text's tokens
/// only.
fn gather_before_dequantising(model: &mut TypedModel) -> TractResult<()> {
    let gathers: Vec<(usize, usize)> = model
        .nodes()
        .iter()
        .filter_map(|node| node.op_as::<Gather>().map(|gather| (node.id, gather.axis)))
        .collect();
    for (id, axis) in gathers {
        let gather = model.node(id);
        let mul = model.node(gather.inputs[0].node);
        if mul.op.name() != "Mul" || mul.inputs.len() != 2 {
            continue;
        }
        let cast = model.node(mul.inputs[0].node);
        let table = model.outlet_fact(cast.inputs[0])?;
        let scale = model.outlet_fact(mul.inputs[1])?;
        // A scale per row of the table is gathered with it; a single scale applies as it is.
        let per_row = scale.rank() == table.rank() && scale.shape[axis] == table.shape[axis];
        let single = scale.shape.volume().is_one();
        let only_user = |outlet: OutletId| model.outlet_successors(outlet).len() == 1;
        if !cast.op_is::<Cast>()
            || table.konst.is_none()
            || scale.konst.is_none()
            || !(per_row || single)
            || !only_user(mul.inputs[0])
            || !only_user(gather.inputs[0])
        {
            continue;
        }
        let name = &gather.name;
        let mut patch = TypedModelPatch::new("gather before dequantising");
        let table = patch.tap_model(model, cast.inputs[0])?;
        let ids = patch.tap_model(model, gather.inputs[1])?;
        let mut scale = patch.tap_model(model, mul.inputs[1])?;
        if per_row {
            scale = patch.wire_node(format!("{name}.scales"), gather.op.clone(), &[scale, ids])?[0];
        }
        let rows = patch.wire_node(format!("{name}.rows"), gather.op.clone(), &[table, ids])?;
        let rows = patch.wire_node(format!("{name}.cast"), cast.op.clone(), &rows)?;
        let rows = wire_with_rank_broadcast(
            format!("{name}.dequantised"),
            &mut patch,
            mul.op.clone(),
            &[rows[0], scale],
        )?;
        patch.shunt_outside(model, OutletId::new(id, 0), rows[0])?;
        patch.apply(model)?;
    }
    Ok(())
}

/// The mean of the token vectors of `hidden` (`tokens.len()` rows of `dim`) whose mask is 1,
/// normalised to unit length.
fn mean_pool(hidden: &[f32], mask: &[i64], dim: usize) -> Vec<f32> {
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
    fn rows_are_gathered_before_they_are_dequantised() -> TractResult<()> {
        // Wired by hand: `wire_node` would fold the constant table's cast at once, as tract's
        // loader does not for the real model.
        let mut model = TypedModel::default();
        let ids = model.add_source("ids", i64::fact([3]))?;
        let table = model.add_const("table", tensor2(&[[1i8, -2], [3, 4], [5, 6], [-7, 8]]))?;
        let scales = model.add_const("scales", tensor2(&[[0.5f32], [1.0], [2.0], [4.0]]))?;
        let mut add = |name: &str, op: Box<dyn TypedOp>, inputs: &[OutletId], shape: &[usize]| {
            let node = model.add_node(name, op, tvec!(f32::fact(shape)))?;
            for (slot, input) in inputs.iter().enumerate() {
                model.add_edge(*input, InletId::new(node, slot))?;
            }
            TractResult::Ok(OutletId::new(node, 0))
        };
        let cast = add(
            "cast",
            Box::new(Cast {
                to: f32::datum_type(),
            }),
            &[table],
            &[4, 2],
        )?;
        let mul = add(
            "mul",
            Box::new(tract_onnx::tract_core::ops::math::mul()),
            &[cast, scales],
            &[4, 2],
        )?;
        let out = add("gather", Box::new(Gather::new(0)), &[mul, ids], &[3, 2])?;
        model.select_output_outlets(&[out])?;
        let run = |model: &TypedModel| -> TractResult<Tensor> {
            let plan = model.clone().into_runnable()?;
            let out = plan.run(tvec!(tensor1(&[3i64, 0, 2]).into()))?;
            Ok(out[0].clone().into_tensor())
        };
        let before = run(&model)?;
        gather_before_dequantising(&mut model)?;

        assert_eq!(run(&model)?, before);
        assert_eq!(
            before,
            tensor2(&[[-28.0f32, 32.0], [0.5, -1.0], [10.0, 12.0]])
        );
        // The whole table is no longer cast: only the gathered rows are.
        let casts: Vec<&str> = model
            .nodes()
            .iter()
            .filter(|node| node.op_is::<Cast>())
            .map(|node| node.name.as_str())
            .collect();
        assert_eq!(casts, ["gather.cast"]);
        Ok(())
    }

    #[test]
    fn normalise_leaves_a_zero_vector_zero() {
        assert_eq!(normalise(vec![0.0, 0.0]), vec![0.0, 0.0]);
        assert_eq!(normalise(vec![3.0, 4.0]), vec![0.6, 0.8]);
    }
}
