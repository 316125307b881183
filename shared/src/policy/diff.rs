//! What changed between two versions: the audit log's detail of a policy change and the
//! dashboard's comparison with the active version.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{PolicyDoc, ReviewSettings, Rule};

/// One category's rule before and after (`None`: the version does not name it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CategoryChange {
    /// The rule in the first version.
    pub from: Option<Rule>,
    /// The rule in the second.
    pub to: Option<Rule>,
}

/// The differences between two versions; empty when they decide alike.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PolicyDiff {
    /// The categories whose rule differs, by name.
    pub categories: BTreeMap<String, CategoryChange>,
    /// The review settings, when they differ: `[before, after]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<[ReviewSettings; 2]>,
}

impl PolicyDiff {
    /// Whether nothing differs.
    pub fn is_empty(&self) -> bool {
        self.categories.is_empty() && self.review.is_none()
    }
}

/// What `to` changes of `from`.
pub fn diff(from: &PolicyDoc, to: &PolicyDoc) -> PolicyDiff {
    let mut categories = BTreeMap::new();
    for name in from.categories.keys().chain(to.categories.keys()) {
        let (before, after) = (from.categories.get(name), to.categories.get(name));
        if before != after {
            categories.insert(
                name.clone(),
                CategoryChange {
                    from: before.copied(),
                    to: after.copied(),
                },
            );
        }
    }
    PolicyDiff {
        categories,
        review: (from.review != to.review).then_some([from.review, to.review]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Mode, PolicyDefaults};

    #[test]
    fn a_diff_names_only_what_changed() {
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
        to.categories
            .insert("custom.gambling".into(), Rule::enforce(0.6));
        to.review.sample_rate = 0.1;
        let diff = diff(&from, &to);
        assert_eq!(
            diff.categories.keys().collect::<Vec<_>>(),
            ["custom.gambling", "violence"]
        );
        assert_eq!(diff.categories["custom.gambling"].from, None);
        assert!(diff.review.is_some());
        assert!(super::diff(&from, &from).is_empty());
    }
}
