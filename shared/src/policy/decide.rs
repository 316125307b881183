//! Applying a version to scores: the one decision function the worker and the impact preview
//! share.

use uuid::Uuid;

use super::{milli_at_least, Milli, Mode, PolicyDoc, FIXED_CATEGORIES};

/// A category whose score reached its `block_at` under an `enforce` rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The policy category (`violence`, `nsfw`, `custom.<name>`).
    pub category: String,
    /// Its score in thousandths.
    pub score: Milli,
    /// The threshold it reached.
    pub block_at: f64,
}

/// What a version makes of a job's scores.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    /// The categories that reject it, highest score first (ties by name).
    pub hits: Vec<Hit>,
    /// Whether a category scored in its review band.
    pub band: bool,
}

impl Applied {
    /// Whether the scores reject the job.
    pub fn rejects(&self) -> bool {
        !self.hits.is_empty()
    }
}

/// Applies `doc` to `scores` (policy category, score in thousandths). `enforce` rejects at
/// `block_at` and sends to review from `review_at`; `observe` and `off` do neither.
pub fn decide<'a>(doc: &PolicyDoc, scores: impl IntoIterator<Item = (&'a str, Milli)>) -> Applied {
    let mut applied = Applied::default();
    for (category, score) in scores {
        let rule = doc.rule(category);
        if rule.mode != Mode::Enforce {
            continue;
        }
        if score >= milli_at_least(rule.block_at) {
            applied.hits.push(Hit {
                category: category.to_owned(),
                score,
                block_at: rule.block_at,
            });
        } else if rule
            .review_at
            .is_some_and(|review_at| score >= milli_at_least(review_at))
        {
            applied.band = true;
        }
    }
    applied.hits.sort_by(|a, b| {
        b.score
            .cmp(&a.score)
            .then_with(|| a.category.cmp(&b.category))
    });
    applied
}

/// A version's rules of the fixed categories in thousandths, to apply it to many stored jobs
/// (the impact preview): one comparison per score, no lookup and no allocation. Agrees with
/// [`decide`] on every job without custom scores.
#[derive(Debug, Clone, Copy)]
pub struct FixedGates {
    /// Per fixed category ([`FIXED_CATEGORIES`] order), the least score that rejects;
    /// [`Milli::MAX`] when its rule does not enforce.
    block: [Milli; 6],
    /// Per fixed category, the least score that sends to review; [`Milli::MAX`] without a band.
    review: [Milli; 6],
}

impl FixedGates {
    /// The gates of `doc`.
    pub fn new(doc: &PolicyDoc) -> Self {
        let mut gates = Self {
            block: [Milli::MAX; 6],
            review: [Milli::MAX; 6],
        };
        for (index, name) in FIXED_CATEGORIES.iter().enumerate() {
            let rule = doc.rule(name);
            if rule.mode == Mode::Enforce {
                gates.block[index] = milli_at_least(rule.block_at);
                gates.review[index] = rule.review_at.map_or(Milli::MAX, milli_at_least);
            }
        }
        gates
    }

    /// The fixed categories that reject a job with scores `fixed` (bit `i` for
    /// `FIXED_CATEGORIES[i]`), and whether one scored in its review band.
    pub fn apply(&self, fixed: &[Option<Milli>; 6]) -> (u8, bool) {
        let mut hits = 0u8;
        let mut band = false;
        for (index, score) in fixed.iter().enumerate() {
            if let Some(score) = *score {
                if score >= self.block[index] {
                    hits |= 1 << index;
                } else if score >= self.review[index] {
                    band = true;
                }
            }
        }
        (hits, band)
    }
}

/// Whether the deterministic review sample at `rate` picks `job`: the last 32 bits of its id
/// as a fraction of 2^32, below `rate`. They are random in every UUIDv7 we make (the bits
/// before them hold a counter within each millisecond), so the sample is fair, and the same
/// job is always picked or never.
pub fn sampled(job: Uuid, rate: f64) -> bool {
    let bytes = job.as_bytes();
    let tail = u32::from_be_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    f64::from(tail) / 4_294_967_296.0 < rate
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::policy::{ReviewSettings, Rule};

    fn doc(rules: &[(&str, Mode, f64, Option<f64>)]) -> PolicyDoc {
        PolicyDoc {
            categories: rules
                .iter()
                .map(|&(name, mode, block_at, review_at)| {
                    (
                        name.to_owned(),
                        Rule {
                            mode,
                            block_at,
                            review_at,
                        },
                    )
                })
                .collect::<BTreeMap<_, _>>(),
            review: ReviewSettings { sample_rate: 0.0 },
        }
    }

    #[test]
    fn enforce_rejects_at_block_at_and_reviews_in_the_band() {
        let doc = doc(&[("violence", Mode::Enforce, 0.7, Some(0.4))]);
        assert!(decide(&doc, [("violence", 700)]).rejects());
        assert!(!decide(&doc, [("violence", 699)]).rejects());
        assert!(decide(&doc, [("violence", 699)]).band);
        assert!(decide(&doc, [("violence", 400)]).band);
        assert!(!decide(&doc, [("violence", 399)]).band);
    }

    #[test]
    fn observe_and_off_never_reject_or_review() {
        let doc = doc(&[
            ("sexual", Mode::Observe, 0.1, Some(0.05)),
            ("hate", Mode::Off, 0.1, None),
        ]);
        let applied = decide(&doc, [("sexual", 1000), ("hate", 1000)]);
        assert_eq!(applied, Applied::default());
    }

    #[test]
    fn a_custom_category_the_version_omits_is_enforced_at_the_default() {
        let doc = doc(&[]);
        assert!(decide(&doc, [("custom.gambling", 450)]).rejects());
        assert!(!decide(&doc, [("custom.gambling", 449)]).rejects());
    }

    #[test]
    fn hits_are_ordered_by_score() {
        let doc = doc(&[
            ("hate", Mode::Enforce, 0.5, None),
            ("violence", Mode::Enforce, 0.5, None),
        ]);
        let applied = decide(&doc, [("hate", 600), ("violence", 900)]);
        let order: Vec<&str> = applied.hits.iter().map(|h| h.category.as_str()).collect();
        assert_eq!(order, ["violence", "hate"]);
    }

    #[test]
    fn the_gates_agree_with_decide() {
        let doc = doc(&[
            ("harassment", Mode::Enforce, 0.3, Some(0.1)),
            ("hate", Mode::Observe, 0.2, None),
            ("violence", Mode::Enforce, 0.7005, Some(0.4)),
            ("self_harm", Mode::Off, 0.1, None),
            ("sexual", Mode::Enforce, 1.0, None),
        ]);
        let gates = FixedGates::new(&doc);
        // Every score at and beside each threshold, in every category, and none.
        let edges = [
            None,
            Some(0),
            Some(99),
            Some(100),
            Some(299),
            Some(300),
            Some(399),
            Some(400),
            Some(500),
            Some(700),
            Some(701),
            Some(999),
            Some(1000),
        ];
        for (i, &a) in edges.iter().enumerate() {
            for &b in &edges {
                let fixed = [a, b, edges[(i + 3) % edges.len()], a, b, b];
                let scores = FIXED_CATEGORIES
                    .iter()
                    .zip(fixed)
                    .filter_map(|(&name, score)| score.map(|s| (name, s)));
                let applied = decide(&doc, scores);
                let (hits, band) = gates.apply(&fixed);
                let named: Vec<&str> = (0..6)
                    .filter(|i| hits & (1 << i) != 0)
                    .map(|i| FIXED_CATEGORIES[i])
                    .collect();
                let mut expected: Vec<&str> =
                    applied.hits.iter().map(|h| h.category.as_str()).collect();
                expected.sort_by_key(|name| FIXED_CATEGORIES.iter().position(|c| c == name));
                assert_eq!(named, expected, "{fixed:?}");
                assert_eq!(band, applied.band, "{fixed:?}");
            }
        }
    }

    #[test]
    fn the_sample_is_deterministic_and_near_its_rate() {
        let ids: Vec<Uuid> = (0..20_000).map(|_| Uuid::now_v7()).collect();
        let picked = ids.iter().filter(|&&id| sampled(id, 0.1)).count();
        assert!((1_700..2_300).contains(&picked), "{picked}");
        for id in &ids[..100] {
            assert_eq!(sampled(*id, 0.1), sampled(*id, 0.1));
            assert!(!sampled(*id, 0.0));
            assert!(sampled(*id, 1.0));
        }
    }
}
