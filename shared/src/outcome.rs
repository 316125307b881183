//! How a job ended: what the worker decided (or why it failed), as written by
//! `db::jobs::finish_many` and sent in the `job.completed` webhook.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::{
    domain::{FailureCode, ReviewReason},
    policy::{Milli, FIXED_CATEGORIES},
};

/// How a job ended.
#[derive(Debug, Clone, PartialEq)]
pub enum JobOutcome {
    /// Classified.
    Decided(Box<Decision>),
    /// Could not be classified.
    Failed {
        /// A contract error code, e.g. `MEDIA_UNREACHABLE`.
        code: FailureCode,
        /// A sentence for people.
        message: String,
    },
}

impl JobOutcome {
    /// The failure of a job that was taken `tries` times without completing: `INTERNAL`.
    pub fn exhausted(tries: i32) -> Self {
        Self::Failed {
            code: FailureCode::Internal,
            message: format!("The job did not complete after {tries} tries."),
        }
    }
}

/// A completed job's decision and what it was taken from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// Whether it is rejected.
    pub is_prohibited: bool,
    /// Why (only kept when rejected).
    pub reason: Option<String>,
    /// Category results: image and video always; any job with custom categories.
    pub categories: Option<serde_json::Value>,
    /// The built-in models' scores in thousandths, by policy category (`violence`, `nsfw`,
    /// `custom.<name>`); empty when no model ran.
    pub scores: BTreeMap<String, Milli>,
    /// Whether the NSFW check ran (`None` for kinds that never run it).
    pub nsfw_checked: Option<bool>,
    /// Whether a list, keyword category, hash bank or model server rejected it, whatever the
    /// policy says.
    pub listed: bool,
    /// The active policy version that decided it.
    pub policy_version: Option<i32>,
    /// Why it goes to review (empty: it does not).
    pub review: Vec<ReviewReason>,
    /// The shadow version's decision, when one ran.
    pub shadow: Option<ShadowDecision>,
    /// The detected language of a text or of an audio job's speech (ISO 639-1).
    pub language: Option<String>,
    /// The models that scored it (`model_sets.id`).
    pub model_set: Option<String>,
}

impl Decision {
    /// The stored and sent `scores`: each in [0, 1] to 3 decimals; `None` when no model ran.
    pub fn scores_json(&self) -> Option<serde_json::Value> {
        let scores: serde_json::Map<String, serde_json::Value> = self
            .scores
            .iter()
            .filter_map(|(category, &milli)| {
                serde_json::Number::from_f64(f64::from(milli) / 1000.0)
                    .map(|n| (category.clone(), n.into()))
            })
            .collect();
        (!scores.is_empty()).then(|| scores.into())
    }

    /// The score of fixed category `name`, if a model scored it.
    pub fn fixed_score(&self, name: &str) -> Option<Milli> {
        debug_assert!(FIXED_CATEGORIES.contains(&name));
        self.scores.get(name).copied()
    }

    /// The custom categories' scores (`{"<name>": milli}`), `None` when none was scored.
    pub fn custom_scores(&self) -> Option<serde_json::Value> {
        let custom: serde_json::Map<String, serde_json::Value> = self
            .scores
            .iter()
            .filter_map(|(category, &milli)| {
                category
                    .strip_prefix(crate::policy::CUSTOM_PREFIX)
                    .map(|name| (name.to_owned(), milli.into()))
            })
            .collect();
        (!custom.is_empty()).then(|| custom.into())
    }
}

/// What the shadow version would have decided (the job object's `shadow`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShadowDecision {
    /// The shadow version.
    pub policy_version: i32,
    /// Whether it would reject the job.
    pub is_prohibited: bool,
    /// The categories it would set, when the job has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub categories: Option<serde_json::Value>,
}
