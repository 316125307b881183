//! A job's decision in words and rows, as the job and review pages show it: the verdict, the
//! model scores and the categories. A leaf: it imports nothing of the crate.

use serde_json::Value;

/// A decision as a word: `prohibited`, `allowed`, or empty while undecided.
pub fn verdict(is_prohibited: Option<bool>) -> &'static str {
    match is_prohibited {
        Some(true) => "prohibited",
        Some(false) => "allowed",
        None => "",
    }
}

/// A model score of a job, as the pages show it.
#[derive(Debug, PartialEq)]
pub struct ScoreRow {
    /// The category scored.
    pub name: String,
    /// From 0 to 1.
    pub value: f64,
    /// The value with two decimals.
    pub shown: String,
}

/// The rows of a job's `scores` (an object of name to number), by name; anything that is not
/// a number is left out.
pub fn score_rows(scores: Option<&Value>) -> Vec<ScoreRow> {
    let Some(Value::Object(scores)) = scores else {
        return Vec::new();
    };
    let mut rows: Vec<ScoreRow> = scores
        .iter()
        .filter_map(|(name, value)| {
            value.as_f64().map(|value| ScoreRow {
                name: name.clone(),
                value,
                shown: format!("{value:.2}"),
            })
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    rows
}

/// One of a job's categories, as a reviewer may set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CategoryFlag {
    /// Its name as a decision names it: `nsfw`, `underage`, `ai_adult_general`, or
    /// `custom.<name>`.
    pub name: String,
    /// Whether it is set.
    pub value: bool,
}

/// The categories of a job's `categories` a reviewer may set: each true/false at the top and
/// each of `custom`, as `custom.<name>`, in that order and by name.
pub fn category_flags(categories: Option<&Value>) -> Vec<CategoryFlag> {
    let Some(Value::Object(categories)) = categories else {
        return Vec::new();
    };
    let flag =
        |name: String, value: &Value| value.as_bool().map(|value| CategoryFlag { name, value });
    let top = categories
        .iter()
        .filter_map(|(name, value)| flag(name.clone(), value));
    let custom = categories
        .get("custom")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(name, value)| flag(format!("custom.{name}"), value));
    let mut flags: Vec<CategoryFlag> = top.collect();
    flags.sort_by(|a, b| a.name.cmp(&b.name));
    let mut custom: Vec<CategoryFlag> = custom.collect();
    custom.sort_by(|a, b| a.name.cmp(&b.name));
    flags.extend(custom);
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_listed_by_name_and_non_numbers_left_out() {
        let scores = serde_json::json!({"violence": 0.126, "harassment": 0.9, "note": "x"});
        let rows = score_rows(Some(&scores));
        assert_eq!(
            rows,
            [
                ScoreRow {
                    name: "harassment".to_owned(),
                    value: 0.9,
                    shown: "0.90".to_owned()
                },
                ScoreRow {
                    name: "violence".to_owned(),
                    value: 0.126,
                    shown: "0.13".to_owned()
                },
            ]
        );
        assert!(score_rows(None).is_empty());
        assert!(score_rows(Some(&serde_json::json!([0.5]))).is_empty());
    }

    #[test]
    fn categories_are_the_top_flags_then_the_custom_ones() {
        let categories = serde_json::json!({
            "underage": false, "nsfw": true, "ai_adult_general": false,
            "custom": {"spam": false, "gambling": true}
        });

        let flags = category_flags(Some(&categories));

        let flag = |name: &str, value: bool| CategoryFlag {
            name: name.to_owned(),
            value,
        };
        assert_eq!(
            flags,
            [
                flag("ai_adult_general", false),
                flag("nsfw", true),
                flag("underage", false),
                flag("custom.gambling", true),
                flag("custom.spam", false),
            ]
        );
        assert!(category_flags(None).is_empty());
    }
}
