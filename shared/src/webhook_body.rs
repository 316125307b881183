//! The webhook body of a finished job: compact JSON, fixed once and sent byte for byte on
//! every attempt.

use serde::Serialize;
use time::OffsetDateTime;

use crate::{
    clock::format_millis,
    domain::{DeliveryId, FailureCode, JobId, JobStatus},
};

/// How a job ended.
#[derive(Debug, Clone, PartialEq)]
pub enum JobOutcome {
    /// Classified.
    Decided {
        /// Whether it is rejected.
        is_prohibited: bool,
        /// Why (only kept when rejected).
        reason: Option<String>,
        /// Category results: image and video always; any job with custom categories.
        categories: Option<serde_json::Value>,
        /// The built-in models' scores (`{"category": number}`), when a model ran.
        scores: Option<serde_json::Value>,
        /// Whether the NSFW check ran (`None` for kinds that never run it).
        nsfw_checked: Option<bool>,
    },
    /// Could not be classified.
    Failed {
        /// A contract error code, e.g. `MEDIA_UNREACHABLE`.
        code: FailureCode,
        /// A sentence for people.
        message: String,
    },
}

impl JobOutcome {
    /// The failure of a job that was taken `tries` times without completing: `INTERNAL`.
    pub fn exhausted(tries: i32) -> Self {
        Self::Failed {
            code: FailureCode::Internal,
            message: format!("The job did not complete after {tries} tries."),
        }
    }
}

#[derive(Serialize)]
struct Decided<'a> {
    job_id: JobId,
    status: JobStatus,
    is_prohibited: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    categories: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scores: Option<&'a serde_json::Value>,
    completed_at: String,
    delivery_id: DeliveryId,
}

#[derive(Serialize)]
struct Failed<'a> {
    job_id: JobId,
    status: JobStatus,
    error: ErrorBody<'a>,
    completed_at: String,
    delivery_id: DeliveryId,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: FailureCode,
    message: &'a str,
}

/// The body for `job` ending with `outcome` at `completed_at`, delivered as `delivery_id`.
pub fn body(
    job: JobId,
    outcome: &JobOutcome,
    completed_at: OffsetDateTime,
    delivery_id: DeliveryId,
) -> Vec<u8> {
    let completed_at = format_millis(completed_at);
    let result = match outcome {
        JobOutcome::Decided {
            is_prohibited,
            reason,
            categories,
            scores,
            ..
        } => serde_json::to_vec(&Decided {
            job_id: job,
            status: JobStatus::Completed,
            is_prohibited: *is_prohibited,
            reason: reason.as_deref().filter(|_| *is_prohibited),
            categories: categories.as_ref(),
            scores: scores.as_ref(),
            completed_at,
            delivery_id,
        }),
        JobOutcome::Failed { code, message } => serde_json::to_vec(&Failed {
            job_id: job,
            status: JobStatus::Failed,
            error: ErrorBody {
                code: *code,
                message,
            },
            completed_at,
            delivery_id,
        }),
    };
    // Serialising plain structs of strings, booleans and JSON values cannot fail.
    result.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;
    use uuid::Uuid;

    #[test]
    fn a_passing_prompt_omits_reason_and_categories() {
        let job = JobId(Uuid::nil());
        let outcome = JobOutcome::Decided {
            is_prohibited: false,
            reason: Some("ignored".into()),
            categories: None,
            scores: None,
            nsfw_checked: None,
        };
        let body = body(
            job,
            &outcome,
            datetime!(2026-01-01 00:00 UTC),
            DeliveryId(Uuid::nil()),
        );
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"job_id":"00000000-0000-0000-0000-000000000000","status":"completed","is_prohibited":false,"completed_at":"2026-01-01T00:00:00.000Z","delivery_id":"00000000-0000-0000-0000-000000000000"}"#
        );
    }

    #[test]
    fn a_failed_job_carries_its_error() {
        let outcome = JobOutcome::Failed {
            code: FailureCode::MediaTooLarge,
            message: "too big".into(),
        };
        let body = body(
            JobId(Uuid::nil()),
            &outcome,
            datetime!(2026-01-01 00:00 UTC),
            DeliveryId(Uuid::nil()),
        );
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["status"], "failed");
        assert_eq!(value["error"]["code"], "MEDIA_TOO_LARGE");
        assert!(value.get("is_prohibited").is_none());
    }

    #[test]
    fn a_model_decision_carries_its_scores_after_the_categories() {
        let outcome = JobOutcome::Decided {
            is_prohibited: true,
            reason: Some("The text model scored violence 0.912.".into()),
            categories: None,
            scores: Some(serde_json::json!({"violence": 0.912, "hate": 0.004})),
            nsfw_checked: None,
        };
        let body = body(
            JobId(Uuid::nil()),
            &outcome,
            datetime!(2026-01-01 00:00 UTC),
            DeliveryId(Uuid::nil()),
        );
        let text = String::from_utf8(body).unwrap();
        assert!(
            text.contains(r#""reason":"The text model scored violence 0.912.","scores":{"hate":0.004,"violence":0.912},"completed_at""#),
            "{text}"
        );
    }
}
