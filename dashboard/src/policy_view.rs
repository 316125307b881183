//! Policy versions in words: a category's rule and the rows of a diff, as the policy pages
//! show them. A leaf: it imports nothing of the crate.

use moderation_shared::policy::{PolicyDiff, Rule};

/// A rule in words: `enforce, block at 0.7, review from 0.4`; `not set` for a category the
/// version does not name (the service's default applies).
pub fn describe(rule: Option<&Rule>) -> String {
    match rule {
        None => "not set".to_owned(),
        Some(rule) => {
            let review = rule
                .review_at
                .map(|r| format!(", review from {r}"))
                .unwrap_or_default();
            format!("{}, block at {}{review}", rule.mode, rule.block_at)
        }
    }
}

/// One difference between two versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffRow {
    /// The category's policy name, or `review.sample_rate`.
    pub category: String,
    /// In the first version.
    pub from: String,
    /// In the second.
    pub to: String,
}

/// The rows of `diff`: each category changed, by name, then the review sample rate.
pub fn diff_rows(diff: &PolicyDiff) -> Vec<DiffRow> {
    let categories = diff.categories.iter().map(|(name, change)| DiffRow {
        category: name.clone(),
        from: describe(change.from.as_ref()),
        to: describe(change.to.as_ref()),
    });
    let review = diff.review.iter().map(|[before, after]| DiffRow {
        category: "review.sample_rate".to_owned(),
        from: before.sample_rate.to_string(),
        to: after.sample_rate.to_string(),
    });
    categories.chain(review).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use moderation_shared::policy::{diff, Mode, PolicyDefaults, PolicyDoc};

    #[test]
    fn a_diff_reads_category_by_category_then_the_sample_rate() {
        let from = PolicyDoc::defaults(&PolicyDefaults::default());
        let mut to = from.clone();
        to.categories.insert(
            "violence".into(),
            Rule {
                mode: Mode::Enforce,
                block_at: 0.7,
                review_at: Some(0.4),
            },
        );
        to.categories.insert(
            "custom.gambling".into(),
            Rule {
                mode: Mode::Observe,
                block_at: 0.6,
                review_at: None,
            },
        );
        to.review.sample_rate = 0.05;

        let rows = diff_rows(&diff(&from, &to));

        let row = |category: &str, from: &str, to: &str| DiffRow {
            category: category.to_owned(),
            from: from.to_owned(),
            to: to.to_owned(),
        };
        assert_eq!(
            rows,
            [
                row("custom.gambling", "not set", "observe, block at 0.6"),
                row(
                    "violence",
                    "enforce, block at 0.5",
                    "enforce, block at 0.7, review from 0.4"
                ),
                row("review.sample_rate", "0", "0.05"),
            ]
        );
    }
}
