//! The rules for an account's own policy input (custom categories and blocklist terms), shared
//! by the api's endpoints and the dashboard's forms.

use std::collections::HashSet;

/// Input that breaks a rule; the message names the field and the rule.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidPolicy(pub String);

/// The longest keyword or blocklist term, in characters.
pub const MAX_TERM_CHARS: usize = 100;
/// The longest name, in characters (`a-z`, `0-9`, `_`).
pub const MAX_NAME_CHARS: usize = 64;
/// The longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 2000;
/// The most keywords of one category.
pub const MAX_KEYWORDS: usize = 100;

/// Checks a list of keywords or terms: at most `max_count` (at least `min_count`) items, each
/// 1 to [`MAX_TERM_CHARS`] characters once surrounding whitespace is trimmed, with no control
/// characters. Returns them trimmed, duplicates dropped, in their first order.
pub fn clean_terms(
    field: &str,
    values: Vec<String>,
    min_count: usize,
    max_count: usize,
) -> Result<Vec<String>, InvalidPolicy> {
    if values.len() < min_count || values.len() > max_count {
        return Err(InvalidPolicy(format!(
            "{field} must hold {min_count} to {max_count} items, got {}",
            values.len()
        )));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(values.len());
    for (index, value) in values.into_iter().enumerate() {
        let value = value.trim();
        let chars = value.chars().count();
        if chars == 0 || chars > MAX_TERM_CHARS {
            return Err(InvalidPolicy(format!(
                "{field}[{index}] must be 1 to {MAX_TERM_CHARS} characters (surrounding \
                 whitespace trimmed), got {chars}"
            )));
        }
        if value.chars().any(char::is_control) {
            return Err(InvalidPolicy(format!(
                "{field}[{index}] must not contain control characters"
            )));
        }
        if seen.insert(value.to_owned()) {
            out.push(value.to_owned());
        }
    }
    Ok(out)
}

/// A slug: 1 to 64 of `a-z`, `0-9` and `_`.
pub fn check_name(name: &str) -> Result<(), InvalidPolicy> {
    let valid = (1..=MAX_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(InvalidPolicy(format!(
            "name must be 1 to {MAX_NAME_CHARS} characters of a-z, 0-9 and _"
        )))
    }
}

/// 1 to 2000 characters, not only whitespace; line breaks and tabs are allowed, other control
/// characters are not.
pub fn check_description(description: &str) -> Result<(), InvalidPolicy> {
    let chars = description.chars().count();
    if chars == 0 || chars > MAX_DESCRIPTION_CHARS || description.trim().is_empty() {
        return Err(InvalidPolicy(format!(
            "description must be 1 to {MAX_DESCRIPTION_CHARS} characters and not only \
             whitespace, got {chars}"
        )));
    }
    if description
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(InvalidPolicy(
            "description must not contain control characters other than line breaks and tabs"
                .to_owned(),
        ));
    }
    Ok(())
}

/// Checks a category's keywords: at most [`MAX_KEYWORDS`], each as [`clean_terms`] says.
pub fn clean_keywords(keywords: Vec<String>) -> Result<Vec<String>, InvalidPolicy> {
    clean_terms("keywords", keywords, 0, MAX_KEYWORDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    #[test]
    fn terms_are_trimmed_and_deduplicated_in_first_order() {
        let cleaned = clean_terms("terms", strings(&[" b ", "a", "b", "a "]), 1, 10).unwrap();

        assert_eq!(cleaned, strings(&["b", "a"]));
    }

    #[test]
    fn a_term_is_limited_to_one_hundred_characters() {
        let at_limit = "é".repeat(MAX_TERM_CHARS);
        let over = "é".repeat(MAX_TERM_CHARS + 1);

        assert!(clean_terms("terms", vec![at_limit], 1, 1).is_ok());
        assert!(clean_terms("terms", vec![over], 1, 1).is_err());
        assert!(clean_terms("terms", strings(&["  "]), 1, 1).is_err());
        assert!(clean_terms("terms", strings(&["a\u{7}b"]), 1, 1).is_err());
    }

    #[test]
    fn the_item_count_is_checked_before_the_items() {
        assert!(clean_terms("terms", vec![], 0, 2).is_ok());
        assert!(clean_terms("terms", vec![], 1, 2).is_err());
        assert!(clean_terms("terms", strings(&["a", "b", "c"]), 1, 2).is_err());
    }
}
