//! Policy versions (contract 13): what the model scores do for one account.
//!
//! A version gives each policy category a [`Rule`] (its [`Mode`], `block_at` and `review_at`)
//! and the review sample rate. The categories are the text model's five, `nsfw`, and
//! `custom.<name>` for each custom category (its similarity score); a custom category the
//! version does not name is enforced at [`DEFAULT_CUSTOM_BLOCK_AT`]. Lists, keyword categories
//! and hash banks reject whatever a version says.
//!
//! Decisions are taken on scores rounded to thousandths ([`Milli`]), the values stored and
//! shown, so the impact preview, which re-applies a version to stored scores, reaches exactly
//! the decisions the worker would. [`decide`] is that one function.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::config::{env_or, ConfigError};
pub use crate::domain::PolicyMode as Mode;

mod decide;
mod diff;
pub mod impact;

pub use decide::{decide, sampled, Applied, FixedGates, Hit};
pub use diff::{diff, CategoryChange, PolicyDiff};
pub use impact::{Impact, ImpactCounter};

/// The text model's five categories.
pub const TEXT_CATEGORIES: [&str; 5] = ["harassment", "hate", "violence", "self_harm", "sexual"];
/// The policy categories every version holds: the text model's five and `nsfw`.
pub const FIXED_CATEGORIES: [&str; 6] = [
    "harassment",
    "hate",
    "violence",
    "self_harm",
    "sexual",
    "nsfw",
];
/// The prefix of a custom category's policy name (`custom.<name>`).
pub const CUSTOM_PREFIX: &str = "custom.";

/// `APP_TEXT_THRESHOLD` when unset: the five text categories' `block_at` in a new account's
/// version 1 (chosen from the evaluation in docs/models-text.md).
pub const DEFAULT_TEXT_BLOCK_AT: f64 = 0.5;
/// `APP_NSFW_THRESHOLD` when unset: `nsfw`'s `block_at` in a new account's version 1.
pub const DEFAULT_NSFW_BLOCK_AT: f64 = 0.8;
/// The `block_at` of a custom category a version does not name: the similarity of a text to
/// the category's description chosen on eval/custom/ (docs/models-text.md).
pub const DEFAULT_CUSTOM_BLOCK_AT: f64 = 0.45;

/// A score in thousandths, 0 to 1000: a model score as stored and shown (3 decimals).
pub type Milli = u16;

/// `score` (in [0, 1]) rounded to thousandths.
pub fn milli(score: f32) -> Milli {
    // In [0, 1000] after the clamp, so the cast is exact.
    (f64::from(score.clamp(0.0, 1.0)) * 1000.0).round() as Milli
}

/// The least score in thousandths that is at or above `threshold`: `m` passes exactly when
/// `m / 1000 >= threshold`, with the division done as the worker and Postgres both do it.
/// 1001 when no score reaches it (above 1, or NaN).
pub fn milli_at_least(threshold: f64) -> u16 {
    let reaches = |m: u16| f64::from(m) / 1000.0 >= threshold;
    if !reaches(1000) {
        return 1001;
    }
    // The product is within one of the answer (the division rounds); step to the least.
    // In [0, 1000] after the clamp, so the cast is exact.
    let mut m = (threshold * 1000.0).ceil().clamp(0.0, 1000.0) as u16;
    while m > 0 && reaches(m - 1) {
        m -= 1;
    }
    while !reaches(m) {
        m += 1;
    }
    m
}

/// One category's rule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// `enforce` (a score at or above `block_at` rejects; one in [`review_at`, `block_at`)
    /// sends the job to review), `observe` (recorded only) or `off` (not scored into the
    /// decision).
    #[schema(value_type = String, pattern = "^(enforce|observe|off)$")]
    pub mode: Mode,
    /// The score, above 0 and at most 1, from which `enforce` rejects.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub block_at: f64,
    /// The score, above 0, at most 1 and below `block_at`, from which `enforce` sends to
    /// review; `null` or absent: no review band.
    #[serde(default)]
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub review_at: Option<f64>,
}

impl Rule {
    /// An `enforce` rule rejecting at `block_at`, without a review band.
    pub fn enforce(block_at: f64) -> Self {
        Self {
            mode: Mode::Enforce,
            block_at,
            review_at: None,
        }
    }
}

/// The review settings of a version.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewSettings {
    /// The share of completed jobs, from 0 to 1, the deterministic sample sends to review.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub sample_rate: f64,
}

/// The body of a version: the rule of each category and the review settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyDoc {
    /// Each category's rule, by policy name (`violence`, `nsfw`, `custom.<name>`).
    pub categories: BTreeMap<String, Rule>,
    /// The review settings.
    pub review: ReviewSettings,
}

impl PolicyDoc {
    /// The service defaults: the fixed categories enforced at `defaults`, no review band, no
    /// sample.
    pub fn defaults(defaults: &PolicyDefaults) -> Self {
        let categories = FIXED_CATEGORIES
            .iter()
            .map(|&name| {
                let block_at = if name == "nsfw" {
                    defaults.nsfw_block_at
                } else {
                    defaults.text_block_at
                };
                (name.to_owned(), Rule::enforce(block_at))
            })
            .collect();
        Self {
            categories,
            review: ReviewSettings { sample_rate: 0.0 },
        }
    }

    /// The rule of `category`: its own, else (a custom category the version does not name, or
    /// a fixed one missing from a stored document) the service's.
    pub fn rule(&self, category: &str) -> Rule {
        self.categories.get(category).copied().unwrap_or_else(|| {
            if category.starts_with(CUSTOM_PREFIX) {
                Rule::enforce(DEFAULT_CUSTOM_BLOCK_AT)
            } else {
                Rule::enforce(DEFAULT_TEXT_BLOCK_AT)
            }
        })
    }
}

/// Input that breaks a rule of a version; the message names the category or field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidPolicy(pub String);

/// Checks `rule` of `category`: thresholds in (0, 1], `review_at` below `block_at`.
pub fn check_rule(category: &str, rule: &Rule) -> Result<(), InvalidPolicy> {
    let in_range = |value: f64| value > 0.0 && value <= 1.0;
    if !in_range(rule.block_at) {
        return Err(InvalidPolicy(format!(
            "categories.{category}.block_at must be above 0 and at most 1, got {}",
            rule.block_at
        )));
    }
    if let Some(review_at) = rule.review_at {
        if !in_range(review_at) {
            return Err(InvalidPolicy(format!(
                "categories.{category}.review_at must be above 0 and at most 1, got {review_at}"
            )));
        }
        if review_at >= rule.block_at {
            return Err(InvalidPolicy(format!(
                "categories.{category}.review_at ({review_at}) must be below block_at ({})",
                rule.block_at
            )));
        }
    }
    Ok(())
}

/// Checks the review settings: `sample_rate` in [0, 1].
pub fn check_review(review: &ReviewSettings) -> Result<(), InvalidPolicy> {
    if (0.0..=1.0).contains(&review.sample_rate) {
        Ok(())
    } else {
        Err(InvalidPolicy(format!(
            "review.sample_rate must be from 0 to 1, got {}",
            review.sample_rate
        )))
    }
}

/// `doc` with `categories` (each taken whole) and `review` set, every one checked: the
/// categories must be fixed ones or `custom.<name>` of the account's custom categories
/// (`custom`, by name).
pub fn amend(
    mut doc: PolicyDoc,
    categories: impl IntoIterator<Item = (String, Rule)>,
    review: Option<ReviewSettings>,
    custom: &[&str],
) -> Result<PolicyDoc, InvalidPolicy> {
    for (category, rule) in categories {
        if !is_known_category(&category, custom.iter().copied()) {
            return Err(InvalidPolicy(format!(
                "unknown category {category:?}: use harassment, hate, violence, self_harm, \
                 sexual, nsfw or custom.<name> of one of the account's custom categories"
            )));
        }
        check_rule(&category, &rule)?;
        doc.categories.insert(category, rule);
    }
    if let Some(review) = review {
        check_review(&review)?;
        doc.review = review;
    }
    Ok(doc)
}

/// Whether `category` names a policy category of an account whose custom categories are
/// `custom` (by name).
pub fn is_known_category<'a>(category: &str, custom: impl IntoIterator<Item = &'a str>) -> bool {
    if FIXED_CATEGORIES.contains(&category) {
        return true;
    }
    category
        .strip_prefix(CUSTOM_PREFIX)
        .is_some_and(|name| custom.into_iter().any(|c| c == name))
}

/// The service defaults a new account's version 1 holds: `APP_TEXT_THRESHOLD` and
/// `APP_NSFW_THRESHOLD`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolicyDefaults {
    /// The five text categories' `block_at`.
    pub text_block_at: f64,
    /// `nsfw`'s `block_at`.
    pub nsfw_block_at: f64,
}

impl Default for PolicyDefaults {
    fn default() -> Self {
        Self {
            text_block_at: DEFAULT_TEXT_BLOCK_AT,
            nsfw_block_at: DEFAULT_NSFW_BLOCK_AT,
        }
    }
}

impl PolicyDefaults {
    /// Reads `APP_TEXT_THRESHOLD` and `APP_NSFW_THRESHOLD` (each above 0 and at most 1).
    pub fn from_env() -> Result<Self, ConfigError> {
        let read = |name: &'static str, default: f64| {
            check_default(env_or(name, default)?).map_err(|reason| ConfigError::new(name, reason))
        };
        Ok(Self {
            text_block_at: read("APP_TEXT_THRESHOLD", DEFAULT_TEXT_BLOCK_AT)?,
            nsfw_block_at: read("APP_NSFW_THRESHOLD", DEFAULT_NSFW_BLOCK_AT)?,
        })
    }
}

/// A default threshold: above 0 and at most 1.
fn check_default(value: f64) -> Result<f64, String> {
    if value > 0.0 && value <= 1.0 {
        Ok(value)
    } else {
        Err(format!(
            "expected a score above 0 and at most 1, got {value}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threshold_in_thousandths_agrees_with_the_division_at_every_edge() {
        assert_eq!(milli_at_least(0.7), 700);
        assert_eq!(milli_at_least(0.7005), 701);
        assert_eq!(milli_at_least(1.0), 1000);
        assert_eq!(milli_at_least(0.0001), 1);
        assert_eq!(milli_at_least(1.0001), 1001);
        assert_eq!(milli_at_least(f64::NAN), 1001);
        assert_eq!(milli_at_least(-0.5), 0);
        for m in 0..=1000u16 {
            let t = f64::from(m) / 1000.0;
            assert_eq!(milli_at_least(t), m, "{t}");
            // Just above and below each edge, against the definition.
            for t in [t - 1e-12, t + 1e-12, t + 0.0004, t + 0.0005, t + 0.0006] {
                let least = (0..=1000u16)
                    .find(|&m| f64::from(m) / 1000.0 >= t)
                    .unwrap_or(1001);
                assert_eq!(milli_at_least(t), least, "{t}");
            }
        }
        assert_eq!(milli(0.6995), 700);
        assert_eq!(milli(1.3), 1000);
    }

    #[test]
    fn review_at_must_be_below_block_at_and_both_in_range() {
        let rule = |block_at, review_at| Rule {
            mode: Mode::Enforce,
            block_at,
            review_at,
        };
        assert!(check_rule("hate", &rule(0.7, Some(0.5))).is_ok());
        assert!(check_rule("hate", &rule(1.0, None)).is_ok());
        assert!(check_rule("hate", &rule(0.0, None)).is_err());
        assert!(check_rule("hate", &rule(1.0001, None)).is_err());
        assert!(check_rule("hate", &rule(0.7, Some(0.7))).is_err());
        assert!(check_rule("hate", &rule(0.7, Some(0.0))).is_err());
        assert!(check_review(&ReviewSettings { sample_rate: 1.0 }).is_ok());
        assert!(check_review(&ReviewSettings { sample_rate: 0.0 }).is_ok());
        assert!(check_review(&ReviewSettings { sample_rate: 1.01 }).is_err());
        assert!(check_review(&ReviewSettings { sample_rate: -0.01 }).is_err());
    }

    #[test]
    fn a_default_threshold_is_above_zero_and_at_most_one() {
        assert_eq!(check_default(0.5), Ok(0.5));
        assert_eq!(check_default(1.0), Ok(1.0));
        assert!(check_default(0.0).is_err());
        assert!(check_default(1.5).is_err());
        assert!(check_default(f64::NAN).is_err());
    }

    #[test]
    fn only_fixed_and_existing_custom_categories_are_known() {
        assert!(is_known_category("violence", []));
        assert!(is_known_category("nsfw", []));
        assert!(is_known_category("custom.gambling", ["gambling"]));
        assert!(!is_known_category("custom.gambling", ["drugs"]));
        assert!(!is_known_category("underage", []));
    }
}
