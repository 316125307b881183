//! The form making a draft policy version, as typed: one row per policy category (mode,
//! `block_at`, `review_at`), the review sample rate and a note. It is filled from the active
//! version, read back from a posted form, and turned into a version through `policy::amend`,
//! the api's checks; a refused form is shown again with what was typed. A leaf: it imports
//! only [`Fields`].

use moderation_shared::policy::{
    self, Mode, PolicyDoc, ReviewSettings, Rule, CUSTOM_PREFIX, FIXED_CATEGORIES,
};

use crate::form::Fields;

/// The longest note, in characters: the api's limit.
pub const MAX_NOTE_CHARS: usize = 500;

/// The policy categories of an account whose custom categories are `custom` (by name): the
/// fixed ones, then `custom.<name>` for each.
pub fn policy_categories(custom: &[&str]) -> Vec<String> {
    FIXED_CATEGORIES
        .iter()
        .map(|&name| name.to_owned())
        .chain(custom.iter().map(|name| format!("{CUSTOM_PREFIX}{name}")))
        .collect()
}

/// One category's row, as typed.
#[derive(Debug, Clone, PartialEq)]
pub struct CategoryInput {
    /// Its policy name (`violence`, `custom.gambling`).
    pub name: String,
    /// `enforce`, `observe` or `off`.
    pub mode: String,
    /// The score from which `enforce` rejects.
    pub block_at: String,
    /// The score from which `enforce` sends to review; blank: no review band.
    pub review_at: String,
}

impl CategoryInput {
    fn filled(name: &str, rule: &Rule) -> Self {
        Self {
            name: name.to_owned(),
            mode: rule.mode.as_str().to_owned(),
            block_at: rule.block_at.to_string(),
            review_at: rule.review_at.map(|r| r.to_string()).unwrap_or_default(),
        }
    }

    /// Whether `mode` is the row's (its option is selected).
    pub fn is_mode(&self, mode: &str) -> bool {
        self.mode == mode
    }

    /// The rule typed, or why it is not one. The numbers' ranges are `policy::amend`'s to
    /// check.
    fn rule(&self) -> Result<Rule, String> {
        let field = |what: &str| format!("categories.{}.{what}", self.name);
        let mode = self.mode.parse::<Mode>().map_err(|_| {
            format!(
                "{} must be enforce, observe or off, got {:?}",
                field("mode"),
                self.mode
            )
        })?;
        let block_at = number(&field("block_at"), &self.block_at)?;
        let review_at = match self.review_at.as_str() {
            "" => None,
            raw => Some(number(&field("review_at"), raw)?),
        };
        Ok(Rule {
            mode,
            block_at,
            review_at,
        })
    }
}

fn number(field: &str, raw: &str) -> Result<f64, String> {
    raw.parse()
        .map_err(|_| format!("{field} must be a number, got {raw:?}"))
}

/// The draft form, as typed.
#[derive(Debug, Clone, PartialEq)]
pub struct DraftForm {
    /// A row per policy category.
    pub categories: Vec<CategoryInput>,
    /// The review sample rate, from 0 to 1.
    pub sample_rate: String,
    /// What the author says of the draft; blank: none.
    pub note: String,
}

impl DraftForm {
    /// The form filled from `doc` (the active version) for `categories`.
    pub fn filled(doc: &PolicyDoc, categories: &[String]) -> Self {
        Self {
            categories: categories
                .iter()
                .map(|name| CategoryInput::filled(name, &doc.rule(name)))
                .collect(),
            sample_rate: doc.review.sample_rate.to_string(),
            note: String::new(),
        }
    }

    /// The form posted in `fields`. A category the form did not show (made after it was
    /// filled) keeps `base`'s rule.
    pub fn read(fields: &Fields, base: &PolicyDoc, categories: &[String]) -> Self {
        let text = |name: String| fields.get(&name).unwrap_or_default().to_owned();
        Self {
            categories: categories
                .iter()
                .map(|name| match fields.get(&format!("mode.{name}")) {
                    Some(mode) => CategoryInput {
                        name: name.clone(),
                        mode: mode.to_owned(),
                        block_at: text(format!("block_at.{name}")),
                        review_at: text(format!("review_at.{name}")),
                    },
                    None => CategoryInput::filled(name, &base.rule(name)),
                })
                .collect(),
            sample_rate: text("sample_rate".to_owned()),
            note: text("note".to_owned()),
        }
    }

    /// The note: `None` when blank; 1 to [`MAX_NOTE_CHARS`] characters without control
    /// characters, as the api takes it.
    pub fn note(&self) -> Result<Option<&str>, String> {
        let note = self.note.as_str();
        if note.is_empty() {
            return Ok(None);
        }
        if note.chars().count() > MAX_NOTE_CHARS || note.chars().any(char::is_control) {
            return Err(format!(
                "note must be 1 to {MAX_NOTE_CHARS} characters without control characters"
            ));
        }
        Ok(Some(note))
    }

    /// The draft the form makes of `base` (the active version) for an account whose custom
    /// categories are `custom`: the categories whose rule differs from `base`'s are taken
    /// whole and the others copied, as the api does with a body naming only the changed
    /// ones; every value is checked by `policy::amend`.
    pub fn draft(&self, base: &PolicyDoc, custom: &[&str]) -> Result<PolicyDoc, String> {
        let mut changed = Vec::new();
        for row in &self.categories {
            let rule = row.rule()?;
            if rule != base.rule(&row.name) {
                changed.push((row.name.clone(), rule));
            }
        }
        let review = ReviewSettings {
            sample_rate: number("review.sample_rate", &self.sample_rate)?,
        };
        policy::amend(base.clone(), changed, Some(review), custom).map_err(|e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moderation_shared::policy::PolicyDefaults;

    fn base() -> PolicyDoc {
        PolicyDoc::defaults(&PolicyDefaults::default())
    }

    fn posted(pairs: &[(&str, &str)]) -> Fields {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        Fields::parse(body.as_bytes())
    }

    #[test]
    fn a_form_filled_from_a_version_makes_that_version_again() {
        let categories = policy_categories(&["gambling"]);
        let form = DraftForm::filled(&base(), &categories);

        let draft = form.draft(&base(), &["gambling"]).unwrap();

        assert_eq!(form.categories.len(), 7);
        assert_eq!(form.categories[6].name, "custom.gambling");
        assert_eq!(form.categories[6].block_at, "0.45");
        assert_eq!(
            draft,
            base(),
            "an unnamed custom category stays unnamed, so nothing differs"
        );
    }

    #[test]
    fn only_the_rows_changed_are_taken_and_absent_rows_keep_the_base() {
        let categories = policy_categories(&[]);
        let fields = posted(&[
            ("mode.violence", "enforce"),
            ("block_at.violence", " 0.7 "),
            ("review_at.violence", "0.4"),
            ("mode.hate", "observe"),
            ("block_at.hate", "0.5"),
            ("review_at.hate", ""),
            ("sample_rate", "0.1"),
            ("note", "stricter"),
        ]);
        let form = DraftForm::read(&fields, &base(), &categories);

        let draft = form.draft(&base(), &[]).unwrap();

        let diff = policy::diff(&base(), &draft);
        assert_eq!(
            diff.categories.keys().collect::<Vec<_>>(),
            ["hate", "violence"]
        );
        assert_eq!(draft.categories["violence"].review_at, Some(0.4));
        assert_eq!(draft.categories["hate"].mode, Mode::Observe);
        assert_eq!(draft.review.sample_rate, 0.1);
        assert_eq!(form.note(), Ok(Some("stricter")));
    }

    #[test]
    fn bad_values_are_refused_naming_the_field() {
        let categories = policy_categories(&[]);
        let refused = |pairs: &[(&str, &str)]| {
            let mut all = vec![("sample_rate", "0")];
            all.extend_from_slice(pairs);
            DraftForm::read(&posted(&all), &base(), &categories)
                .draft(&base(), &[])
                .unwrap_err()
        };

        let word = refused(&[("mode.nsfw", "enforce"), ("block_at.nsfw", "high")]);
        let mode = refused(&[("mode.nsfw", "block"), ("block_at.nsfw", "0.5")]);
        let range = refused(&[("mode.nsfw", "enforce"), ("block_at.nsfw", "1.5")]);
        let band = refused(&[
            ("mode.nsfw", "enforce"),
            ("block_at.nsfw", "0.5"),
            ("review_at.nsfw", "0.5"),
        ]);
        let rate = DraftForm::read(&posted(&[("sample_rate", "2")]), &base(), &categories)
            .draft(&base(), &[])
            .unwrap_err();
        let blank_rate = DraftForm::read(&posted(&[]), &base(), &categories)
            .draft(&base(), &[])
            .unwrap_err();

        assert_eq!(
            word,
            r#"categories.nsfw.block_at must be a number, got "high""#
        );
        assert!(mode.starts_with("categories.nsfw.mode must be"), "{mode}");
        assert!(
            range.starts_with("categories.nsfw.block_at must be above 0"),
            "{range}"
        );
        assert!(
            band.contains("review_at (0.5) must be below block_at"),
            "{band}"
        );
        assert!(rate.starts_with("review.sample_rate must be from 0 to 1"));
        assert!(blank_rate.starts_with("review.sample_rate must be a number"));
    }

    #[test]
    fn a_note_is_at_most_500_characters_on_one_line() {
        let note = |text: &str| DraftForm {
            categories: Vec::new(),
            sample_rate: "0".to_owned(),
            note: text.to_owned(),
        };

        assert_eq!(note("").note(), Ok(None));
        assert_eq!(note(&"é".repeat(500)).note().map(|n| n.is_some()), Ok(true));
        assert!(note(&"a".repeat(501)).note().is_err());
        assert!(note("two\nlines").note().is_err());
    }
}
