//! Reading the model's answer: a chat completion's content, then the verdict inside it. Any
//! doubt (a refusal, a cut answer, JSON that does not match the schema) is a [`Problem`] to
//! retry, never a pass. Error descriptions name keys, never the values the model wrote.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::error::Problem;
use crate::classify::{Policy, Verdict, VisualCategories};

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<Message>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    content: Option<Value>,
    refusal: Option<Value>,
}

/// The content of the first choice of a chat completion `body`.
pub(super) fn completion_content(body: &[u8]) -> Result<String, Problem> {
    let completion: Completion = serde_json::from_slice(body)
        .map_err(|_| Problem::Invalid("the completion is not a chat completion object".into()))?;
    let choice = completion
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| Problem::Invalid("the completion has no choices".into()))?;
    let message = choice
        .message
        .ok_or_else(|| Problem::Invalid("the choice has no message".into()))?;
    let refused = match &message.refusal {
        None | Some(Value::Null) => false,
        Some(Value::String(refusal)) => !refusal.is_empty(),
        Some(_) => true,
    };
    if refused {
        return Err(Problem::Refusal);
    }
    match choice.finish_reason.as_deref() {
        Some("length") => return Err(Problem::Truncated),
        Some("content_filter") => return Err(Problem::Filtered),
        _ => {}
    }
    match message.content {
        Some(Value::String(content)) => Ok(content),
        _ => Err(Problem::Invalid("the message has no text content".into())),
    }
}

/// The verdict of a text check from the model's `content`.
pub(super) fn text_verdict(content: &str, policy: &Policy) -> Result<Verdict, Problem> {
    let answer = parse_object(content)?;
    let flagged = boolean(&answer, "prohibited")?;
    let custom = custom_results(&answer, policy)?;
    let mut hits: Vec<String> = hit_names(&custom);
    if flagged && hits.is_empty() {
        hits.push("the baseline policy".to_owned());
    }
    Ok(Verdict {
        language: None,
        prohibited: !hits.is_empty(),
        reason: reason(&answer, &hits)?,
        visual: None,
        custom,
        scores: BTreeMap::new(),
    })
}

/// The verdict of an image or video check from the model's `content`. `nsfw` is read only
/// when the account's NSFW check is on, and ignored otherwise.
pub(super) fn visual_verdict(content: &str, policy: &Policy) -> Result<Verdict, Problem> {
    let answer = parse_object(content)?;
    let visual = VisualCategories {
        ai_adult_general: boolean(&answer, "ai_adult_general")?,
        underage: boolean(&answer, "underage")?,
        nsfw: if policy.nsfw_check {
            Some(boolean(&answer, "nsfw")?)
        } else {
            None
        },
    };
    let custom = custom_results(&answer, policy)?;
    let mut hits = Vec::new();
    for (name, hit) in [
        ("ai_adult_general", visual.ai_adult_general),
        ("underage", visual.underage),
        ("nsfw", visual.nsfw == Some(true)),
    ] {
        if hit {
            hits.push(name.to_owned());
        }
    }
    hits.extend(hit_names(&custom));
    Ok(Verdict {
        language: None,
        prohibited: !hits.is_empty(),
        reason: reason(&answer, &hits)?,
        visual: Some(visual),
        custom,
        scores: BTreeMap::new(),
    })
}

/// The `text` of a transcription response body.
pub(super) fn transcript(body: &[u8]) -> Result<String, Problem> {
    #[derive(Deserialize)]
    struct Transcription {
        text: String,
    }
    serde_json::from_slice::<Transcription>(body)
        .map(|answer| answer.text)
        .map_err(|_| Problem::Invalid("the transcription has no text".into()))
}

/// Parses `content` as one JSON object. A Markdown code fence around it (some models add one
/// in `json_object` mode) is tolerated.
fn parse_object(content: &str) -> Result<Map<String, Value>, Problem> {
    let trimmed = content.trim();
    let unfenced = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|inner| inner.strip_suffix("```"))
        .unwrap_or(trimmed);
    match serde_json::from_str(unfenced.trim()) {
        Ok(Value::Object(answer)) => Ok(answer),
        Ok(_) => Err(Problem::Invalid("the answer is not a JSON object".into())),
        Err(_) => Err(Problem::Invalid("the answer is not JSON".into())),
    }
}

fn boolean(object: &Map<String, Value>, key: &str) -> Result<bool, Problem> {
    match object.get(key) {
        Some(Value::Bool(value)) => Ok(*value),
        Some(_) => Err(Problem::Invalid(format!("{key} is not a boolean"))),
        None => Err(Problem::Invalid(format!("{key} is missing"))),
    }
}

/// One result per custom category of `policy`; each must be in the answer's `custom` object.
fn custom_results(
    answer: &Map<String, Value>,
    policy: &Policy,
) -> Result<BTreeMap<String, bool>, Problem> {
    if policy.custom.is_empty() {
        return Ok(BTreeMap::new());
    }
    let Some(Value::Object(custom)) = answer.get("custom") else {
        return Err(Problem::Invalid(
            "custom is missing or not an object".into(),
        ));
    };
    policy
        .custom
        .iter()
        .map(|category| {
            boolean(custom, &category.name)
                .map(|hit| (category.name.clone(), hit))
                .map_err(|_| {
                    Problem::Invalid(format!(
                        "custom.{} is missing or not a boolean",
                        category.name
                    ))
                })
        })
        .collect()
}

fn hit_names(custom: &BTreeMap<String, bool>) -> Vec<String> {
    custom
        .iter()
        .filter(|(_, hit)| **hit)
        .map(|(name, _)| format!("custom category {name}"))
        .collect()
}

/// The model's reason when something was hit; when the model gave none, a sentence naming
/// what was hit. `None` when nothing was.
fn reason(answer: &Map<String, Value>, hits: &[String]) -> Result<Option<String>, Problem> {
    let given = match answer.get("reason") {
        Some(Value::String(reason)) => reason.trim(),
        Some(_) => return Err(Problem::Invalid("reason is not a string".into())),
        None => return Err(Problem::Invalid("reason is missing".into())),
    };
    if hits.is_empty() {
        return Ok(None);
    }
    Ok(Some(if given.is_empty() {
        format!("The model flagged the content: {}.", hits.join(", "))
    } else {
        given.to_owned()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::CustomCategory;

    fn policy(nsfw_check: bool, custom: &[&str]) -> Policy {
        Policy {
            nsfw_check,
            custom: custom
                .iter()
                .map(|name| CustomCategory {
                    name: (*name).to_owned(),
                    description: "A policy.".to_owned(),
                    keywords: vec![],
                })
                .collect(),
            account_terms: vec![],
        }
    }

    fn completion(message: Value, finish_reason: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "choices": [{ "index": 0, "message": message, "finish_reason": finish_reason }]
        }))
        .unwrap()
    }

    #[test]
    fn the_content_of_a_finished_completion_is_returned() {
        let body = completion(
            serde_json::json!({ "role": "assistant", "content": "{}", "refusal": null }),
            "stop",
        );
        assert_eq!(completion_content(&body).unwrap(), "{}");
    }

    #[test]
    fn a_refusal_a_cut_answer_and_a_filtered_one_are_problems() {
        let refused = completion(
            serde_json::json!({ "role": "assistant", "content": null, "refusal": "No." }),
            "stop",
        );
        assert_eq!(completion_content(&refused), Err(Problem::Refusal));
        let cut = completion(
            serde_json::json!({ "role": "assistant", "content": "{\"reas" }),
            "length",
        );
        assert_eq!(completion_content(&cut), Err(Problem::Truncated));
        let filtered = completion(
            serde_json::json!({ "role": "assistant", "content": "" }),
            "content_filter",
        );
        assert_eq!(completion_content(&filtered), Err(Problem::Filtered));
        assert!(matches!(
            completion_content(b"<html>"),
            Err(Problem::Invalid(_))
        ));
        assert!(matches!(
            completion_content(b"{\"choices\": []}"),
            Err(Problem::Invalid(_))
        ));
    }

    #[test]
    fn a_text_verdict_has_one_entry_per_custom_category() {
        let policy = policy(false, &["gambling", "spam"]);
        let verdict = text_verdict(
            r#"{"reason": "Advertises a casino.", "prohibited": false,
                "custom": {"gambling": true, "spam": false}}"#,
            &policy,
        )
        .unwrap();
        assert!(verdict.prohibited, "a custom hit prohibits");
        assert_eq!(verdict.reason.as_deref(), Some("Advertises a casino."));
        assert_eq!(verdict.custom.len(), 2);
        assert!(verdict.custom["gambling"]);
        assert!(!verdict.custom["spam"]);
        assert_eq!(verdict.visual, None);
    }

    #[test]
    fn a_passing_text_verdict_has_no_reason() {
        let verdict = text_verdict(
            r#"{"reason": "Nothing applies.", "prohibited": false}"#,
            &Policy::default(),
        )
        .unwrap();
        assert!(!verdict.prohibited);
        assert_eq!(verdict.reason, None);
    }

    #[test]
    fn a_prohibition_without_a_reason_gets_one_naming_the_hit() {
        let verdict = text_verdict(
            r#"```json
            {"reason": "", "prohibited": true}
            ```"#,
            &Policy::default(),
        )
        .unwrap();
        assert!(verdict.prohibited);
        assert_eq!(
            verdict.reason.as_deref(),
            Some("The model flagged the content: the baseline policy.")
        );
    }

    #[test]
    fn answers_missing_a_key_or_with_a_wrong_type_are_invalid() {
        let policy = policy(false, &["gambling"]);
        for content in [
            "not json",
            "[true]",
            r#"{"prohibited": false, "custom": {"gambling": false}}"#,
            r#"{"reason": "", "custom": {"gambling": false}}"#,
            r#"{"reason": "", "prohibited": "no", "custom": {"gambling": false}}"#,
            r#"{"reason": "", "prohibited": false}"#,
            r#"{"reason": "", "prohibited": false, "custom": {}}"#,
            r#"{"reason": 1, "prohibited": false, "custom": {"gambling": false}}"#,
        ] {
            assert!(
                matches!(text_verdict(content, &policy), Err(Problem::Invalid(_))),
                "{content}"
            );
        }
    }

    #[test]
    fn a_visual_verdict_ignores_nsfw_when_the_check_is_off() {
        let content = r#"{"reason": "", "ai_adult_general": false, "underage": false,
                          "nsfw": true}"#;
        let verdict = visual_verdict(content, &policy(false, &[])).unwrap();
        assert!(!verdict.prohibited);
        assert_eq!(verdict.visual.unwrap().nsfw, None);
        let verdict = visual_verdict(content, &policy(true, &[])).unwrap();
        assert!(verdict.prohibited);
        assert_eq!(verdict.visual.unwrap().nsfw, Some(true));
    }

    #[test]
    fn a_visual_verdict_needs_nsfw_when_the_check_is_on() {
        let content = r#"{"reason": "", "ai_adult_general": false, "underage": false}"#;
        assert!(visual_verdict(content, &policy(false, &[])).is_ok());
        assert!(matches!(
            visual_verdict(content, &policy(true, &[])),
            Err(Problem::Invalid(_))
        ));
    }

    #[test]
    fn any_visual_category_prohibits() {
        let verdict = visual_verdict(
            r#"{"reason": "Shows a child.", "ai_adult_general": false, "underage": true,
                "custom": {"weapons": false}}"#,
            &policy(false, &["weapons"]),
        )
        .unwrap();
        assert!(verdict.prohibited);
        assert_eq!(verdict.reason.as_deref(), Some("Shows a child."));
        assert!(!verdict.custom["weapons"]);
    }

    #[test]
    fn a_transcript_is_the_text_field() {
        assert_eq!(transcript(br#"{"text": "hello"}"#).unwrap(), "hello");
        assert_eq!(transcript(br#"{"text": ""}"#).unwrap(), "");
        assert!(transcript(b"hello").is_err());
    }
}
