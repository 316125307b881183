//! The job handler: one delivery of a job, from claim to result.
//!
//! Every delivery first claims its job in Postgres under a token of its own, which makes
//! duplicate deliveries harmless and lets a claim or result re-run after a lost reply know its
//! own write. The claimed job's lease is renewed while it is worked on ([`lease`]). It is then
//! classified by its modality's steps ([`text`], [`media`]), and the result and its webhook
//! delivery are written in one transaction. Claims and results of concurrent deliveries are
//! written together ([`store`]). A transient failure gives the job back to the queue
//! (`processing → queued`) while it has tries left; the relay puts it back on the queue after
//! its grace time, which spaces the retries out.

use std::{collections::BTreeMap, sync::Arc, time::Instant};

use apalis_core::task::data::Data;
use moderation_shared::{
    db::{
        self,
        jobs::{Claim, ClaimRequest, ClaimedJob, JobResult},
        DbError, Pool,
    },
    domain::{ClaimToken, JobStage, Modality},
    queue::{JobQueue, QueuedJob, JOB_MAX_TRIES},
    telemetry,
    webhook_body::JobOutcome,
};

use crate::{checks::Checks, classify::Verdict};

pub mod lease;
pub mod media;
pub mod store;
pub mod text;

use lease::Leases;
use store::{JobStore, StoreError};

/// What a handler needs, shared by every delivery.
#[derive(Clone)]
pub struct JobContext {
    /// Postgres.
    pub pool: Pool,
    /// Claims and results, batched.
    pub store: JobStore,
    /// The leases of the jobs in progress, renewed while they are.
    pub leases: Leases,
    /// The queue (for dead-letter bookkeeping).
    pub queue: JobQueue,
    /// Policies, fetcher and provider.
    pub checks: Arc<Checks>,
}

/// A delivery's outcome; every outcome acknowledges the delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// The job got its result (completed or failed).
    Finished,
    /// A transient failure: the job is `queued` again and will be retried.
    Requeued,
    /// The job was already claimed or finished elsewhere: a duplicate delivery, ignored.
    Duplicate,
    /// The job had used all its tries and is now `failed` with `INTERNAL` (its webhook
    /// delivery stored).
    Exhausted,
}

/// A delivery that failed and is retried (after the takeover time).
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Postgres failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A batched claim or result was not written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Handles one delivery.
pub async fn handle(job: QueuedJob, ctx: Data<JobContext>) -> Result<Handled, JobError> {
    let token = ClaimToken::new();
    let claimed = ctx
        .store
        .claim(ClaimRequest {
            id: job.job_id,
            token,
            redelivery: job.is_redelivery(),
            first_stage: first_stage(job.modality),
        })
        .await?;
    let claimed = match claimed {
        Claim::Claimed(claimed) => claimed,
        Claim::Duplicate => {
            tracing::debug!(job_id = %job.job_id, "Ignoring a duplicate delivery");
            return Ok(Handled::Duplicate);
        }
        Claim::Exhausted => {
            // Ended like any failure, so its webhook is delivered; only one delivery of the
            // job gets past `finish`.
            let failed = JobResult {
                id: job.job_id,
                token,
                outcome: JobOutcome::exhausted(JOB_MAX_TRIES),
            };
            if ctx.store.finish(failed).await?.is_none() {
                return Ok(Handled::Duplicate);
            }
            tracing::warn!(job_id = %job.job_id, "Job failed after its last try");
            count(job.modality, "exhausted");
            if let Err(err) = ctx.queue.record_dead(job.modality, job.job_id).await {
                tracing::warn!(job_id = %job.job_id, error = %err, "Could not record a dead job");
            }
            return Ok(Handled::Exhausted);
        }
    };
    let _lease = ctx.leases.hold(job.job_id, token);
    let started = Instant::now();
    let result = match job.modality {
        Modality::Text => text::classify(&ctx.checks, &claimed).await,
        Modality::Image | Modality::Video | Modality::Audio => {
            media::classify(&ctx.checks, job.modality, &claimed).await
        }
    };
    metrics::histogram!(
        telemetry::CLASSIFY_DURATION_SECONDS,
        "modality" => job.modality.as_str(),
        "provider" => ctx.checks.provider_name(),
    )
    .record(started.elapsed().as_secs_f64());
    let outcome = match result {
        Ok(verdict) => decided(job.modality, &claimed, verdict),
        Err(failure) if failure.retryable && claimed.attempts < JOB_MAX_TRIES => {
            tracing::info!(
                job_id = %job.job_id, code = %failure.code, attempts = claimed.attempts,
                "Job failed transiently; it goes back to the queue"
            );
            let client = ctx.pool.get().await.map_err(DbError::from)?;
            if !db::jobs::requeue(&client, job.job_id, token).await? {
                return Ok(Handled::Duplicate);
            }
            count(job.modality, "requeued");
            return Ok(Handled::Requeued);
        }
        Err(failure) => JobOutcome::Failed {
            code: failure.code,
            message: failure.message,
        },
    };
    let counted = outcome_label(&outcome);
    let result = JobResult {
        id: job.job_id,
        token,
        outcome,
    };
    let Some(finished) = ctx.store.finish(result).await? else {
        return Ok(Handled::Duplicate);
    };
    metrics::histogram!(telemetry::JOB_TURNAROUND_SECONDS, "modality" => job.modality.as_str())
        .record(finished.since_submitted.as_seconds_f64());
    count(job.modality, counted);
    Ok(Handled::Finished)
}

/// The `outcome` label of a finished job.
fn outcome_label(outcome: &JobOutcome) -> &'static str {
    match outcome {
        JobOutcome::Decided {
            is_prohibited: true,
            ..
        } => "prohibited",
        JobOutcome::Decided { .. } => "passed",
        JobOutcome::Failed { .. } => "failed",
    }
}

fn count(modality: Modality, outcome: &'static str) {
    metrics::counter!(
        telemetry::WORKER_JOBS_TOTAL,
        "modality" => modality.as_str(),
        "outcome" => outcome,
    )
    .increment(1);
}

/// The stored result of `verdict`: image and video always carry the three categories (`nsfw`
/// only when the check ran); any job carries `custom` when a custom category ran.
fn decided(modality: Modality, job: &ClaimedJob, verdict: Verdict) -> JobOutcome {
    let visual_kind = matches!(modality, Modality::Image | Modality::Video);
    let mut categories = serde_json::Map::new();
    if visual_kind {
        let visual = verdict.visual.unwrap_or_default();
        categories.insert("ai_adult_general".into(), visual.ai_adult_general.into());
        categories.insert("underage".into(), visual.underage.into());
        if job.nsfw_check {
            categories.insert("nsfw".into(), visual.nsfw.unwrap_or(false).into());
        }
    }
    if !verdict.custom.is_empty() {
        let custom: serde_json::Map<String, serde_json::Value> = verdict
            .custom
            .into_iter()
            .map(|(name, hit)| (name, hit.into()))
            .collect();
        categories.insert("custom".into(), custom.into());
    }
    JobOutcome::Decided {
        is_prohibited: verdict.prohibited,
        reason: verdict.reason.filter(|_| verdict.prohibited),
        categories: (!categories.is_empty()).then(|| categories.into()),
        scores: scores(&verdict.scores),
        nsfw_checked: visual_kind.then_some(job.nsfw_check),
    }
}

/// The stored `scores`: each model score to 3 decimals; `None` when no model ran.
fn scores(scores: &BTreeMap<String, f32>) -> Option<serde_json::Value> {
    let rounded: serde_json::Map<String, serde_json::Value> = scores
        .iter()
        .filter_map(|(category, score)| {
            let score = (f64::from(score.clamp(0.0, 1.0)) * 1000.0).round() / 1000.0;
            serde_json::Number::from_f64(score).map(|n| (category.clone(), n.into()))
        })
        .collect();
    (!rounded.is_empty()).then(|| rounded.into())
}

/// The stage a claimed job starts in: media is fetched first; text goes straight to the
/// classifier.
fn first_stage(modality: Modality) -> JobStage {
    match modality {
        Modality::Text => JobStage::Classifying,
        Modality::Image | Modality::Video | Modality::Audio => JobStage::Fetching,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_kept_to_three_decimals_within_zero_and_one() {
        let scores = super::scores(&BTreeMap::from([
            ("violence".to_owned(), 0.912_345),
            ("hate".to_owned(), 0.000_4),
            ("nsfw".to_owned(), 1.2),
        ]));
        assert_eq!(
            scores,
            Some(serde_json::json!({"hate": 0.0, "nsfw": 1.0, "violence": 0.912}))
        );
        assert_eq!(super::scores(&BTreeMap::new()), None);
    }
}
