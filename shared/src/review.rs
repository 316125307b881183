//! Human review and appeals (contract 14): the rules shared by the api and the dashboard.
//!
//! Every function reads only what retention keeps (`floor`, the least id still kept) and runs
//! in the caller's transaction and writes everything a step changes
//! together: an appeal with its review item and audit event; a decision with the job's new
//! revision, the item, the appeal, the webhook deliveries (`job.revised` when the outcome
//! changes, `appeal.decided` for every appeal) and the audit events.

use std::collections::BTreeMap;

use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{
    clock,
    db::{
        appeals::{self, Appeal},
        audit_events::{self, Actor, Target},
        deliveries::{self, NewDelivery},
        job_decisions::{self, NewDecision},
        jobs::{self, Job},
        review_items::{self, NewItem, ReviewItem},
        DbError, GenericClient,
    },
    domain::{
        AccountId, AppealState, AuditAction, DecidedBy, DeliveryId, JobId, JobStatus, ReviewItemId,
        ReviewItemState, ReviewReason, WebhookEvent,
    },
    webhook_body::{self, AppealDecision, Previous, Revision},
};

/// The longest reason or note, in characters.
pub const MAX_TEXT_CHARS: usize = 2000;
/// The longest `appeal_ref`, in characters.
pub const MAX_REF_CHARS: usize = 200;

/// Why a review step was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// No such job, item or appeal of the account.
    #[error("{0}")]
    NotFound(&'static str),
    /// The step conflicts with the state of things (the message says how).
    #[error("{0}")]
    Conflict(String),
    /// The input breaks a rule (the message names the field).
    #[error("{0}")]
    Invalid(String),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<tokio_postgres::Error> for ReviewError {
    fn from(err: tokio_postgres::Error) -> Self {
        Self::Db(err.into())
    }
}

/// Checks a reason or note: 1 to [`MAX_TEXT_CHARS`] characters, not only whitespace, no control
/// characters but line breaks and tabs.
pub fn check_text(field: &str, text: &str) -> Result<(), ReviewError> {
    let chars = text.chars().count();
    let controls = text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'));
    if chars == 0 || chars > MAX_TEXT_CHARS || text.trim().is_empty() || controls {
        return Err(ReviewError::Invalid(format!(
            "{field} must be 1 to {MAX_TEXT_CHARS} characters, not only whitespace, without \
             control characters"
        )));
    }
    Ok(())
}

/// What [`appeal`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Appealed {
    /// A new appeal, open, with its review item.
    Created(Appeal),
    /// The job's appeal with the same `appeal_ref`, as it stands.
    Existing(Appeal),
}

/// Appeals `account`'s job `job` for `reason` (`appeal_ref`: the client's reference, the same
/// one again answers the same appeal). Only a completed job can be appealed, and it may have
/// one open appeal at a time.
pub async fn appeal(
    client: &impl GenericClient,
    account: AccountId,
    actor: Actor,
    job: JobId,
    floor: Uuid,
    reason: &str,
    appeal_ref: Option<&str>,
) -> Result<Appealed, ReviewError> {
    check_text("reason", reason)?;
    if let Some(appeal_ref) = appeal_ref {
        let chars = appeal_ref.chars().count();
        if chars == 0 || chars > MAX_REF_CHARS || appeal_ref.chars().any(char::is_control) {
            return Err(ReviewError::Invalid(format!(
                "appeal_ref must be 1 to {MAX_REF_CHARS} characters without control characters"
            )));
        }
    }
    // The job's row lock serialises its appeals.
    let job = jobs::lock(client, account, job, floor)
        .await?
        .ok_or(ReviewError::NotFound("no such job"))?;
    if let Some(appeal_ref) = appeal_ref {
        if let Some(existing) = appeals::by_ref(client, job.id, appeal_ref).await? {
            return Ok(Appealed::Existing(existing));
        }
    }
    if job.status != JobStatus::Completed {
        return Err(ReviewError::Conflict(format!(
            "only a completed job can be appealed; this one is {}",
            job.status
        )));
    }
    if appeals::has_open(client, job.id).await? {
        return Err(ReviewError::Conflict(
            "the job has an open appeal already".to_owned(),
        ));
    }
    let appeal = appeals::insert(client, account, job.id, reason, appeal_ref).await?;
    review_items::insert(
        client,
        &NewItem {
            id: ReviewItemId::new(),
            job_id: job.id,
            account_id: account,
            job_type: job.kind.clone(),
            reasons: vec![ReviewReason::Appeal],
            appeal_id: Some(appeal.id),
        },
    )
    .await?;
    let mut reasons = job.review_reasons.clone();
    if !reasons.contains(&ReviewReason::Appeal) {
        reasons.push(ReviewReason::Appeal);
    }
    jobs::set_review(client, job.id, true, &reasons).await?;
    audit_events::record(
        client,
        account,
        actor,
        AuditAction::AppealCreated,
        &Target::new("appeal", appeal.id),
        serde_json::json!({ "job_id": job.id, "appeal_ref": appeal_ref }),
    )
    .await?;
    Ok(Appealed::Created(appeal))
}

/// Puts `account`'s item `id`, held by `reviewer`, back to pending.
pub async fn release(
    client: &impl GenericClient,
    account: AccountId,
    reviewer: Actor,
    id: ReviewItemId,
    floor: Uuid,
) -> Result<ReviewItem, ReviewError> {
    let item = review_items::lock(client, account, id, floor)
        .await?
        .ok_or(ReviewError::NotFound("no such review item"))?;
    if !item.is_claimed_by(reviewer) {
        return Err(ReviewError::Conflict(
            "only the reviewer who holds the item may release it".to_owned(),
        ));
    }
    review_items::release(client, &item).await?;
    review_items::get(client, account, id, floor)
        .await?
        .ok_or(ReviewError::NotFound("no such review item"))
}

/// A reviewer's decision on an item.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionInput {
    /// Whether the job is rejected.
    pub is_prohibited: bool,
    /// Categories to set: `ai_adult_general`, `underage`, `nsfw` on images and videos, and
    /// `custom.<name>` for a custom category the job ran.
    pub categories: BTreeMap<String, bool>,
    /// Why (required when the decision changes the job's outcome).
    pub note: Option<String>,
}

/// The job's decision after a reviewer's.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// The job.
    pub job_id: JobId,
    /// Its revision.
    pub revision: i32,
    /// `review` or `appeal`.
    pub decided_by: DecidedBy,
    /// Whether the job is rejected.
    pub is_prohibited: bool,
    /// Why, when it is.
    pub reason: Option<String>,
    /// Its categories.
    pub categories: Option<Value>,
    /// The reviewer's note.
    pub note: Option<String>,
    /// When.
    pub decided_at: OffsetDateTime,
    /// Whether it changed the job's outcome.
    pub changed: bool,
    /// The appeal it decided, with its new state.
    pub appeal: Option<Appeal>,
}

/// Decides `account`'s item `id` for `reviewer`, who must hold it: the job gets a new
/// revision (uphold or overturn), the item is decided, and so is its appeal.
pub async fn decide(
    client: &impl GenericClient,
    account: AccountId,
    reviewer: Actor,
    id: ReviewItemId,
    input: &DecisionInput,
    floor: Uuid,
) -> Result<Decided, ReviewError> {
    if let Some(note) = &input.note {
        check_text("note", note)?;
    }
    let item = review_items::lock(client, account, id, floor)
        .await?
        .ok_or(ReviewError::NotFound("no such review item"))?;
    if item.state == ReviewItemState::Decided {
        return Err(ReviewError::Conflict(
            "the item is decided already".to_owned(),
        ));
    }
    if !item.is_claimed_by(reviewer) {
        return Err(ReviewError::Conflict(
            "only the reviewer who claimed the item may decide it; claim it first".to_owned(),
        ));
    }
    let job = jobs::lock(client, account, item.job_id, floor)
        .await?
        .ok_or(ReviewError::NotFound("no such job"))?;
    if item.appeal_id.is_some() && job_decisions::has_decided(client, job.id, reviewer).await? {
        return Err(ReviewError::Conflict(
            "an appeal is decided by a reviewer who has not decided this job before".to_owned(),
        ));
    }
    let categories = revised_categories(&job, &input.categories)?;
    let before = job.is_prohibited.unwrap_or(false);
    let changed = input.is_prohibited != before || categories != job.categories;
    if changed && input.note.is_none() {
        return Err(ReviewError::Invalid(
            "note is required when the decision changes the job's outcome".to_owned(),
        ));
    }
    let decided_by = if item.appeal_id.is_some() {
        DecidedBy::Appeal
    } else {
        DecidedBy::Review
    };
    let reason = match (input.is_prohibited, before) {
        (false, _) => None,
        (true, true) => job.reason.clone(),
        (true, false) => Some("A reviewer rejected the content.".to_owned()),
    };
    if job.revision == 0 {
        job_decisions::insert(
            client,
            account,
            job.id,
            &NewDecision {
                revision: 0,
                decided_by: DecidedBy::Model,
                is_prohibited: before,
                reason: job.reason.as_deref(),
                categories: job.categories.as_ref(),
                note: None,
                reviewer: None,
                item: None,
                decided_at: job.completed_at,
            },
        )
        .await?;
    }
    let revision = job.revision + 1;
    job_decisions::insert(
        client,
        account,
        job.id,
        &NewDecision {
            revision,
            decided_by,
            is_prohibited: input.is_prohibited,
            reason: reason.as_deref(),
            categories: categories.as_ref(),
            note: input.note.as_deref(),
            reviewer: Some(reviewer),
            item: Some(item.id),
            decided_at: None,
        },
    )
    .await?;
    review_items::mark_decided(client, &item).await?;
    let still_open = review_items::job_has_open(client, job.id).await?;
    let decided_at = clock::now();
    jobs::revise(
        client,
        job.id,
        &jobs::Revised {
            revision,
            decided_by,
            is_prohibited: input.is_prohibited,
            reason: reason.as_deref(),
            categories: categories.as_ref(),
            review_pending: still_open,
        },
    )
    .await?;
    let mut bodies = Vec::new();
    if changed {
        let delivery_id = DeliveryId::new();
        let body = webhook_body::revised_body(
            &Revision {
                job_id: job.id,
                revision,
                decided_by,
                is_prohibited: input.is_prohibited,
                reason: reason.clone(),
                categories: categories.clone(),
                previous: Previous {
                    is_prohibited: before,
                    categories: job.categories.clone(),
                },
                decided_at,
            },
            delivery_id,
        );
        bodies.push((delivery_id, WebhookEvent::JobRevised, body));
    }
    let appeal = match item.appeal_id {
        Some(appeal_id) => {
            let state = if changed {
                AppealState::Overturned
            } else {
                AppealState::Upheld
            };
            let appeal = appeals::decide(client, job.id, appeal_id, state).await?;
            let delivery_id = DeliveryId::new();
            let body = webhook_body::appeal_decided_body(
                &AppealDecision {
                    appeal_id,
                    appeal_ref: appeal.appeal_ref.as_deref(),
                    job_id: job.id,
                    state,
                    revision,
                    is_prohibited: input.is_prohibited,
                    decided_at,
                },
                delivery_id,
            );
            bodies.push((delivery_id, WebhookEvent::AppealDecided, body));
            Some(appeal)
        }
        None => None,
    };
    if !bodies.is_empty() {
        if let Some((target, to_account_url)) = jobs::target(client, job.id).await? {
            for (id, event, body) in bodies {
                let delivery = NewDelivery {
                    id,
                    event,
                    job_id: Some(job.id),
                    account_id: account,
                    target_url: target.clone(),
                    body,
                    to_account_url,
                };
                deliveries::insert(client, &delivery).await?;
            }
        }
    }
    audit_events::record(
        client,
        account,
        reviewer,
        AuditAction::ReviewDecided,
        &Target::job(job.id),
        serde_json::json!({
            "item_id": item.id, "revision": revision, "is_prohibited": input.is_prohibited,
            "categories": categories, "changed": changed, "note": input.note,
        }),
    )
    .await?;
    if let Some(appeal) = &appeal {
        audit_events::record(
            client,
            account,
            reviewer,
            AuditAction::AppealDecided,
            &Target::new("appeal", appeal.id),
            serde_json::json!({ "job_id": job.id, "state": appeal.state }),
        )
        .await?;
    }
    Ok(Decided {
        job_id: job.id,
        revision,
        decided_by,
        is_prohibited: input.is_prohibited,
        reason,
        categories,
        note: input.note.clone(),
        decided_at,
        changed,
        appeal,
    })
}

/// `job`'s categories with `changes` applied; a category the job does not have is refused.
fn revised_categories(
    job: &Job,
    changes: &BTreeMap<String, bool>,
) -> Result<Option<Value>, ReviewError> {
    let mut categories = job.categories.clone();
    for (name, &value) in changes {
        let slot = categories
            .as_mut()
            .and_then(|c| match name.strip_prefix("custom.") {
                Some(custom) => c.get_mut("custom").and_then(|c| c.get_mut(custom)),
                None => c.get_mut(name.as_str()),
            });
        match slot {
            Some(slot) if slot.is_boolean() => *slot = Value::Bool(value),
            _ => {
                return Err(ReviewError::Invalid(format!(
                    "categories.{name}: the job has no such category (an image or video has \
                     ai_adult_general, underage and nsfw when its check ran; custom.<name> for \
                     each custom category that ran)"
                )))
            }
        }
    }
    Ok(categories)
}
