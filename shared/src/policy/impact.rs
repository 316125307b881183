//! The impact preview (contract 13): a version applied to the stored scores of an account's
//! completed jobs in a window, without running any model, against the decisions those jobs
//! got.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use uuid::Uuid;

use super::{decide, sampled, PolicyDoc};
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
/// job that now passes.
pub struct ImpactCounter<'a> {
    doc: &'a PolicyDoc,
    deciders: &'a HashMap<i32, PolicyDoc>,
    impact: Impact,
}

impl<'a> ImpactCounter<'a> {
    /// A counter of `doc`'s impact.
    pub fn new(doc: &'a PolicyDoc, deciders: &'a HashMap<i32, PolicyDoc>) -> Self {
        Self {
            doc,
            deciders,
            impact: Impact::default(),
        }
    }

    /// Counts one job.
    pub fn add(&mut self, row: &StoredScores) {
        let impact = &mut self.impact;
        impact.jobs += 1;
        if !row.is_scored() {
            return;
        }
        impact.rescored += 1;
        let applied = decide(self.doc, row.scores());
        if applied.band || sampled(row.job_id, self.doc.review.sample_rate) {
            impact.to_review += 1;
        }
        let after = row.listed || applied.rejects();
        match (row.prohibited, after) {
            (false, true) => {
                impact.pass_to_reject += 1;
                if impact.examples.pass_to_reject.len() < EXAMPLES {
                    impact.examples.pass_to_reject.push(row.job_id);
                }
                for hit in &applied.hits {
                    let flips = impact.by_category.entry(hit.category.clone()).or_default();
                    flips.pass_to_reject += 1;
                }
            }
            (true, false) => {
                impact.reject_to_pass += 1;
                if impact.examples.reject_to_pass.len() < EXAMPLES {
                    impact.examples.reject_to_pass.push(row.job_id);
                }
                let decider = row
                    .policy_version
                    .and_then(|v| self.deciders.get(&v))
                    .unwrap_or(self.doc);
                for hit in decide(decider, row.scores()).hits {
                    let flips = impact.by_category.entry(hit.category).or_default();
                    flips.reject_to_pass += 1;
                }
            }
            _ => {}
        }
    }

    /// The impact counted.
    pub fn finish(self) -> Impact {
        self.impact
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
