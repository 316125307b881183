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

use std::{sync::Arc, time::Instant};

use apalis_core::task::data::Data;
use moderation_shared::{
    db::{
        self,
        jobs::{Claim, ClaimRequest, ClaimedJob, Finish, JobResult},
        DbError, Pool,
    },
    domain::{ClaimToken, FailureCode, JobStage, Modality},
    outcome::JobOutcome,
    queue::{JobQueue, QueuedJob, JOB_MAX_TRIES},
    telemetry,
};

use crate::{checks::Checks, decide::decide, failure::Failure};

pub mod lease;
pub mod media;
pub mod store;
pub mod task;
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

/// Handles one delivery as a task of its own on the runtime's threads ([`task`]).
pub async fn handle_as_task(job: QueuedJob, ctx: Data<JobContext>) -> Result<Handled, JobError> {
    task::on_runtime(handle(job, ctx)).await
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
                stamp: None,
                outcome: JobOutcome::exhausted(JOB_MAX_TRIES),
            };
            if !matches!(ctx.store.finish(failed).await?, Finish::Done(_)) {
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
    let mut claimed = claimed;
    // A decision refused because the account's settings changed meanwhile is taken again
    // under the new ones; settings change far more rarely than a job takes, so this loop
    // ends, and a bound keeps it from spinning on an account changed without pause.
    for _ in 0..STALE_RETRIES {
        let (outcome, stamp) = match classify(&ctx, job.modality, &claimed).await {
            Ok(outcome) => (outcome, Some(claimed.settings_stamp)),
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
            Err(failure) => (
                JobOutcome::Failed {
                    code: failure.code,
                    message: failure.message,
                },
                None,
            ),
        };
        let counted = outcome_label(&outcome);
        let result = JobResult {
            id: job.job_id,
            token,
            stamp,
            outcome,
        };
        match ctx.store.finish(result).await? {
            Finish::Done(finished) => {
                metrics::histogram!(
                    telemetry::JOB_TURNAROUND_SECONDS, "modality" => job.modality.as_str()
                )
                .record(finished.since_submitted.as_seconds_f64());
                count(job.modality, counted);
                return Ok(Handled::Finished);
            }
            Finish::Ended => return Ok(Handled::Duplicate),
            Finish::Stale => {
                let client = ctx.pool.get().await.map_err(DbError::from)?;
                let Some(now) = db::accounts::settings_stamp(&client, claimed.account_id).await?
                else {
                    return Ok(Handled::Duplicate);
                };
                tracing::debug!(job_id = %job.job_id, "Account settings changed; deciding again");
                claimed.settings_stamp = now.settings_stamp;
                claimed.nsfw_check = now.nsfw_check;
            }
        }
    }
    // Still refused: give the job back to the queue like a transient failure.
    let client = ctx.pool.get().await.map_err(DbError::from)?;
    if !db::jobs::requeue(&client, job.job_id, token).await? {
        return Ok(Handled::Duplicate);
    }
    count(job.modality, "requeued");
    Ok(Handled::Requeued)
}

/// How many times a decision refused as stale is taken again before the job is requeued.
const STALE_RETRIES: usize = 5;

/// Classifies `claimed` and decides it under its account's policy.
async fn classify(
    ctx: &JobContext,
    modality: Modality,
    claimed: &ClaimedJob,
) -> Result<JobOutcome, Failure> {
    let Some(content) = claimed.content.as_deref() else {
        return Err(Failure::permanent(
            FailureCode::ContentErased,
            "The job's content was erased before it was classified.",
        ));
    };
    let started = Instant::now();
    let verdict = match modality {
        Modality::Text => text::classify(&ctx.checks, claimed, content).await,
        Modality::Image | Modality::Video | Modality::Audio => {
            media::classify(&ctx.checks, modality, claimed, content).await
        }
    };
    metrics::histogram!(
        telemetry::CLASSIFY_DURATION_SECONDS,
        "modality" => modality.as_str(),
        "provider" => ctx.checks.provider_name(),
    )
    .record(started.elapsed().as_secs_f64());
    let verdict = verdict?;
    let policy = ctx.checks.policy(claimed).await?;
    let model_set = ctx.checks.model_set().map(|set| set.id.as_str());
    Ok(JobOutcome::Decided(Box::new(decide(
        modality, claimed, verdict, &policy, model_set,
    ))))
}

/// The `outcome` label of a finished job.
fn outcome_label(outcome: &JobOutcome) -> &'static str {
    match outcome {
        JobOutcome::Decided(decision) if decision.is_prohibited => "prohibited",
        JobOutcome::Decided(_) => "passed",
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

/// The stage a claimed job starts in: media is fetched first; text goes straight to the
/// classifier.
fn first_stage(modality: Modality) -> JobStage {
    match modality {
        Modality::Text => JobStage::Classifying,
        Modality::Image | Modality::Video | Modality::Audio => JobStage::Fetching,
    }
}
