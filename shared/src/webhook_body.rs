//! The webhook bodies: compact JSON, fixed once and sent byte for byte on every attempt. Every
//! body names its `event` (contract 14); a finished job's is `job.completed`.

use serde::Serialize;
use time::OffsetDateTime;

use crate::{
    clock::format_millis,
    domain::{
        AppealId, AppealState, DecidedBy, DeliveryId, FailureCode, JobId, JobReviewState,
        JobStatus, ReviewReason, WebhookEvent,
    },
    outcome::JobOutcome,
};

/// A job's review, as the job object and the `job.completed` body carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ReviewView {
    /// `pending` while an item is open, `decided` once every one is.
    #[schema(value_type = String, pattern = "^(pending|decided)$")]
    pub state: JobReviewState,
    /// Why it went to review: `band`, `sample`, `appeal`.
    #[schema(value_type = Vec<String>)]
    pub reasons: Vec<ReviewReason>,
}

#[derive(Serialize)]
struct Decided<'a> {
    event: &'static str,
    job_id: JobId,
    status: JobStatus,
    is_prohibited: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    categories: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scores: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    policy_version: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    review: Option<ReviewView>,
    completed_at: String,
    delivery_id: DeliveryId,
}

#[derive(Serialize)]
struct Failed<'a> {
    event: &'static str,
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

/// The `job.completed` body for `job` ending with `outcome` at `completed_at`, delivered as
/// `delivery_id`.
pub fn body(
    job: JobId,
    outcome: &JobOutcome,
    completed_at: OffsetDateTime,
    delivery_id: DeliveryId,
) -> Vec<u8> {
    let completed_at = format_millis(completed_at);
    let result = match outcome {
        JobOutcome::Decided(decision) => serde_json::to_vec(&Decided {
            event: WebhookEvent::JobCompleted.as_str(),
            job_id: job,
            status: JobStatus::Completed,
            is_prohibited: decision.is_prohibited,
            reason: decision
                .reason
                .as_deref()
                .filter(|_| decision.is_prohibited),
            categories: decision.categories.as_ref(),
            scores: decision.scores_json(),
            policy_version: decision.policy_version,
            review: (!decision.review.is_empty()).then(|| ReviewView {
                state: JobReviewState::Pending,
                reasons: decision.review.clone(),
            }),
            completed_at,
            delivery_id,
        }),
        JobOutcome::Failed { code, message } => serde_json::to_vec(&Failed {
            event: WebhookEvent::JobCompleted.as_str(),
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

/// The outcome a `job.revised` body compares with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Previous {
    /// Whether the job was rejected before.
    pub is_prohibited: bool,
    /// Its categories before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub categories: Option<serde_json::Value>,
}

/// A human decision that changed a job's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    /// The job.
    pub job_id: JobId,
    /// Its new revision.
    pub revision: i32,
    /// `review` or `appeal`.
    pub decided_by: DecidedBy,
    /// Whether it is rejected now.
    pub is_prohibited: bool,
    /// Why, when it is.
    pub reason: Option<String>,
    /// Its categories now.
    pub categories: Option<serde_json::Value>,
    /// What it was.
    pub previous: Previous,
    /// When.
    pub decided_at: OffsetDateTime,
}

#[derive(Serialize)]
struct Revised<'a> {
    event: &'static str,
    job_id: JobId,
    revision: i32,
    decided_by: DecidedBy,
    is_prohibited: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    categories: Option<&'a serde_json::Value>,
    previous: &'a Previous,
    decided_at: String,
    delivery_id: DeliveryId,
}

/// The `job.revised` body of `revision`, delivered as `delivery_id` (never a reviewer's note).
pub fn revised_body(revision: &Revision, delivery_id: DeliveryId) -> Vec<u8> {
    serde_json::to_vec(&Revised {
        event: WebhookEvent::JobRevised.as_str(),
        job_id: revision.job_id,
        revision: revision.revision,
        decided_by: revision.decided_by,
        is_prohibited: revision.is_prohibited,
        reason: revision
            .reason
            .as_deref()
            .filter(|_| revision.is_prohibited),
        categories: revision.categories.as_ref(),
        previous: &revision.previous,
        decided_at: format_millis(revision.decided_at),
        delivery_id,
    })
    .unwrap_or_default()
}

/// A decided appeal.
#[derive(Debug, Clone, PartialEq)]
pub struct AppealDecision<'a> {
    /// The appeal.
    pub appeal_id: AppealId,
    /// The client's reference.
    pub appeal_ref: Option<&'a str>,
    /// The job.
    pub job_id: JobId,
    /// `upheld` or `overturned`.
    pub state: AppealState,
    /// The job's revision after it.
    pub revision: i32,
    /// Whether the job is rejected now.
    pub is_prohibited: bool,
    /// When.
    pub decided_at: OffsetDateTime,
}

#[derive(Serialize)]
struct AppealDecided<'a> {
    event: &'static str,
    appeal_id: AppealId,
    #[serde(skip_serializing_if = "Option::is_none")]
    appeal_ref: Option<&'a str>,
    job_id: JobId,
    state: AppealState,
    revision: i32,
    is_prohibited: bool,
    decided_at: String,
    delivery_id: DeliveryId,
}

/// The `appeal.decided` body of `decision`, delivered as `delivery_id`.
pub fn appeal_decided_body(decision: &AppealDecision<'_>, delivery_id: DeliveryId) -> Vec<u8> {
    serde_json::to_vec(&AppealDecided {
        event: WebhookEvent::AppealDecided.as_str(),
        appeal_id: decision.appeal_id,
        appeal_ref: decision.appeal_ref,
        job_id: decision.job_id,
        state: decision.state,
        revision: decision.revision,
        is_prohibited: decision.is_prohibited,
        decided_at: format_millis(decision.decided_at),
        delivery_id,
    })
    .unwrap_or_default()
}

/// The body of a test send (`POST /api/v1/webhook/test`): `{"event": "ping", "delivery_id",
/// "sent_at"}`.
pub fn ping_body(delivery_id: DeliveryId, sent_at: OffsetDateTime) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "event": WebhookEvent::Ping.as_str(),
        "delivery_id": delivery_id,
        "sent_at": format_millis(sent_at),
    }))
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Decision;
    use time::macros::datetime;
    use uuid::Uuid;

    #[test]
    fn a_passing_prompt_omits_reason_and_categories() {
        let job = JobId(Uuid::nil());
        let outcome = JobOutcome::Decided(Box::new(Decision {
            is_prohibited: false,
            reason: Some("ignored".into()),
            ..Decision::default()
        }));
        let body = body(
            job,
            &outcome,
            datetime!(2026-01-01 00:00 UTC),
            DeliveryId(Uuid::nil()),
        );
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"event":"job.completed","job_id":"00000000-0000-0000-0000-000000000000","status":"completed","is_prohibited":false,"completed_at":"2026-01-01T00:00:00.000Z","delivery_id":"00000000-0000-0000-0000-000000000000"}"#
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
    fn a_model_decision_carries_its_scores_policy_version_and_review() {
        let outcome = JobOutcome::Decided(Box::new(Decision {
            is_prohibited: true,
            reason: Some("The text model scored violence 0.912.".into()),
            scores: [("violence".to_owned(), 912), ("hate".to_owned(), 4)].into(),
            policy_version: Some(3),
            review: vec![ReviewReason::Band],
            ..Decision::default()
        }));
        let body = body(
            JobId(Uuid::nil()),
            &outcome,
            datetime!(2026-01-01 00:00 UTC),
            DeliveryId(Uuid::nil()),
        );
        let text = String::from_utf8(body).unwrap();
        assert!(
            text.contains(r#""reason":"The text model scored violence 0.912.","scores":{"hate":0.004,"violence":0.912},"policy_version":3,"review":{"state":"pending","reasons":["band"]},"completed_at""#),
            "{text}"
        );
    }
}
