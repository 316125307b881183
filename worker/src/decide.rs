//! From what the checks found to the job's decision, through the account's policy versions
//! (contract 13): lists, keyword categories, hash banks and a model server's verdict reject
//! whatever a version says; the built-in models' scores decide through the active version,
//! which also sends a job to review (its band, its sample), and the shadow version's decision
//! is recorded beside it. Pure: no I/O.

use std::collections::BTreeMap;

use moderation_shared::{
    db::jobs::ClaimedJob,
    domain::{Modality, ReviewReason},
    outcome::{Decision, ShadowDecision},
    policy::{self, milli, Applied, Hit, PolicyDoc, CUSTOM_PREFIX},
};

use crate::{classify::Verdict, policy::AccountPolicy};

/// The decision on `job` (of `modality`) from `verdict` under `policy`; `model_set` names the
/// models that scored it.
pub fn decide(
    modality: Modality,
    job: &ClaimedJob,
    verdict: Verdict,
    policy: &AccountPolicy,
    model_set: Option<&str>,
) -> Decision {
    let scores: BTreeMap<String, u16> = verdict
        .scores
        .iter()
        .map(|(category, &score)| (category.clone(), milli(score)))
        .collect();
    let listed = verdict.prohibited;
    let active = policy.active_doc();
    let applied = policy::decide(active, scores.iter().map(|(c, &s)| (c.as_str(), s)));
    let mut review = Vec::new();
    if applied.band {
        review.push(ReviewReason::Band);
    }
    if policy::sampled(job.id.0, active.review.sample_rate) {
        review.push(ReviewReason::Sample);
    }
    let shadow = policy.shadow.as_ref().map(|shadow| {
        let applied = policy::decide(&shadow.doc, scores.iter().map(|(c, &s)| (c.as_str(), s)));
        ShadowDecision {
            policy_version: shadow.version,
            is_prohibited: listed || applied.rejects(),
            categories: categories(modality, job, &verdict, &applied),
        }
    });
    let reason = if listed {
        verdict.reason.clone()
    } else {
        applied.hits.first().map(reason)
    };
    Decision {
        is_prohibited: listed || applied.rejects(),
        reason,
        categories: categories(modality, job, &verdict, &applied),
        scores,
        nsfw_checked: is_visual(modality).then_some(job.nsfw_check),
        listed,
        policy_version: policy.active.as_ref().map(|v| v.version),
        review,
        shadow,
        language: verdict.language.clone(),
        model_set: model_set.map(str::to_owned),
    }
}

fn is_visual(modality: Modality) -> bool {
    matches!(modality, Modality::Image | Modality::Video)
}

/// The job's `categories`: image and video always carry the three (`nsfw` only when the check
/// ran), true where a hash bank or a rejecting score flagged them; any job carries `custom`
/// when a custom category ran, true where its keywords, a hash bank or its score hit.
fn categories(
    modality: Modality,
    job: &ClaimedJob,
    verdict: &Verdict,
    applied: &Applied,
) -> Option<serde_json::Value> {
    let hit = |category: &str| applied.hits.iter().any(|h| h.category == category);
    let mut categories = serde_json::Map::new();
    if is_visual(modality) {
        let visual = verdict.visual.unwrap_or_default();
        categories.insert("ai_adult_general".into(), visual.ai_adult_general.into());
        categories.insert("underage".into(), visual.underage.into());
        if job.nsfw_check {
            let nsfw = visual.nsfw.unwrap_or(false) || hit("nsfw");
            categories.insert("nsfw".into(), nsfw.into());
        }
    }
    if !verdict.custom.is_empty() {
        let custom: serde_json::Map<String, serde_json::Value> = verdict
            .custom
            .iter()
            .map(|(name, &listed)| {
                let hit = listed || hit(&format!("{CUSTOM_PREFIX}{name}"));
                (name.clone(), hit.into())
            })
            .collect();
        categories.insert("custom".into(), custom.into());
    }
    (!categories.is_empty()).then(|| categories.into())
}

/// The reason a rejecting score gives: the category, its score and the threshold, never the
/// content.
fn reason(hit: &Hit) -> String {
    let score = f64::from(hit.score) / 1000.0;
    let threshold = hit.block_at;
    if let Some(name) = hit.category.strip_prefix(CUSTOM_PREFIX) {
        format!(
            "The content matches the custom category {name} by meaning (similarity \
             {score:.3}, threshold {threshold})."
        )
    } else if hit.category == "nsfw" {
        format!("The NSFW model scored the media {score:.3} for nsfw (threshold {threshold}).")
    } else {
        format!(
            "The text model scored {} at {score:.3} (threshold {threshold}).",
            hit.category
        )
    }
}

impl AccountPolicy {
    /// The active version's rules (the service defaults for an account without versions).
    pub fn active_doc(&self) -> &PolicyDoc {
        self.active.as_ref().map_or(&self.defaults, |v| &v.doc)
    }
}

#[cfg(test)]
mod tests {
    use moderation_shared::{
        db::policy_versions::PolicyVersion,
        domain::{AccountId, JobId, PolicyMode, PolicyStatus},
        policy::{PolicyDefaults, Rule},
    };

    use super::*;
    use crate::classify::{CustomCategory, Policy, VisualCategories};

    fn job(nsfw_check: bool) -> ClaimedJob {
        ClaimedJob {
            id: JobId::new(),
            account_id: AccountId::new(),
            content: Some(String::new()),
            messages: None,
            attempts: 1,
            nsfw_check,
            settings_stamp: 0,
        }
    }

    fn version(number: i32, rules: &[(&str, PolicyMode, f64, Option<f64>)]) -> PolicyVersion {
        let mut doc = PolicyDoc::defaults(&PolicyDefaults::default());
        for &(name, mode, block_at, review_at) in rules {
            doc.categories.insert(
                name.to_owned(),
                Rule {
                    mode,
                    block_at,
                    review_at,
                },
            );
        }
        PolicyVersion {
            version: number,
            status: PolicyStatus::Active,
            note: None,
            doc,
            created_at: time::OffsetDateTime::UNIX_EPOCH,
            activated_at: None,
        }
    }

    fn account(active: PolicyVersion, shadow: Option<PolicyVersion>) -> AccountPolicy {
        let mut policy = AccountPolicy::new(
            Policy {
                nsfw_check: true,
                custom: vec![CustomCategory {
                    name: "gambling".into(),
                    description: "Betting".into(),
                    keywords: Vec::new(),
                }],
                account_terms: Vec::new(),
            },
            PolicyDefaults::default(),
        );
        policy.active = Some(active);
        policy.shadow = shadow;
        policy
    }

    fn scored(scores: &[(&str, f32)]) -> Verdict {
        Verdict {
            scores: scores.iter().map(|&(c, s)| (c.to_owned(), s)).collect(),
            custom: [("gambling".to_owned(), false)].into(),
            ..Verdict::default()
        }
    }

    #[test]
    fn the_active_version_rejects_and_names_the_category_and_its_threshold() {
        let policy = account(
            version(3, &[("violence", PolicyMode::Enforce, 0.7, None)]),
            None,
        );
        let decision = decide(
            Modality::Text,
            &job(true),
            scored(&[("violence", 0.71)]),
            &policy,
            None,
        );
        assert!(decision.is_prohibited);
        assert_eq!(decision.policy_version, Some(3));
        assert_eq!(
            decision.reason.as_deref(),
            Some("The text model scored violence at 0.710 (threshold 0.7).")
        );
        let passed = decide(
            Modality::Text,
            &job(true),
            scored(&[("violence", 0.69)]),
            &policy,
            None,
        );
        assert!(!passed.is_prohibited);
        assert_eq!(passed.scores["violence"], 690);
    }

    #[test]
    fn an_observed_category_never_rejects_but_keeps_its_score() {
        let policy = account(
            version(2, &[("sexual", PolicyMode::Observe, 0.1, None)]),
            None,
        );
        let decision = decide(
            Modality::Text,
            &job(true),
            scored(&[("sexual", 0.99)]),
            &policy,
            None,
        );
        assert!(!decision.is_prohibited);
        assert_eq!(decision.scores["sexual"], 990);
    }

    #[test]
    fn a_score_in_the_band_goes_to_review_and_the_shadow_is_recorded() {
        let policy = account(
            version(2, &[("hate", PolicyMode::Enforce, 0.8, Some(0.4))]),
            Some(version(5, &[("hate", PolicyMode::Enforce, 0.5, None)])),
        );
        let decision = decide(
            Modality::Text,
            &job(true),
            scored(&[("hate", 0.6)]),
            &policy,
            None,
        );
        assert!(!decision.is_prohibited);
        assert_eq!(decision.review, vec![ReviewReason::Band]);
        let shadow = decision.shadow.unwrap();
        assert_eq!(shadow.policy_version, 5);
        assert!(shadow.is_prohibited);
    }

    #[test]
    fn a_list_hit_rejects_whatever_the_version_says() {
        let policy = account(
            version(2, &[("violence", PolicyMode::Off, 0.5, None)]),
            None,
        );
        let verdict = Verdict {
            prohibited: true,
            reason: Some("The content matches the account's blocklist.".into()),
            ..scored(&[])
        };
        let decision = decide(Modality::Text, &job(true), verdict, &policy, None);
        assert!(decision.is_prohibited);
        assert!(decision.listed);
        assert!(decision.scores.is_empty());
    }

    #[test]
    fn nsfw_and_custom_hits_set_their_categories() {
        let policy = account(
            version(
                2,
                &[
                    ("nsfw", PolicyMode::Enforce, 0.3, None),
                    ("custom.gambling", PolicyMode::Enforce, 0.6, None),
                ],
            ),
            None,
        );
        let verdict = Verdict {
            visual: Some(VisualCategories {
                nsfw: Some(false),
                ..VisualCategories::default()
            }),
            ..scored(&[("nsfw", 0.35), ("custom.gambling", 0.61)])
        };
        let decision = decide(Modality::Image, &job(true), verdict, &policy, Some("abc"));
        let categories = decision.categories.unwrap();
        assert_eq!(categories["nsfw"], true);
        assert_eq!(categories["custom"]["gambling"], true);
        assert_eq!(decision.nsfw_checked, Some(true));
        assert_eq!(decision.model_set.as_deref(), Some("abc"));
    }
}
