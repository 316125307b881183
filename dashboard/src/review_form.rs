//! The decision form of a review item, as typed: a note, what an overturn makes the job
//! (prohibited or allowed) and its categories, and the button pressed (`Uphold` or
//! `Overturn`). It is filled from the job, read back from a posted form, and turned into the
//! `DecisionInput` that `review::decide` checks; a refused form is shown again as typed. A
//! leaf: it imports only [`Fields`] and [`CategoryFlag`].

use std::collections::BTreeMap;

use moderation_shared::review::DecisionInput;

use crate::{form::Fields, job_view::CategoryFlag};

/// The button pressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The job's decision stands (a new revision all the same).
    Uphold,
    /// The job gets the result and categories of the form.
    Overturn,
}

impl Outcome {
    /// The button of a posted form (`outcome`), or why there is none.
    pub fn read(fields: &Fields) -> Result<Self, String> {
        match fields.get("outcome") {
            Some("uphold") => Ok(Self::Uphold),
            Some("overturn") => Ok(Self::Overturn),
            _ => Err("Press Uphold or Overturn.".to_owned()),
        }
    }
}

/// A category's checkbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CategoryChoice {
    /// `nsfw`, `underage`, `ai_adult_general` or `custom.<name>`.
    pub name: String,
    /// Whether an overturn sets it.
    pub checked: bool,
}

/// The form, as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecideForm {
    /// The reviewer's note (required when the outcome changes: `review::decide` says so).
    pub note: String,
    /// Whether an overturn makes the job prohibited.
    pub overturn_prohibits: bool,
    /// The job's categories an overturn may set.
    pub categories: Vec<CategoryChoice>,
}

impl DecideForm {
    /// The form for a job now `is_prohibited` with `flags`: an overturn reverses the result
    /// and keeps the categories until the reviewer changes them.
    pub fn filled(is_prohibited: bool, flags: &[CategoryFlag]) -> Self {
        Self {
            note: String::new(),
            overturn_prohibits: !is_prohibited,
            categories: flags
                .iter()
                .map(|f| CategoryChoice {
                    name: f.name.clone(),
                    checked: f.value,
                })
                .collect(),
        }
    }

    /// The form as posted: the categories it showed (`shown`) and those checked
    /// (`category`).
    pub fn read(fields: &Fields) -> Self {
        let checked: Vec<&str> = fields.all("category").collect();
        Self {
            note: fields.get("note").unwrap_or_default().to_owned(),
            overturn_prohibits: fields.get("result") != Some("allowed"),
            categories: fields
                .all("shown")
                .map(|name| CategoryChoice {
                    name: name.to_owned(),
                    checked: checked.contains(&name),
                })
                .collect(),
        }
    }

    /// The decision `outcome` takes on a job now `is_prohibited` with `flags`, or why the
    /// form is refused: an overturn that changes nothing. An uphold keeps the job's result
    /// and categories whatever the form's overturn part says. A category the job does not
    /// have is passed on, for `review::decide` to refuse.
    pub fn decision(
        &self,
        outcome: Outcome,
        is_prohibited: bool,
        flags: &[CategoryFlag],
    ) -> Result<DecisionInput, String> {
        let note = (!self.note.is_empty()).then(|| self.note.clone());
        if outcome == Outcome::Uphold {
            return Ok(DecisionInput {
                is_prohibited,
                categories: BTreeMap::new(),
                note,
            });
        }
        let categories: BTreeMap<String, bool> = self
            .categories
            .iter()
            .filter(|c| {
                flags
                    .iter()
                    .find(|f| f.name == c.name)
                    .is_none_or(|f| f.value != c.checked)
            })
            .map(|c| (c.name.clone(), c.checked))
            .collect();
        if self.overturn_prohibits == is_prohibited && categories.is_empty() {
            return Err(
                "This overturn changes nothing: choose another result or change a \
                        category, or press Uphold."
                    .to_owned(),
            );
        }
        Ok(DecisionInput {
            is_prohibited: self.overturn_prohibits,
            categories,
            note,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> Vec<CategoryFlag> {
        [("nsfw", true), ("underage", false), ("custom.spam", false)]
            .into_iter()
            .map(|(name, value)| CategoryFlag {
                name: name.to_owned(),
                value,
            })
            .collect()
    }

    fn posted(body: &str) -> Fields {
        Fields::parse(body.as_bytes())
    }

    #[test]
    fn the_filled_form_reverses_the_result_and_keeps_the_categories() {
        let form = DecideForm::filled(true, &flags());

        assert!(!form.overturn_prohibits);
        assert_eq!(
            form.categories
                .iter()
                .map(|c| (c.name.as_str(), c.checked))
                .collect::<Vec<_>>(),
            [("nsfw", true), ("underage", false), ("custom.spam", false)]
        );
    }

    #[test]
    fn an_overturn_sets_the_result_and_only_the_categories_changed() {
        let form = DecideForm::read(&posted(
            "outcome=overturn&note=+Not+nudity%2C+spam+&result=allowed\
             &shown=nsfw&shown=underage&shown=custom.spam&category=custom.spam",
        ));

        let input = form.decision(Outcome::Overturn, true, &flags()).unwrap();

        assert_eq!(
            input,
            DecisionInput {
                is_prohibited: false,
                categories: BTreeMap::from([
                    ("custom.spam".to_owned(), true),
                    ("nsfw".to_owned(), false),
                ]),
                note: Some("Not nudity, spam".to_owned()),
            }
        );
    }

    #[test]
    fn an_uphold_keeps_the_decision_whatever_the_overturn_part_says() {
        let form = DecideForm::read(&posted("result=allowed&shown=nsfw&note="));

        let input = form.decision(Outcome::Uphold, true, &flags()).unwrap();

        assert_eq!(
            input,
            DecisionInput {
                is_prohibited: true,
                categories: BTreeMap::new(),
                note: None,
            }
        );
    }

    #[test]
    fn an_overturn_that_changes_nothing_is_refused_and_an_unknown_category_passed_on() {
        let same = DecideForm::read(&posted("result=prohibited&shown=nsfw&category=nsfw"));
        let unknown = DecideForm::read(&posted(
            "result=prohibited&shown=violence&category=violence",
        ));

        assert!(same
            .decision(Outcome::Overturn, true, &flags())
            .unwrap_err()
            .contains("changes nothing"));
        assert_eq!(
            unknown
                .decision(Outcome::Overturn, true, &flags())
                .unwrap()
                .categories,
            BTreeMap::from([("violence".to_owned(), true)])
        );
    }

    #[test]
    fn the_button_is_read_from_the_form() {
        assert_eq!(
            Outcome::read(&posted("outcome=uphold")),
            Ok(Outcome::Uphold)
        );
        assert_eq!(
            Outcome::read(&posted("outcome=overturn")),
            Ok(Outcome::Overturn)
        );
        assert!(Outcome::read(&posted("outcome=delete")).is_err());
    }
}
