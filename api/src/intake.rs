//! Submissions persisted and enqueued in batches.
//!
//! Every accepted submission is one row in `jobs` and one entry on its modality's stream.
//! Written one by one, each costs Postgres a statement and a commit and Redis a round trip;
//! under load those dominate the api's work. The [`Intake`] gathers the submissions of
//! concurrent requests (see [`Batcher`]): one `INSERT` for the batch, then one enqueue per
//! modality. A lone request is written at once, so a quiet service waits for nothing.

use moderation_shared::{
    batch::{BatchError, Batcher, Execute},
    db::{
        jobs::{self, NewJob},
        DbError, Pool,
    },
    domain::{JobId, Modality},
    queue::JobQueue,
};

/// The most submissions written in one statement.
const MAX_BATCH: usize = 128;
/// Batches in flight at once (each holds a pooled connection).
const IN_FLIGHT: usize = 2;
/// The longest a batch waits for Postgres to store it. Past it the batch's callers get 503
/// with their job ids (a write sent before the deadline may still land, and the relay then
/// enqueues it), and the batch's slot is free for the next.
const STORE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// Where a persisted submission stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persisted {
    /// Stored and on its queue.
    Queued,
    /// Stored, but its enqueue failed: the relay enqueues it once Redis is back.
    NotQueued,
}

/// Persists and enqueues submissions; cheap to clone.
#[derive(Clone, Debug)]
pub struct Intake(Batcher<Submissions>);

impl Intake {
    /// Starts the batching task (call it inside the Tokio runtime).
    pub fn start(pool: Pool, queue: JobQueue) -> Self {
        Self(Batcher::spawn(
            Submissions { pool, queue },
            MAX_BATCH,
            IN_FLIGHT,
        ))
    }

    /// Stores `job`, then enqueues it.
    pub async fn submit(&self, job: NewJob) -> Result<Persisted, BatchError<DbError>> {
        self.0.run(job).await
    }
}

struct Submissions {
    pool: Pool,
    queue: JobQueue,
}

impl Execute for Submissions {
    type Request = NewJob;
    type Response = Persisted;
    type Error = DbError;

    fn is_outage(&self, err: &DbError) -> bool {
        matches!(err, DbError::Pool(_) | DbError::Deadline(_))
    }

    /// Fails when nothing was stored, so a failed batch can be run again job by job; or, past
    /// the store deadline, when it cannot tell (an outage: nothing is run again).
    async fn execute(&self, jobs: &[NewJob]) -> Result<Vec<Persisted>, DbError> {
        // The connection goes back to the pool before the Redis round trips.
        let store = async {
            let client = self.pool.get().await?;
            jobs::insert_many(&client, jobs).await
        };
        tokio::time::timeout(STORE_DEADLINE, store)
            .await
            .map_err(|_| DbError::Deadline(STORE_DEADLINE))??;
        let mut answers = vec![Persisted::Queued; jobs.len()];
        let mut not_queued = Vec::new();
        for modality in Modality::ALL {
            let (indices, ids): (Vec<usize>, Vec<JobId>) = jobs
                .iter()
                .enumerate()
                .filter(|(_, job)| job.modality == modality)
                .map(|(i, job)| (i, job.id))
                .unzip();
            if ids.is_empty() {
                continue;
            }
            if let Err(err) = self.queue.enqueue_many(modality, &ids).await {
                tracing::warn!(error = %err, %modality, jobs = ids.len(), "Could not enqueue jobs; the relay enqueues them later");
                for i in indices {
                    answers[i] = Persisted::NotQueued;
                }
                not_queued.extend(ids);
            }
        }
        if !not_queued.is_empty() {
            let marked = match self.pool.get().await {
                Ok(client) => jobs::mark_not_enqueued(&client, &not_queued).await,
                Err(err) => Err(err.into()),
            };
            if let Err(err) = marked {
                tracing::warn!(error = %err, "Could not mark jobs as not enqueued; the relay still finds them");
            }
        }
        Ok(answers)
    }
}
