//! alt-profanity-check's linear model, read from the plain numbers `scripts/models.d/text.py`
//! exported: tf-idf over words of two or more word characters (lowercased), l2-normalised, then
//! per cross-validation fold a linear SVM's decision with its sigmoid calibration; the score is
//! the mean of the folds' probabilities (scikit-learn's `predict_proba`).

use std::{collections::HashMap, path::Path};

use anyhow::{bail, Context};
use serde::Deserialize;

/// One fold of the calibrated SVM.
#[derive(Debug, Deserialize)]
struct Fold {
    coef: Vec<f32>,
    intercept: f32,
    a: f32,
    b: f32,
}

/// The file `profanity.json`.
#[derive(Debug, Deserialize)]
struct Exported {
    vocabulary: HashMap<String, usize>,
    idf: Vec<f32>,
    folds: Vec<Fold>,
    /// Sentences with scikit-learn's probabilities, to check this scorer against.
    #[serde(default)]
    reference: Vec<(String, f32)>,
}

/// The profanity model.
#[derive(Debug)]
pub struct Profanity {
    model: Exported,
}

impl Profanity {
    /// Reads `profanity.json` in `dir`.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let path = dir.join("profanity.json");
        let raw = std::fs::read(&path).with_context(|| format!("{} unreadable", path.display()))?;
        let model: Exported = serde_json::from_slice(&raw)
            .with_context(|| format!("{} is not a profanity model", path.display()))?;
        Self::new(model).with_context(|| format!("{} is inconsistent", path.display()))
    }

    fn new(model: Exported) -> anyhow::Result<Self> {
        let width = model.idf.len();
        if model.folds.is_empty()
            || model.folds.iter().any(|f| f.coef.len() != width)
            || model.vocabulary.values().any(|&column| column >= width)
        {
            bail!("vocabulary, idf and coefficients disagree");
        }
        Ok(Self { model })
    }

    /// The sentences with scikit-learn's probabilities that came with the model.
    pub fn reference(&self) -> &[(String, f32)] {
        &self.model.reference
    }

    /// The probability in [0, 1] that `text` is offensive.
    pub fn score(&self, text: &str) -> f32 {
        let mut counts: HashMap<usize, f32> = HashMap::new();
        for word in words(text) {
            if let Some(&column) = self.model.vocabulary.get(&word) {
                *counts.entry(column).or_default() += 1.0;
            }
        }
        let weights: Vec<(usize, f32)> = counts
            .into_iter()
            .map(|(column, n)| (column, n * self.model.idf[column]))
            .collect();
        let norm = weights.iter().map(|(_, w)| w * w).sum::<f32>().sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        let folds = &self.model.folds;
        let total: f32 = folds
            .iter()
            .map(|fold| {
                let decision = fold.intercept
                    + weights
                        .iter()
                        .map(|&(column, w)| fold.coef[column] * w * scale)
                        .sum::<f32>();
                1.0 / (1.0 + (fold.a * decision + fold.b).exp())
            })
            .sum();
        total / folds.len() as f32
    }
}

/// The words scikit-learn's default token pattern `(?u)\b\w\w+\b` finds, lowercased: runs of
/// two or more letters, digits or underscores.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|word| word.chars().nth(1).is_some())
        .map(str::to_lowercase)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Profanity {
        Profanity::new(Exported {
            vocabulary: HashMap::from([("bad".to_owned(), 0), ("good".to_owned(), 1)]),
            idf: vec![2.0, 1.0],
            folds: vec![
                Fold {
                    coef: vec![4.0, -4.0],
                    intercept: 0.0,
                    a: -1.0,
                    b: 0.0,
                },
                Fold {
                    coef: vec![2.0, -2.0],
                    intercept: 0.0,
                    a: -1.0,
                    b: 0.0,
                },
            ],
            reference: Vec::new(),
        })
        .unwrap()
    }

    #[test]
    fn words_follow_the_default_token_pattern() {
        let found: Vec<String> = words("Don't_you DARE, a 2 idiots!! École").collect();
        assert_eq!(found, ["don", "t_you", "dare", "idiots", "école"]);
    }

    #[test]
    fn score_is_the_mean_of_the_calibrated_folds() {
        let model = tiny();
        // "bad" alone: x = (1, 0) after l2; decisions 4 and 2.
        let expected = (1.0 / (1.0 + (-4.0f32).exp()) + 1.0 / (1.0 + (-2.0f32).exp())) / 2.0;
        assert!((model.score("so BAD") - expected).abs() < 1e-6);
        // No known word: decisions 0, probability 0.5 in each fold.
        assert!((model.score("nothing here") - 0.5).abs() < 1e-6);
        assert!(model.score("good good") < 0.5);
    }

    #[test]
    #[ignore = "needs the prepared models: TEST_MODEL_DIR"]
    fn text_model_profanity_export_reproduces_scikit_learn() {
        let dir = std::env::var_os("TEST_MODEL_DIR").expect("TEST_MODEL_DIR");
        let model = Profanity::load(&Path::new(&dir).join("text")).unwrap();
        assert!(model.reference().len() >= 5);
        for (text, expected) in model.reference() {
            let got = model.score(text);
            assert!((got - expected).abs() < 1e-4, "{text}: {got} != {expected}");
        }
    }

    #[test]
    fn a_model_whose_parts_disagree_is_refused() {
        let broken = Exported {
            vocabulary: HashMap::from([("bad".to_owned(), 5)]),
            idf: vec![1.0],
            folds: vec![Fold {
                coef: vec![1.0],
                intercept: 0.0,
                a: -1.0,
                b: 0.0,
            }],
            reference: Vec::new(),
        };
        assert!(Profanity::new(broken).is_err());
    }
}
