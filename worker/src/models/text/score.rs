//! From a text's embedding (and its profanity score) to the five category scores. The text's
//! similarity to each category's prototypes, less its similarity to the benign prototypes (its
//! margins), goes with the embedding's two vectors and the profanity score into the trained
//! [`Head`]. A text as close to a benign sentence as to a category's harmful ones has a low
//! margin however alarming its words.

use super::{embed::Embedding, head::Head};

/// Prototypes counted per side: the mean of the `TOP` closest, steadier than the single
/// closest.
pub const TOP: usize = 2;

/// What the scorer measured of a text for one category.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measure {
    /// Mean similarity to the category's closest prototypes.
    pub category: f32,
    /// Mean similarity to the closest benign prototypes.
    pub benign: f32,
}

/// The prototypes' sentence embeddings and the head.
pub struct Scorer {
    categories: Vec<(&'static str, Vec<Vec<f32>>)>,
    benign: Vec<Vec<f32>>,
    head: Head,
}

impl Scorer {
    /// A scorer from each category's prototype sentence embeddings, the benign ones and the
    /// head (whose categories are the same, in the same order).
    pub fn new(
        categories: Vec<(&'static str, Vec<Vec<f32>>)>,
        benign: Vec<Vec<f32>>,
        head: Head,
    ) -> Self {
        Self {
            categories,
            benign,
            head,
        }
    }

    /// The category names, in order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.categories.iter().map(|(name, _)| *name)
    }

    /// Per category, what a text with sentence embedding `text` measures against the
    /// prototypes.
    pub fn measure(&self, text: &[f32]) -> Vec<(&'static str, Measure)> {
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
        let margins: Vec<f32> = self
            .measure(&text.sentence)
            .iter()
            .map(|(_, m)| m.category - m.benign)
            .collect();
        self.head
            .score(&text.sentence, &text.middle, profanity, &margins)
    }
}

/// The cosine similarity of two unit vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The mean similarity of `text` to its `TOP` closest `prototypes` (0 without prototypes).
pub fn top_mean(prototypes: &[Vec<f32>], text: &[f32]) -> f32 {
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

    fn unit(v: &[f32]) -> Vec<f32> {
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
            Head::compiled().unwrap(),
        )
    }

    fn margins(measures: &[(&'static str, Measure)]) -> Vec<f32> {
        measures
            .iter()
            .map(|(_, m)| m.category - m.benign)
            .collect()
    }

    #[test]
    fn a_text_near_a_category_has_a_high_margin_there_and_a_low_one_elsewhere() {
        let measures = scorer().measure(&unit(&[1.0, 0.0, 0.0]));
        let margins = margins(&measures);
        assert_eq!(measures[0].0, "violence");
        assert!(margins[0] > 0.9, "{measures:?}");
        assert!(margins[1] < 0.1, "{measures:?}");
    }

    #[test]
    fn a_text_nearer_the_benign_prototypes_has_negative_margins_everywhere() {
        let measures = scorer().measure(&unit(&[0.3, 0.0, 1.0]));
        assert!(margins(&measures).iter().all(|m| *m < 0.0), "{measures:?}");
    }

    #[test]
    fn top_mean_averages_the_closest_prototypes() {
        let prototypes = vec![unit(&[1.0, 0.0]), unit(&[0.0, 1.0]), unit(&[-1.0, 0.0])];
        let mean = top_mean(&prototypes, &unit(&[1.0, 0.0]));
        assert!((mean - 0.5).abs() < 1e-6);
        assert_eq!(top_mean(&[], &unit(&[1.0, 0.0])), 0.0);
    }
}
