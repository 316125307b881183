//! An account's own policy: custom categories (`/custom-categories`) and blocklist terms
//! (`/blocklist`), both under scope `settings:manage`.
//!
//! Request bodies are strict: unknown properties are 400, and so is `null` for an optional
//! property (leave it out instead). Every change bumps the account's policy version in the same
//! transaction, so workers recompile their cached matchers.

use std::collections::HashSet;

use actix_web::web;
use serde::{Deserialize, Deserializer};

use super::resource;
use crate::error::ApiError;

pub(crate) mod blocklist;
pub(crate) mod categories;

/// The longest keyword or blocklist term, in characters.
pub const MAX_TERM_CHARS: usize = 100;

/// Registers the routes under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/custom-categories")
            .route(web::get().to(categories::list))
            .route(web::post().to(categories::create)),
    )
    .service(
        resource("/custom-categories/{id}")
            .route(web::patch().to(categories::change))
            .route(web::delete().to(categories::delete)),
    )
    .service(
        resource("/blocklist")
            .route(web::get().to(blocklist::list))
            .route(web::post().to(blocklist::add))
            .route(web::delete().to(blocklist::remove)),
    );
}

/// For `#[serde(default, deserialize_with = "present")]`: an absent property is `None`, and a
/// `null` is refused like any other value of the wrong type.
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// Checks a list of keywords or terms: at most `max_count` (at least `min_count`) items, each
/// 1 to [`MAX_TERM_CHARS`] characters once surrounding whitespace is trimmed, with no control
/// characters. Returns them trimmed, duplicates dropped, in their first order.
fn clean_terms(
    field: &str,
    values: Vec<String>,
    min_count: usize,
    max_count: usize,
) -> Result<Vec<String>, ApiError> {
    if values.len() < min_count || values.len() > max_count {
        return Err(ApiError::InvalidRequest(format!(
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
            return Err(ApiError::InvalidRequest(format!(
                "{field}[{index}] must be 1 to {MAX_TERM_CHARS} characters (surrounding \
                 whitespace trimmed), got {chars}"
            )));
        }
        if value.chars().any(char::is_control) {
            return Err(ApiError::InvalidRequest(format!(
                "{field}[{index}] must not contain control characters"
            )));
        }
        if seen.insert(value.to_owned()) {
            out.push(value.to_owned());
        }
    }
    Ok(out)
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
