//! From a text's embedding (and its profanity score) to the five category scores: the text's
//! similarity to each category's prototypes, less its similarity to the benign prototypes,
//! through a logistic curve. A text as close to a benign sentence as to a category's harmful
//! ones scores low however alarming its words.

use super::embed::Embedding;

/// Prototypes counted per side: the mean of the `TOP` closest, steadier than the single
/// closest.
const TOP: usize = 2;

/// The margin (category similarity less benign similarity) that scores 0.5.
pub const MARGIN: f32 = 0.04;

/// How steeply the score climbs with the margin: a margin of `MARGIN + 1 / SLOPE` scores 0.73.
pub const SLOPE: f32 = 20.0;

/// How much the profanity model adds (to the logit) for the insult categories, where a
/// profane text is likelier to be an attack than an idiom.
pub const PROFANITY_WEIGHT: f32 = 0.2;

/// Categories the profanity score adds to.
const PROFANE: [&str; 2] = ["harassment", "hate"];

/// What the scorer measured of a text for one category.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measure {
    /// Mean similarity to the category's closest prototypes.
    pub category: f32,
    /// Mean similarity to the closest benign prototypes.
    pub benign: f32,
}

/// The prototypes' embeddings.
pub struct Scorer {
    categories: Vec<(&'static str, Vec<Embedding>)>,
    benign: Vec<Embedding>,
}

impl Scorer {
    /// A scorer from each category's prototype embeddings and the benign ones.
    pub fn new(categories: Vec<(&'static str, Vec<Embedding>)>, benign: Vec<Embedding>) -> Self {
        Self { categories, benign }
    }

    /// The category names, in order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.categories.iter().map(|(name, _)| *name)
    }

    /// Per category, what `text` measures against the prototypes.
    pub fn measure(&self, text: &Embedding) -> Vec<(&'static str, Measure)> {
        let benign = top_mean(&self.benign, text);
        self.categories
            .iter()
            .map(|(name, prototypes)| {
                let category = top_mean(prototypes, text);
                (*name, Measure { category, benign })
            })
            .collect()
    }

    /// Per category, the score in [0, 1] of a text with embedding `text` and profanity score
    /// `profanity`.
    pub fn score(&self, text: &Embedding, profanity: f32) -> Vec<(&'static str, f32)> {
        self.measure(text)
            .into_iter()
            .map(|(name, measure)| (name, score(name, measure, profanity)))
            .collect()
    }
}

/// The score of one category from its measure.
pub fn score(name: &str, measure: Measure, profanity: f32) -> f32 {
    let mut logit = (measure.category - measure.benign - MARGIN) * SLOPE;
    if PROFANE.contains(&name) {
        logit += PROFANITY_WEIGHT * (profanity - 0.5) * 2.0;
    }
    1.0 / (1.0 + (-logit).exp())
}

/// The cosine similarity of two unit vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The mean similarity of `text` to its `TOP` closest `prototypes` (0 without prototypes).
fn top_mean(prototypes: &[Embedding], text: &[f32]) -> f32 {
    let mut sims: Vec<f32> = prototypes.iter().map(|p| cosine(p, text)).collect();
    sims.sort_by(|a, b| b.total_cmp(a));
    let top = &sims[..sims.len().min(TOP)];
    if top.is_empty() {
        0.0
    } else {
        top.iter().sum::<f32>() / top.len() as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Embedding {
        super::super::embed::normalise(v.to_vec())
    }

    fn scorer() -> Scorer {
        Scorer::new(
            vec![
                (
                    "violence",
                    vec![unit(&[1.0, 0.0, 0.0]), unit(&[1.0, 0.1, 0.0])],
                ),
                (
                    "harassment",
                    vec![unit(&[0.0, 1.0, 0.0]), unit(&[0.1, 1.0, 0.0])],
                ),
            ],
            vec![unit(&[0.0, 0.0, 1.0]), unit(&[0.0, 0.1, 1.0])],
        )
    }

    #[test]
    fn a_text_near_a_category_scores_high_there_and_low_elsewhere() {
        let scores = scorer().score(&unit(&[1.0, 0.0, 0.0]), 0.0);
        assert_eq!(scores[0].0, "violence");
        assert!(scores[0].1 > 0.99, "{scores:?}");
        assert!(scores[1].1 < 0.5, "{scores:?}");
    }

    #[test]
    fn a_text_nearer_the_benign_prototypes_scores_low_everywhere() {
        let scores = scorer().score(&unit(&[0.3, 0.0, 1.0]), 0.0);
        assert!(scores.iter().all(|(_, s)| *s < 0.01), "{scores:?}");
    }

    #[test]
    fn profanity_raises_only_the_insult_categories() {
        let measure = Measure {
            category: 0.5,
            benign: 0.5,
        };
        assert!(score("harassment", measure, 1.0) > score("harassment", measure, 0.0));
        assert_eq!(
            score("violence", measure, 1.0),
            score("violence", measure, 0.0)
        );
    }

    #[test]
    fn top_mean_averages_the_closest_prototypes() {
        let prototypes = vec![unit(&[1.0, 0.0]), unit(&[0.0, 1.0]), unit(&[-1.0, 0.0])];
        let mean = top_mean(&prototypes, &unit(&[1.0, 0.0]));
        assert!((mean - 0.5).abs() < 1e-6);
        assert_eq!(top_mean(&[], &unit(&[1.0, 0.0])), 0.0);
    }
}
