//! Scrubbing of model-written reasons (contract section 3): a reason never contains a run of
//! five or more consecutive words of the submitted text, nor a blocklisted term as written.
//! Each is replaced by `[…]`, and neighbouring replacements merge into one.
//!
//! Words are compared normalised (see [`super::normalise`]), so a quotation with other case,
//! punctuation or spacing is still found. A model may write anything, so control characters
//! (NUL above all, which Postgres refuses in text) are dropped as well.

use std::collections::HashSet;

use super::{normalise::NormalisedText, terms};
use crate::policy::{AccountPolicy, AccountTerm};

/// How many consecutive submitted words make a quotation.
pub const QUOTED_WORDS: usize = 5;

/// What replaces scrubbed text.
pub const REDACTED: &str = "[…]";

/// `reason` without control characters, quotations of `submitted` and terms of the global
/// list or of `account`.
pub fn scrub(reason: &str, submitted: &str, account: &AccountPolicy) -> String {
    let reason = without_controls(reason);
    let reason = reason.as_str();
    let normalised = NormalisedText::new(reason);
    let mut spans = quotations(&normalised, &NormalisedText::new(submitted));
    spans.extend(
        terms::global()
            .find_all(&normalised)
            .into_iter()
            .map(|f| (f.start, f.end)),
    );
    spans.extend(
        account
            .terms
            .find_all(&normalised)
            .into_iter()
            .filter(|f| *f.label == AccountTerm::Blocklist)
            .map(|f| (f.start, f.end)),
    );
    redact(reason, spans)
}

/// A word of normalised text: its letters and the byte range it came from.
struct Word<'a> {
    letters: &'a str,
    start: usize,
    end: usize,
}

fn words(text: &NormalisedText) -> Vec<Word<'_>> {
    let collapsed = text.collapsed();
    let letters = text.letters();
    let mut out = Vec::new();
    let mut offset = 0;
    for word in collapsed.split(' ') {
        if !word.is_empty() {
            let first = text.letter_index(offset);
            let last = text.letter_index(offset + word.len() - 1);
            out.push(Word {
                letters: word,
                start: letters[first].start,
                end: letters[last].end,
            });
        }
        offset += word.len() + 1;
    }
    out
}

/// Byte ranges of `reason` that repeat [`QUOTED_WORDS`] or more consecutive words of
/// `submitted`.
fn quotations(reason: &NormalisedText, submitted: &NormalisedText) -> Vec<(usize, usize)> {
    let submitted = words(submitted);
    if submitted.len() < QUOTED_WORDS {
        return Vec::new();
    }
    let shingles: HashSet<Vec<&str>> = submitted
        .windows(QUOTED_WORDS)
        .map(|w| w.iter().map(|word| word.letters).collect())
        .collect();
    let reason = words(reason);
    reason
        .windows(QUOTED_WORDS)
        .filter(|w| {
            let key: Vec<&str> = w.iter().map(|word| word.letters).collect();
            shingles.contains(&key)
        })
        .map(|w| (w[0].start, w[QUOTED_WORDS - 1].end))
        .collect()
}

/// Replaces the byte ranges `spans` of `text` by [`REDACTED`], merging overlapping and adjacent
/// ranges (only whitespace between them).
/// `text` without control characters; tabs and line breaks become spaces.
fn without_controls(text: &str) -> String {
    text.chars()
        .filter_map(|c| match c {
            '\t' | '\n' | '\r' => Some(' '),
            c if c.is_control() => None,
            c => Some(c),
        })
        .collect()
}

fn redact(text: &str, mut spans: Vec<(usize, usize)>) -> String {
    if spans.is_empty() {
        return text.to_owned();
    }
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 || text[last.1..start].trim().is_empty() => {
                last.1 = last.1.max(end);
            }
            _ => merged.push((start, end)),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in merged {
        out.push_str(&text[at..start]);
        out.push_str(REDACTED);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::Policy;

    #[test]
    fn control_characters_of_a_model_never_reach_the_stored_reason() {
        let reason = scrub(
            "violent\u{0}threat\u{7}\u{9b} found\nhere\u{200b}",
            "",
            &account(&[]),
        );

        assert_eq!(reason, "violentthreat found here\u{200b}");
        assert!(!reason.chars().any(char::is_control));
    }

    fn account(terms: &[&str]) -> AccountPolicy {
        AccountPolicy::new(
            Policy {
                account_terms: terms.iter().map(|t| t.to_string()).collect(),
                ..Policy::default()
            },
            moderation_shared::policy::PolicyDefaults::default(),
        )
    }

    #[test]
    fn a_quotation_of_five_words_is_replaced() {
        let submitted = "Meet me behind the old mill tonight and bring cash";
        let reason = "The user wrote 'behind the old mill tonight', arranging a meeting.";
        assert_eq!(
            scrub(reason, submitted, &account(&[])),
            "The user wrote '[…]', arranging a meeting."
        );
    }

    #[test]
    fn a_run_of_four_words_is_kept() {
        let submitted = "Meet me behind the old mill tonight";
        let reason = "Mentions behind the old mill as a place.";
        assert_eq!(scrub(reason, submitted, &account(&[])), reason);
    }

    #[test]
    fn quotations_in_other_case_spacing_and_punctuation_are_found() {
        let submitted = "I will hurt you tomorrow at school.";
        let reason = "Threat: \"I WILL hurt,  you tomorrow\" (violence).";
        assert_eq!(
            scrub(reason, submitted, &account(&[])),
            "Threat: \"[…]\" (violence)."
        );
    }

    #[test]
    fn a_long_quotation_becomes_one_replacement() {
        let submitted = "one two three four five six seven eight";
        let reason = "It says one two three four five six seven eight and more";
        assert_eq!(
            scrub(reason, submitted, &account(&[])),
            "It says […] and more"
        );
    }

    #[test]
    fn blocklisted_terms_as_written_are_replaced() {
        let reason = "Contains the word B4NANA and a threat to kill yourself.";
        assert_eq!(
            scrub(reason, "", &account(&["banana"])),
            "Contains the word […] and a threat to […]."
        );
    }

    #[test]
    fn a_reason_with_nothing_to_remove_is_unchanged() {
        let reason = "The text describes graphic violence.";
        assert_eq!(
            scrub(
                reason,
                "A story about a battle in the hills",
                &account(&["banana"])
            ),
            reason
        );
    }
}
