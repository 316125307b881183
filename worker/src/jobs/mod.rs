//! The job handler: one delivery of a job, from claim to the end of processing.
//!
//! Every delivery first claims its job in Postgres, which makes duplicate deliveries harmless.
//! Classification is the next step to add here (fetch, classify, complete, per modality); for
//! now a claimed job stays `processing`.

use apalis_core::task::data::Data;
use moderation_shared::{
    db::{DbError, GenericClient, Pool},
    domain::Modality,
    queue::{JobQueue, QueuedJob, MAX_TRIES},
};

/// What a handler needs, shared by every delivery.
#[derive(Debug, Clone)]
pub struct JobContext {
    /// Postgres.
    pub pool: Pool,
    /// The queue (for dead-letter bookkeeping).
    pub queue: JobQueue,
}

/// A delivery's outcome; every outcome acknowledges the delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// The job was claimed and is being processed.
    Claimed,
    /// The job was already claimed or finished elsewhere: a duplicate delivery, ignored.
    Duplicate,
    /// The job had used all its tries and is now `failed` with `INTERNAL`.
    Exhausted,
}

/// A delivery that failed and is retried (after the takeover time).
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Postgres failed.
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<tokio_postgres::Error> for JobError {
    fn from(err: tokio_postgres::Error) -> Self {
        Self::Db(err.into())
    }
}

/// Handles one delivery.
pub async fn handle(job: QueuedJob, ctx: Data<JobContext>) -> Result<Handled, JobError> {
    let client = ctx.pool.get().await.map_err(DbError::from)?;
    let handled = claim(&client, &job).await?;
    match handled {
        Handled::Exhausted => {
            tracing::warn!(job_id = %job.job_id, "Job failed after its last try");
            if let Err(err) = ctx.queue.record_dead(job.modality, job.job_id).await {
                tracing::warn!(job_id = %job.job_id, error = %err, "Could not record a dead job");
            }
        }
        Handled::Duplicate => {
            tracing::debug!(job_id = %job.job_id, "Ignoring a duplicate delivery");
        }
        Handled::Claimed => {}
    }
    Ok(handled)
}

/// Claims `job`: a queued job (or, on a redelivery, one a lost worker left `processing`) moves
/// to `processing` with one more attempt, or to `failed` with `INTERNAL` when it has had
/// [`MAX_TRIES`] already. Anything else is a duplicate.
async fn claim(client: &impl GenericClient, job: &QueuedJob) -> Result<Handled, JobError> {
    let stmt = client
        .prepare_cached(
            "UPDATE jobs SET
                 status = CASE WHEN attempts >= $2 THEN 'failed' ELSE 'processing' END,
                 stage = CASE WHEN attempts >= $2 THEN 'failed' ELSE $4 END,
                 attempts = CASE WHEN attempts >= $2 THEN attempts ELSE attempts + 1 END,
                 error_code = CASE WHEN attempts >= $2 THEN 'INTERNAL' ELSE error_code END,
                 error_message = CASE WHEN attempts >= $2
                     THEN 'The job did not complete after ' || $2 || ' tries.'
                     ELSE error_message END,
                 completed_at = CASE WHEN attempts >= $2 THEN now() ELSE completed_at END,
                 updated_at = now()
             WHERE id = $1 AND (status = 'queued' OR (status = 'processing' AND $3))
             RETURNING status",
        )
        .await?;
    let row = client
        .query_opt(
            &stmt,
            &[
                &job.job_id.0,
                &MAX_TRIES,
                &job.is_redelivery(),
                &first_stage(job.modality),
            ],
        )
        .await?;
    Ok(match row {
        None => Handled::Duplicate,
        Some(row) if row.get::<_, &str>(0) == "failed" => Handled::Exhausted,
        Some(_) => Handled::Claimed,
    })
}

/// The stage a claimed job starts in: media is fetched first; text goes straight to the
/// classifier.
fn first_stage(modality: Modality) -> &'static str {
    match modality {
        Modality::Text => "classifying",
        Modality::Image | Modality::Video | Modality::Audio => "fetching",
    }
}
