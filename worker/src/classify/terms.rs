//! Term matching: one Aho-Corasick automaton over normalised terms, matched on word boundaries
//! of normalised text (see [`super::normalise`]).

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, MatchKind};

use super::normalise::NormalisedText;

/// One term as the automaton sees it.
#[derive(Debug)]
struct Term<L> {
    /// The run length of each of its letters.
    runs: Vec<u32>,
    label: L,
}

/// A set of terms, each with a label saying what it flags.
#[derive(Debug)]
pub struct TermMatcher<L> {
    automaton: Option<AhoCorasick>,
    /// Per automaton pattern: the terms with that collapsed spelling.
    terms: Vec<Vec<Term<L>>>,
}

/// Where a term was found: a byte range of the original text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found<'a, L> {
    /// What the term flags.
    pub label: &'a L,
    /// Start of the match in the original text.
    pub start: usize,
    /// End of the match in the original text.
    pub end: usize,
}

impl<L> TermMatcher<L> {
    /// Compiles `terms`; a term that normalises to nothing is dropped.
    pub fn new(terms: impl IntoIterator<Item = (String, L)>) -> Self {
        let mut patterns: Vec<String> = Vec::new();
        let mut grouped: Vec<Vec<Term<L>>> = Vec::new();
        let mut index = std::collections::HashMap::new();
        for (term, label) in terms {
            let normalised = NormalisedText::new(&term);
            if normalised.is_empty() {
                continue;
            }
            let runs = normalised.letters().iter().map(|l| l.run).collect();
            let pattern = normalised.collapsed().to_owned();
            let slot = *index.entry(pattern.clone()).or_insert_with(|| {
                patterns.push(pattern);
                grouped.push(Vec::new());
                grouped.len() - 1
            });
            grouped[slot].push(Term { runs, label });
        }
        let automaton = if patterns.is_empty() {
            None
        } else {
            AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .build(&patterns)
                .ok()
        };
        Self {
            automaton,
            terms: grouped,
        }
    }

    /// Whether it holds no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Every occurrence of a term in `text` on word boundaries, in order.
    pub fn find_all<'a>(&'a self, text: &NormalisedText) -> Vec<Found<'a, L>> {
        let Some(automaton) = &self.automaton else {
            return Vec::new();
        };
        let letters = text.letters();
        let collapsed = text.collapsed();
        let mut found = Vec::new();
        for m in automaton.find_overlapping_iter(collapsed) {
            let first = text.letter_index(m.start());
            let end = text.letter_index(m.end());
            let before_ok = first == 0 || letters[first - 1].ch == ' ';
            let after_ok = end >= letters.len() || letters[end].ch == ' ';
            if !before_ok || !after_ok {
                continue;
            }
            for term in &self.terms[m.pattern().as_usize()] {
                let long_enough = term
                    .runs
                    .iter()
                    .zip(&letters[first..end])
                    .all(|(need, letter)| letter.run >= *need);
                if long_enough {
                    found.push(Found {
                        label: &term.label,
                        start: letters[first].start,
                        end: letters[end - 1].end,
                    });
                }
            }
        }
        found
    }

    /// The distinct labels of the terms found in `text`, in order of first occurrence.
    pub fn find<'a>(&'a self, text: &NormalisedText) -> Vec<&'a L>
    where
        L: PartialEq,
    {
        let mut labels: Vec<&L> = Vec::new();
        for found in self.find_all(text) {
            if !labels.contains(&found.label) {
                labels.push(found.label);
            }
        }
        labels
    }
}

/// A term of the service's global blocklist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalTerm {
    /// The category it belongs to, named in reasons (`violence`, `self_harm`, ...).
    pub category: String,
}

/// The global blocklist shipped with the service (`worker/data/blocklist.txt`).
const GLOBAL_LIST: &str = include_str!("../../data/blocklist.txt");

/// The global blocklist, compiled once.
pub fn global() -> &'static TermMatcher<GlobalTerm> {
    static GLOBAL: LazyLock<TermMatcher<GlobalTerm>> =
        LazyLock::new(|| TermMatcher::new(parse_list(GLOBAL_LIST)));
    &GLOBAL
}

/// Parses `category<TAB>term` lines; blank lines and `#` comments are skipped.
fn parse_list(list: &str) -> Vec<(String, GlobalTerm)> {
    list.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split_once('\t'))
        .map(|(category, term)| {
            (
                term.trim().to_owned(),
                GlobalTerm {
                    category: category.trim().to_owned(),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(terms: &[&str]) -> TermMatcher<String> {
        TermMatcher::new(terms.iter().map(|t| (t.to_string(), t.to_string())))
    }

    fn hits(m: &TermMatcher<String>, text: &str) -> Vec<String> {
        m.find(&NormalisedText::new(text))
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn evasion_variants_of_a_term_are_caught() {
        let m = matcher(&["kill", "ass", "cunt"]);
        for text in [
            "I will KILL you",
            "i will ｋｉｌｌ you",
            "k\u{200B}i\u{200D}ll",
            "kïll them",
            "кіll",
            "k1ll",
            "kiiiiiill",
            "k i l l",
            "k.i.l.l",
            "what a 4ss",
            "@ss",
            "cuuunt",
            "c\u{0308}unt",
        ] {
            assert!(!hits(&m, text).is_empty(), "missed {text:?}");
        }
    }

    #[test]
    fn innocent_words_that_contain_a_term_pass() {
        let m = matcher(&["kill", "ass", "cunt", "tit"]);
        for text in [
            "Scunthorpe United won",
            "a useful skill",
            "the assassin class",
            "as long as it takes",
            "a kiln for pottery",
            "the title of the petition",
            "passed with distinction",
            "ki energy",
        ] {
            assert!(hits(&m, text).is_empty(), "flagged {text:?}");
        }
    }

    #[test]
    fn multi_word_terms_match_across_spacing_and_punctuation() {
        let m = matcher(&["kill yourself"]);
        assert_eq!(hits(&m, "just KILL...   yourself!"), vec!["kill yourself"]);
        assert!(hits(&m, "kill your self-doubt").is_empty());
    }

    #[test]
    fn found_ranges_point_at_the_text_as_written() {
        let m = matcher(&["kill"]);
        let text = "Do not k1ll it";
        let found = m.find_all(&NormalisedText::new(text));
        assert_eq!(found.len(), 1);
        assert_eq!(&text[found[0].start..found[0].end], "k1ll");
    }

    #[test]
    fn labels_are_distinct_and_terms_that_normalise_to_nothing_are_dropped() {
        let m = TermMatcher::new([
            ("kill".to_string(), 1),
            ("KILL".to_string(), 1),
            ("k1ll".to_string(), 2),
            ("...".to_string(), 3),
        ]);
        assert_eq!(m.find(&NormalisedText::new("kill kill")), vec![&1, &2]);
        assert!(TermMatcher::<u8>::new([("  ".to_string(), 0)]).is_empty());
        assert!(m.find(&NormalisedText::new("")).is_empty());
    }

    #[test]
    fn the_global_list_parses_and_flags_its_terms_with_their_category() {
        let list = parse_list(GLOBAL_LIST);
        assert!(list.len() >= 20, "the global list has {} terms", list.len());
        let found = global().find(&NormalisedText::new("I will kill you tomorrow"));
        assert_eq!(found[0].category, "violence");
        assert!(global()
            .find(&NormalisedText::new(
                "What a lovely day for a picnic with friends."
            ))
            .is_empty());
    }
}
