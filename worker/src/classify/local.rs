//! The local provider: decisions from the blocklists, custom-category keywords and hash banks
//! alone, with no network. It judges only what is listed: a term on a list (however it is
//! disguised) or media whose hash is in a bank. Anything else passes.

use std::collections::BTreeMap;

use moderation_shared::domain::Modality;

use super::{normalise::NormalisedText, terms, CustomCategory, Policy, Verdict, VisualCategories};
use crate::policy::{AccountPolicy, AccountTerm};

/// Checks `text` against the global blocklist, the account's blocklist and its custom
/// categories' keywords. The reason names the list or category, never the matched text.
pub fn check_text(text: &NormalisedText, policy: &AccountPolicy) -> Verdict {
    let global = terms::global().find(text);
    let account = policy.terms.find(text);
    let custom_hit = |category: &CustomCategory| {
        account
            .iter()
            .any(|term| matches!(term, AccountTerm::Custom(name) if *name == category.name))
    };
    let mut verdict = passed(&policy.policy, false);
    for category in &policy.policy.custom {
        if custom_hit(category) {
            verdict.custom.insert(category.name.clone(), true);
        }
    }
    let reason = if let Some(term) = global.first() {
        Some(format!(
            "The content matches the service blocklist ({}).",
            term.category
        ))
    } else if account.contains(&&AccountTerm::Blocklist) {
        Some("The content matches the account's blocklist.".to_owned())
    } else {
        verdict
            .custom
            .iter()
            .find(|(_, hit)| **hit)
            .map(|(name, _)| format!("The content matches the custom category {name}."))
    };
    verdict.prohibited = reason.is_some();
    verdict.reason = reason;
    verdict
}

/// The verdict for media whose hash matched bank entries of `categories` (none: it passes).
/// Entries of a category the account does not run (a custom category it lacks or has
/// disabled, `nsfw` with the NSFW check off) are ignored.
pub fn bank_verdict(modality: Modality, categories: &[String], policy: &Policy) -> Verdict {
    let visual = matches!(modality, Modality::Image | Modality::Video);
    let mut verdict = passed(policy, visual);
    let mut flagged: Option<&str> = None;
    for category in categories {
        let counted = match category.as_str() {
            "ai_adult_general" | "underage" | "nsfw" if !visual => true,
            "ai_adult_general" => set(&mut verdict, |v| v.ai_adult_general = true),
            "underage" => set(&mut verdict, |v| v.underage = true),
            "nsfw" if policy.nsfw_check => set(&mut verdict, |v| v.nsfw = Some(true)),
            "nsfw" => false,
            name => match verdict.custom.get_mut(name) {
                Some(hit) => {
                    *hit = true;
                    true
                }
                None => false,
            },
        };
        if counted && flagged.is_none() {
            flagged = Some(category);
        }
    }
    if let Some(category) = flagged {
        verdict.prohibited = true;
        verdict.reason = Some(format!("The media matches a hash bank entry ({category})."));
    }
    verdict
}

fn set(verdict: &mut Verdict, mark: impl FnOnce(&mut VisualCategories)) -> bool {
    if let Some(visual) = verdict.visual.as_mut() {
        mark(visual);
    }
    true
}

/// A passing verdict in which every custom category of `policy` ran (and found nothing), with
/// the three visual categories for images and videos.
pub fn passed(policy: &Policy, visual: bool) -> Verdict {
    Verdict {
        prohibited: false,
        reason: None,
        visual: visual.then(|| VisualCategories {
            ai_adult_general: false,
            underage: false,
            nsfw: policy.nsfw_check.then_some(false),
        }),
        custom: policy
            .custom
            .iter()
            .map(|category| (category.name.clone(), false))
            .collect(),
        scores: BTreeMap::new(),
        language: None,
    }
}
