//! Trains the text model's head and writes its weights (`worker/src/models/text/head.json`,
//! compiled into the worker).
//!
//!     cargo run --release -p moderation-worker --example train_text_head -- MODEL_DIR [--out FILE]
//!
//! Training data, read from the repository: the prototypes (each category's sentences are
//! positives for it, the benign ones negatives for all), the tuned corpus `eval/text/*.tsv` and
//! the training corpus `eval/text/train/*.tsv`. Never `eval/text/heldout/`: that corpus only
//! measures. Every text is cut into segments and embedded by the worker's own code, one at a
//! time as the evaluation does. A segment's features are its sentence embedding, `2 p - 1` for
//! its profanity score `p`, its five prototype margins (for a prototype, computed without
//! itself) and its middle-layer embedding. Per category an L2-regularised logistic regression
//! is fitted by Newton's method (positives weighted `POSITIVE_WEIGHT`, other categories'
//! harmful texts `OTHER_HARM_WEIGHT`): deterministic, no randomness anywhere. A text's score is
//! its segments' highest.
//!
//! The threshold is chosen by `FOLDS`-fold cross-validation on the tuned and training corpora:
//! the highest recall whose false positives stay within the targets (3 % ordinary, 10 %
//! innocent-alarming), the highest such threshold on ties. It is folded into the biases, so the
//! worker's default threshold 0.5 flags what the chosen one did.

#[path = "common/corpus.rs"]
mod corpus;
#[path = "common/fit.rs"]
mod fit;
#[path = "common/training.rs"]
mod training;

use std::path::Path;

use anyhow::Context;
use fit::{
    choose_threshold, describe, rounded, Fitting, Row, CATEGORIES, EMBEDDING_SCALE, FOLDS,
    MARGIN_SCALE,
};
use moderation_worker::{
    classify::TextContent,
    models::text::{
        embed::{Embedder, Embedding, DIM},
        head::{CategoryWeights, Head, HeadFile},
        profanity::Profanity,
        prototypes,
        score::top_mean,
        segment,
    },
};
use training::{arguments, examples, Example};

/// Where a segment's middle-layer embedding starts among its features.
const MIDDLE: usize = DIM + 1 + CATEGORIES;
/// Features of a segment: the sentence embedding, the profanity term, the margins, the middle
/// embedding.
const FEATURES: usize = MIDDLE + DIM;
/// The false-positive targets the threshold must meet: ordinary, innocent-alarming.
const TARGETS: (f64, f64) = (0.03, 0.10);

fn main() -> anyhow::Result<()> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (models, out) = arguments("train_text_head", "worker/src/models/text/head.json")?;
    let dir = Path::new(&models).join("text");
    let embedder = Embedder::load(&dir)?;
    let profanity = Profanity::load(&dir)?;
    let examples = examples(&repo.join("eval/text"), false)?;
    let rows = rows(&examples, &embedder, &profanity)?;
    println!("{} examples, {} segments", examples.len(), rows.len());

    let labels: Vec<&str> = examples.iter().map(|e| e.label.as_str()).collect();
    let fitting = Fitting::standard(FEATURES);
    let oof = fitting.cross_validate(&rows, &labels, FOLDS);
    let corpora: Vec<usize> = (0..examples.len())
        .filter(|&i| examples[i].source != "prototypes")
        .collect();
    let threshold = choose_threshold(&oof, &labels, &corpora, TARGETS);
    println!("cross-validation (tuned and training corpora), threshold {threshold:.2}:");
    for source in ["tuned", "train"] {
        let chosen: Vec<usize> = (0..examples.len())
            .filter(|&i| examples[i].source == source)
            .collect();
        println!(
            "  {source}: {}",
            describe(&oof, &labels, &chosen, threshold)
        );
    }
    println!("  both: {}", describe(&oof, &labels, &corpora, threshold));

    let all: Vec<&Row> = rows.iter().collect();
    let models = fitting.fit(&all, &labels);
    let shift = (threshold / (1.0 - threshold)).ln();
    let categories = prototypes::CATEGORIES
        .iter()
        .zip(&models)
        .map(|((name, _), model)| CategoryWeights {
            name: (*name).to_owned(),
            bias: rounded(model[FEATURES] - shift),
            profanity: rounded(model[DIM]),
            margins: model[DIM + 1..MIDDLE]
                .iter()
                .map(|w| rounded(w * MARGIN_SCALE))
                .collect(),
            embedding: model[..DIM]
                .iter()
                .map(|w| rounded(w * EMBEDDING_SCALE))
                .collect(),
            middle: model[MIDDLE..FEATURES]
                .iter()
                .map(|w| rounded(w * EMBEDDING_SCALE))
                .collect(),
        })
        .collect();
    let file = HeadFile {
        about: format!(
            "worker/examples/train_text_head.rs on the prototypes, eval/text/*.tsv and \
             eval/text/train/*.tsv ({} examples); lambda 0.1, {FOLDS}-fold threshold \
             {threshold:.2} folded into the biases",
            examples.len()
        ),
        chosen_threshold: threshold as f32,
        categories,
    };
    Head::from_file(file.clone())?;
    std::fs::write(&out, serde_json::to_string_pretty(&file)? + "\n")
        .with_context(|| format!("{}", out.display()))?;
    println!("wrote {}", out.display());
    Ok(())
}

/// Every segment of every example with its features. A prototype's margins leave the
/// prototype itself out, as they would for a text that is not one.
fn rows(
    examples: &[Example],
    embedder: &Embedder,
    profanity: &Profanity,
) -> anyhow::Result<Vec<Row>> {
    let mut embedded: Vec<Vec<(String, Embedding)>> = Vec::with_capacity(examples.len());
    for example in examples {
        let segments = segment::segments(TextContent {
            text: &example.text,
            messages: None,
        });
        let mut pieces = Vec::with_capacity(segments.len());
        for segment in segments {
            let embedding = embedder
                .embed(std::slice::from_ref(&segment))?
                .pop()
                .context("no embedding")?;
            pieces.push((segment, embedding));
        }
        embedded.push(pieces);
    }
    // The prototypes are the first examples, one segment each: (example, label, embedding).
    let prototypes: Vec<(usize, &str, &Embedding)> = examples
        .iter()
        .enumerate()
        .take_while(|(_, e)| e.source == "prototypes")
        .flat_map(|(i, e)| {
            embedded[i]
                .iter()
                .map(move |(_, v)| (i, e.label.as_str(), v))
        })
        .collect();
    let mut rows = Vec::new();
    for (i, pieces) in embedded.iter().enumerate() {
        for (segment, embedding) in pieces {
            let near = |label: &str| {
                let chosen: Vec<Vec<f32>> = prototypes
                    .iter()
                    .filter(|(j, l, _)| *j != i && *l == label)
                    .map(|(_, _, v)| v.sentence.clone())
                    .collect();
                top_mean(&chosen, &embedding.sentence)
            };
            let benign = near("benign");
            let scaled = |v: &Vec<f32>| -> Vec<f64> {
                v.iter().map(|x| f64::from(*x) * EMBEDDING_SCALE).collect()
            };
            let mut features = scaled(&embedding.sentence);
            features.push(f64::from(2.0 * profanity.score(segment) - 1.0));
            for (name, _) in prototypes::CATEGORIES {
                features.push(f64::from(near(name) - benign) * MARGIN_SCALE);
            }
            features.extend(scaled(&embedding.middle));
            rows.push(Row {
                example: i,
                features,
            });
        }
    }
    debug_assert!(rows.iter().all(|r| r.features.len() == FEATURES));
    Ok(rows)
}
