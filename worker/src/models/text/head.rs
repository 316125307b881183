//! The trained head: per category a logistic regression over a segment's embedding (the
//! sentence vector and the middle layer's, [`super::embed::Embedding`]), its profanity score
//! and its prototype margins (similarity to each category's prototypes less similarity to the
//! benign ones, [`super::score`]). The weights (`head.json`) are written by
//! `worker/examples/train_text_head.rs` from the prototypes, `eval/text/*.tsv` and
//! `eval/text/train/*.tsv`, never from `eval/text/heldout/`, and are compiled into the worker:
//! they belong to the exact MiniLM export that `scripts/models` pins by hash, so they change
//! with the code, not with the model directory.

use serde::{Deserialize, Serialize};

use super::{embed::DIM, prototypes};

/// The weights compiled into the worker.
pub const WEIGHTS: &str = include_str!("head.json");

/// The multilingual head's weights (over the multilingual encoder's embedding and margins,
/// no middle layer, no profanity term), written by
/// `worker/examples/train_multilingual_head.rs`.
pub const MULTILINGUAL_WEIGHTS: &str = include_str!("multilingual_head.json");

/// The head's weights, as the trainer writes them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeadFile {
    /// How the weights were made (free text, for people).
    pub about: String,
    /// The threshold cross-validation chose, already folded into the biases: at the worker's
    /// default threshold (0.5) the head flags what it flagged at this one.
    pub chosen_threshold: f32,
    /// One model per category, in the order of [`prototypes::CATEGORIES`].
    pub categories: Vec<CategoryWeights>,
}

/// One category's logistic regression.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CategoryWeights {
    /// The category's name.
    pub name: String,
    /// The intercept.
    pub bias: f32,
    /// The weight of `2 p - 1`, with `p` the profanity score.
    pub profanity: f32,
    /// The weights of the five categories' margins, in category order.
    pub margins: Vec<f32>,
    /// The weights of the sentence embedding's [`DIM`] components.
    pub embedding: Vec<f32>,
    /// The weights of the middle layer's pooled [`DIM`] components.
    pub middle: Vec<f32>,
}

/// The loaded head.
#[derive(Debug, Clone)]
pub struct Head {
    categories: Vec<(&'static str, CategoryWeights)>,
}

/// The weights do not fit the worker.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    /// Not the trainer's JSON.
    #[error("the text head's weights are not valid: {0}")]
    Json(#[from] serde_json::Error),
    /// Another set of categories, or vectors of other lengths.
    #[error("the text head's weights do not fit: {0}")]
    Shape(String),
}

impl Head {
    /// The English head compiled into the worker (over MiniLM's two embeddings).
    pub fn compiled() -> Result<Self, HeadError> {
        Self::parse(WEIGHTS)
    }

    /// The multilingual head compiled into the worker (over the multilingual encoder's
    /// embedding of `dim` values).
    pub fn multilingual(dim: usize) -> Result<Self, HeadError> {
        Self::with_sizes(serde_json::from_str(MULTILINGUAL_WEIGHTS)?, dim, 0)
    }

    /// An English head from the trainer's JSON, checked against the categories and the
    /// embedding size.
    pub fn parse(json: &str) -> Result<Self, HeadError> {
        let file: HeadFile = serde_json::from_str(json)?;
        Self::from_file(file)
    }

    /// An English head from weights, checked against the categories and the embedding size.
    pub fn from_file(file: HeadFile) -> Result<Self, HeadError> {
        Self::with_sizes(file, DIM, DIM)
    }

    /// A head from weights whose embedding has `embedding` values and whose middle layer
    /// `middle` (0: none), checked against the categories and those sizes.
    pub fn with_sizes(file: HeadFile, embedding: usize, middle: usize) -> Result<Self, HeadError> {
        let n = prototypes::CATEGORIES.len();
        if file.categories.len() != n {
            return Err(HeadError::Shape(format!(
                "{} categories, expected {n}",
                file.categories.len()
            )));
        }
        let mut categories = Vec::with_capacity(n);
        for ((name, _), weights) in prototypes::CATEGORIES.iter().zip(file.categories) {
            if weights.name != *name {
                return Err(HeadError::Shape(format!(
                    "category {:?} where {name:?} was expected",
                    weights.name
                )));
            }
            if weights.margins.len() != n
                || weights.embedding.len() != embedding
                || weights.middle.len() != middle
            {
                return Err(HeadError::Shape(format!(
                    "{name}: {} margin, {} embedding and {} middle weights, expected {n}, \
                     {embedding} and {middle}",
                    weights.margins.len(),
                    weights.embedding.len(),
                    weights.middle.len()
                )));
            }
            categories.push((*name, weights));
        }
        Ok(Self { categories })
    }

    /// Per category, the score in [0, 1] of a segment with sentence embedding `embedding`,
    /// middle-layer embedding `middle`, profanity score `profanity` and prototype margins
    /// `margins` (in category order).
    pub fn score(
        &self,
        embedding: &[f32],
        middle: &[f32],
        profanity: f32,
        margins: &[f32],
    ) -> Vec<(&'static str, f32)> {
        self.categories
            .iter()
            .map(|(name, w)| {
                let logit = w.bias
                    + w.profanity * (2.0 * profanity - 1.0)
                    + dot(&w.margins, margins)
                    + dot(&w.embedding, embedding)
                    + dot(&w.middle, middle);
                (*name, sigmoid(logit))
            })
            .collect()
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The logistic function.
pub fn sigmoid(logit: f32) -> f32 {
    1.0 / (1.0 + (-logit).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> HeadFile {
        let categories = prototypes::CATEGORIES
            .iter()
            .enumerate()
            .map(|(i, (name, _))| {
                let mut embedding = vec![0.0; DIM];
                embedding[i] = 10.0;
                CategoryWeights {
                    name: (*name).to_owned(),
                    bias: -5.0,
                    profanity: if i == 0 { 2.0 } else { 0.0 },
                    margins: vec![0.0; 5],
                    embedding,
                    middle: vec![0.0; DIM],
                }
            })
            .collect();
        HeadFile {
            about: "test".to_owned(),
            chosen_threshold: 0.5,
            categories,
        }
    }

    #[test]
    fn the_compiled_weights_fit_the_categories_and_the_embedding() {
        let head = Head::compiled().unwrap();
        let names: Vec<&str> = head.categories.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            ["harassment", "hate", "violence", "self_harm", "sexual"]
        );
    }

    #[test]
    fn the_compiled_head_follows_the_prototype_margins() {
        let head = Head::compiled().unwrap();
        let embedding = vec![0.0; DIM];
        let mut near_violence = [-0.1; 5];
        near_violence[2] = 0.5;

        let violent = head.score(&embedding, &embedding, 0.0, &near_violence);
        let benign = head.score(&embedding, &embedding, 0.0, &[-0.1; 5]);

        assert_eq!(violent[2].0, "violence");
        assert!(violent[2].1 > 0.5, "{violent:?}");
        assert!(violent[2].1 > benign[2].1);
        assert!(benign.iter().all(|(_, s)| *s < 0.5), "{benign:?}");
    }

    #[test]
    fn a_segment_along_a_categorys_weights_scores_high_there_only() {
        let head = Head::from_file(file()).unwrap();
        let mut embedding = vec![0.0; DIM];
        embedding[2] = 1.0;

        let scores = head.score(&embedding, &vec![0.0; DIM], 0.5, &[0.0; 5]);

        assert_eq!(scores[2].0, "violence");
        assert!(scores[2].1 > 0.99, "{scores:?}");
        assert!(scores
            .iter()
            .filter(|(n, _)| *n != "violence")
            .all(|(_, s)| *s < 0.01));
    }

    #[test]
    fn the_middle_embedding_moves_only_the_categories_that_weigh_it() {
        let mut weights = file();
        weights.categories[3].middle[7] = 10.0;
        let head = Head::from_file(weights).unwrap();
        let zero = vec![0.0; DIM];
        let mut middle = vec![0.0; DIM];
        middle[7] = 1.0;

        let without = head.score(&zero, &zero, 0.5, &[0.0; 5]);
        let with = head.score(&zero, &middle, 0.5, &[0.0; 5]);

        assert_eq!(with[3].0, "self_harm");
        assert!(with[3].1 > 0.99 && without[3].1 < 0.01, "{with:?}");
        assert_eq!(with[0].1, without[0].1);
    }

    #[test]
    fn profanity_moves_only_the_categories_that_weigh_it() {
        let head = Head::from_file(file()).unwrap();
        let embedding = vec![0.0; DIM];

        let clean = head.score(&embedding, &embedding, 0.0, &[0.0; 5]);
        let profane = head.score(&embedding, &embedding, 1.0, &[0.0; 5]);

        assert!(profane[0].1 > clean[0].1);
        assert_eq!(profane[1].1, clean[1].1);
    }

    #[test]
    fn weights_for_other_categories_or_sizes_are_refused() {
        let mut renamed = file();
        renamed.categories[1].name = "spam".to_owned();
        let mut short = file();
        short.categories[0].embedding.pop();
        let mut short_middle = file();
        short_middle.categories[4].middle.pop();

        assert!(matches!(Head::from_file(renamed), Err(HeadError::Shape(_))));
        assert!(matches!(Head::from_file(short), Err(HeadError::Shape(_))));
        assert!(matches!(
            Head::from_file(short_middle),
            Err(HeadError::Shape(_))
        ));
        assert!(matches!(Head::parse("{}"), Err(HeadError::Json(_))));
    }
}
