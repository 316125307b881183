//! The impact preview (contract 13): a version applied to the stored scores of an account's
//! completed jobs in a window, without running any model, against the decisions those jobs
//! got.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use uuid::Uuid;

use super::{decide, sampled, FixedGates, PolicyDoc, FIXED_CATEGORIES};
use crate::db::job_scores::StoredScores;

/// How many example job ids each kind of flip lists at most.
pub const EXAMPLES: usize = 20;

/// Flips attributed to one category.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CategoryFlips {
    /// Passed jobs this category would reject under the version.
    pub pass_to_reject: u64,
    /// Rejected jobs this category rejected (under the version that decided them) and that
    /// would pass under the version.
    pub reject_to_pass: u64,
}

/// Example job ids of each kind of flip, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Examples {
    /// Passed jobs the version would reject.
    pub pass_to_reject: Vec<Uuid>,
    /// Rejected jobs the version would pass.
    pub reject_to_pass: Vec<Uuid>,
}

/// What a version would have done to a window of completed jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Impact {
    /// Completed jobs in the window.
    pub jobs: u64,
    /// Of them, those with stored scores (the others keep their decision).
    pub rescored: u64,
    /// Passed jobs it would reject.
    pub pass_to_reject: u64,
    /// Rejected jobs it would pass.
    pub reject_to_pass: u64,
    /// Jobs it would send to review (its band or its sample).
    pub to_review: u64,
    /// The flips by category.
    pub by_category: BTreeMap<String, CategoryFlips>,
    /// Examples of each flip.
    pub examples: Examples,
}

/// Accumulates the impact of `doc`, row by row (rows come in job id order). `deciders` holds
/// the versions that decided the stored jobs, by number, to tell which category rejected a
/// job that now passes. A job without custom scores (nearly all) is judged by the versions'
/// [`FixedGates`], without allocating; one with custom scores by [`decide`].
pub struct ImpactCounter<'a> {
    doc: &'a PolicyDoc,
    gates: FixedGates,
    deciders: &'a HashMap<i32, PolicyDoc>,
    decider_gates: HashMap<i32, FixedGates>,
    /// The flips of the fixed categories, in [`FIXED_CATEGORIES`] order.
    fixed_flips: [CategoryFlips; 6],
    impact: Impact,
}

impl<'a> ImpactCounter<'a> {
    /// A counter of `doc`'s impact.
    pub fn new(doc: &'a PolicyDoc, deciders: &'a HashMap<i32, PolicyDoc>) -> Self {
        Self {
            doc,
            gates: FixedGates::new(doc),
            deciders,
            decider_gates: deciders
                .iter()
                .map(|(&version, doc)| (version, FixedGates::new(doc)))
                .collect(),
            fixed_flips: [CategoryFlips::default(); 6],
            impact: Impact::default(),
        }
    }

    /// Counts one job.
    pub fn add(&mut self, row: &StoredScores) {
        self.impact.jobs += 1;
        if !row.is_scored() {
            return;
        }
        self.impact.rescored += 1;
        if row.custom.is_empty() {
            self.add_fixed(row);
        } else {
            self.add_custom(row);
        }
    }

    /// Counts a job with fixed scores only, through the gates.
    fn add_fixed(&mut self, row: &StoredScores) {
        let (hits, band) = self.gates.apply(&row.fixed);
        let after = row.listed || hits != 0;
        let Some(flip) = self.count(row, band, after) else {
            return;
        };
        let attributed = match flip {
            Flip::PassToReject => hits,
            Flip::RejectToPass => match row.policy_version.and_then(|v| self.decider_gates.get(&v))
            {
                Some(decider) => decider.apply(&row.fixed).0,
                None => self.gates.apply(&row.fixed).0,
            },
        };
        for (index, flips) in self.fixed_flips.iter_mut().enumerate() {
            if attributed & (1 << index) != 0 {
                flip.add_to(flips);
            }
        }
    }

    /// Counts a job with custom scores, through [`decide`].
    fn add_custom(&mut self, row: &StoredScores) {
        let applied = decide(self.doc, row.scores());
        let Some(flip) = self.count(row, applied.band, row.listed || applied.rejects()) else {
            return;
        };
        let hits = match flip {
            Flip::PassToReject => applied.hits,
            Flip::RejectToPass => {
                let decider = row
                    .policy_version
                    .and_then(|v| self.deciders.get(&v))
                    .unwrap_or(self.doc);
                decide(decider, row.scores()).hits
            }
        };
        for hit in hits {
            let flips = self.impact.by_category.entry(hit.category).or_default();
            flip.add_to(flips);
        }
    }

    /// Counts the review and the flip of a job `after` would reject (or not), and returns the
    /// flip.
    fn count(&mut self, row: &StoredScores, band: bool, after: bool) -> Option<Flip> {
        let impact = &mut self.impact;
        if band || sampled(row.job_id, self.doc.review.sample_rate) {
            impact.to_review += 1;
        }
        let (flip, total, examples) = match (row.prohibited, after) {
            (false, true) => (
                Flip::PassToReject,
                &mut impact.pass_to_reject,
                &mut impact.examples.pass_to_reject,
            ),
            (true, false) => (
                Flip::RejectToPass,
                &mut impact.reject_to_pass,
                &mut impact.examples.reject_to_pass,
            ),
            _ => return None,
        };
        *total += 1;
        if examples.len() < EXAMPLES {
            examples.push(row.job_id);
        }
        Some(flip)
    }

    /// The impact counted.
    pub fn finish(self) -> Impact {
        let mut impact = self.impact;
        for (name, flips) in FIXED_CATEGORIES.iter().zip(self.fixed_flips) {
            if flips != CategoryFlips::default() {
                let total = impact.by_category.entry((*name).to_owned()).or_default();
                total.pass_to_reject += flips.pass_to_reject;
                total.reject_to_pass += flips.reject_to_pass;
            }
        }
        impact
    }
}

/// A change of decision.
#[derive(Debug, Clone, Copy)]
enum Flip {
    PassToReject,
    RejectToPass,
}

impl Flip {
    /// Counts this flip in `flips`.
    fn add_to(self, flips: &mut CategoryFlips) {
        match self {
            Self::PassToReject => flips.pass_to_reject += 1,
            Self::RejectToPass => flips.reject_to_pass += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PolicyDefaults, Rule};

    fn row(prohibited: bool, listed: bool, scores: &[(&str, u16)]) -> StoredScores {
        let mut fixed = [None; 6];
        for &(category, score) in scores {
            let index = crate::policy::FIXED_CATEGORIES
                .iter()
                .position(|&c| c == category)
                .unwrap();
            fixed[index] = Some(score);
        }
        StoredScores {
            job_id: Uuid::now_v7(),
            prohibited,
            listed,
            policy_version: Some(1),
            fixed,
            custom: Vec::new(),
        }
    }

    #[test]
    fn flips_are_counted_against_the_stored_decisions_and_attributed() {
        let old = PolicyDoc::defaults(&PolicyDefaults::default());
        let mut new = old.clone();
        new.categories.insert("violence".into(), Rule::enforce(0.3));
        new.categories.insert("hate".into(), Rule::enforce(0.9));
        let deciders = HashMap::from([(1, old)]);
        let mut counter = ImpactCounter::new(&new, &deciders);
        // Passed under 0.5, rejected under 0.3.
        counter.add(&row(false, false, &[("violence", 400)]));
        // Rejected for hate under 0.5, passes under 0.9.
        counter.add(&row(true, false, &[("hate", 600)]));
        // A list rejected it: it stays rejected.
        counter.add(&row(true, true, &[("hate", 100)]));
        // No scores: counted, not rescored.
        counter.add(&row(false, false, &[]));
        let impact = counter.finish();
        assert_eq!(impact.jobs, 4);
        assert_eq!(impact.rescored, 3);
        assert_eq!(impact.pass_to_reject, 1);
        assert_eq!(impact.reject_to_pass, 1);
        assert_eq!(impact.by_category["violence"].pass_to_reject, 1);
        assert_eq!(impact.by_category["hate"].reject_to_pass, 1);
        assert_eq!(impact.examples.pass_to_reject.len(), 1);
    }

    #[test]
    fn the_gated_count_equals_the_count_through_decide() {
        // The same jobs twice: with fixed scores only (counted through the gates), and with a
        // custom score no version enforces besides (counted through decide).
        let old = PolicyDoc::defaults(&PolicyDefaults::default());
        let mut new = old.clone();
        new.categories.insert(
            "violence".into(),
            Rule {
                review_at: Some(0.2),
                ..Rule::enforce(0.3)
            },
        );
        new.categories.insert("hate".into(), Rule::enforce(0.9));
        new.categories.insert(
            "custom.quiet".into(),
            Rule {
                mode: crate::policy::Mode::Off,
                ..Rule::enforce(0.5)
            },
        );
        let mut quiet_old = old.clone();
        quiet_old
            .categories
            .insert("custom.quiet".into(), new.categories["custom.quiet"]);
        let deciders = HashMap::from([(1, quiet_old)]);
        let mut gated = ImpactCounter::new(&new, &deciders);
        let mut decided = ImpactCounter::new(&new, &deciders);
        let mut seed = 7u32;
        let mut next = move || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            u16::try_from(seed >> 22).unwrap_or(0).min(1000)
        };
        for i in 0..5_000 {
            let scores: Vec<(&str, u16)> = ["harassment", "hate", "violence", "sexual"]
                .into_iter()
                .map(|c| (c, next()))
                .collect();
            let prohibited = scores.iter().any(|&(_, s)| s >= 500);
            let fixed_only = row(prohibited, i % 97 == 0, &scores);
            let mut with_custom = fixed_only.clone();
            with_custom.custom = vec![("custom.quiet".to_owned(), next())];
            gated.add(&fixed_only);
            decided.add(&with_custom);
        }
        let (gated, decided) = (gated.finish(), decided.finish());
        assert!(gated.pass_to_reject > 0 && gated.reject_to_pass > 0 && gated.to_review > 0);
        assert_eq!(gated, decided);
    }

    #[test]
    fn examples_stop_at_twenty() {
        let doc = PolicyDoc::defaults(&PolicyDefaults::default());
        let deciders = HashMap::new();
        let mut counter = ImpactCounter::new(&doc, &deciders);
        for _ in 0..25 {
            counter.add(&row(false, false, &[("violence", 900)]));
        }
        let impact = counter.finish();
        assert_eq!(impact.pass_to_reject, 25);
        assert_eq!(impact.examples.pass_to_reject.len(), EXAMPLES);
    }
}
