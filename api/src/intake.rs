//! Submissions persisted and enqueued in batches.
//!
//! Every accepted submission is one row in `jobs` and one entry on its modality's stream.
//! Written one by one, each costs Postgres a statement and a commit and Redis a round trip;
//! under load those dominate the api's work. The [`Intake`] gathers the submissions of
//! concurrent requests (see [`Batcher`]): one `INSERT` for the batch, then one enqueue per
//! modality. A lone request is written at once, so a quiet service waits for nothing.
//!
//! A submission with an `Idempotency-Key` whose key a job of its account already holds is not
//! stored: it is answered per item with that job (the same request) or a conflict (another
//! request), and only the jobs the batch created are enqueued.

use moderation_shared::{
    batch::{BatchError, Batcher, Execute},
    clock,
    db::{
        jobs::{self, Inserted, NewJob},
        DbError, Pool,
    },
    domain::{JobId, Modality, IDEMPOTENCY_TTL},
    queue::JobQueue,
};

/// The most submissions written in one statement.
const MAX_BATCH: usize = 128;
/// Batches in flight at once (each holds a pooled connection).
const IN_FLIGHT: usize = 2;

/// Where a persisted submission stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persisted {
    /// Stored and on its queue.
    Queued,
    /// Stored, but its enqueue failed: the relay enqueues it once Redis is back.
    NotQueued,
    /// Not stored: the same request came with this key within 24 hours and made this job.
    Replayed(JobId),
    /// Not stored: another request came with this key within 24 hours.
    KeyConflict,
    /// Not stored: concurrent submissions kept taking and releasing this key.
    KeyContested,
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

    /// Fails only when nothing was stored, so a failed batch can be run again job by job.
    async fn execute(&self, jobs: &[NewJob]) -> Result<Vec<Persisted>, DbError> {
        let inserted = {
            // The connection goes back to the pool before the Redis round trips.
            let mut client = self.pool.get().await?;
            let expired_before = clock::now() - IDEMPOTENCY_TTL;
            if jobs.iter().any(|job| job.idempotency.is_some()) {
                let tx = client.transaction().await?;
                let inserted = jobs::insert_many(&*tx, jobs, expired_before).await?;
                tx.commit().await?;
                inserted
            } else {
                jobs::insert_many(&**client, jobs, expired_before).await?
            }
        };
        let mut answers: Vec<Persisted> = jobs
            .iter()
            .zip(&inserted)
            .map(|(job, inserted)| match inserted {
                Inserted::Created => Persisted::Queued,
                Inserted::Held(holder) => {
                    let same = job
                        .idempotency
                        .as_ref()
                        .is_some_and(|k| k.fingerprint == holder.fingerprint);
                    if same {
                        Persisted::Replayed(holder.id)
                    } else {
                        Persisted::KeyConflict
                    }
                }
                Inserted::Contested => Persisted::KeyContested,
            })
            .collect();
        let mut not_queued = Vec::new();
        for modality in Modality::ALL {
            let (indices, ids): (Vec<usize>, Vec<JobId>) = jobs
                .iter()
                .enumerate()
                .filter(|(i, job)| job.modality == modality && inserted[*i] == Inserted::Created)
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
