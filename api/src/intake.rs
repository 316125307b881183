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
//! request), and only the jobs the batch created are enqueued. A key held by a job older than
//! 24 hours is taken from it and the submission stored after all. Every statement commits on
//! its own, so a batch without held keys costs what a batch without keys does.

use moderation_shared::{
    batch::{BatchError, Batcher, Execute},
    clock,
    db::{
        job_keys,
        jobs::{self, NewJob},
        DbError, Pool,
    },
    domain::{JobId, Modality, IDEMPOTENCY_TTL},
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
/// How many times a submission whose key its holder gave up (expired) is inserted again
/// before it is answered 503: each time, a concurrent submission may have taken the key first.
const KEY_ROUNDS: usize = 3;

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
    /// Not stored, and nothing learnt about this key's holder (a failed lookup, or a key that
    /// kept changing hands): the client may retry with the same key.
    KeyUnresolved,
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

impl Submissions {
    /// Inserts `jobs` and resolves those whose key is held. Returns whether each was stored,
    /// and each answer (`Queued` for a stored job). Fails only when nothing was stored: once
    /// the first insert has committed, a failure leaves the jobs it did not resolve answered
    /// [`Persisted::KeyUnresolved`]. The connection goes back to the pool on return, before
    /// the Redis round trips.
    async fn store(&self, jobs: &[NewJob]) -> Result<(Vec<bool>, Vec<Persisted>), DbError> {
        let client = self.pool.get().await?;
        let mut stored = jobs::insert_many(&client, jobs).await?;
        let mut answers: Vec<Persisted> = stored
            .iter()
            .map(|&s| {
                if s {
                    Persisted::Queued
                } else {
                    Persisted::KeyUnresolved
                }
            })
            .collect();
        let held: Vec<usize> = (0..jobs.len()).filter(|&i| !stored[i]).collect();
        if !held.is_empty() {
            let resolved = resolve_held_keys(&client, jobs, held, &mut stored, &mut answers).await;
            if let Err(err) = resolved {
                tracing::warn!(error = %err, "Could not resolve held idempotency keys; those submissions answer 503");
            }
        }
        Ok((stored, answers))
    }
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
        let (stored, mut answers) = tokio::time::timeout(STORE_DEADLINE, self.store(jobs))
            .await
            .map_err(|_| DbError::Deadline(STORE_DEADLINE))??;
        let mut not_queued = Vec::new();
        for modality in Modality::ALL {
            let (indices, ids): (Vec<usize>, Vec<JobId>) = jobs
                .iter()
                .enumerate()
                .filter(|(i, job)| job.modality == modality && stored[*i])
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

/// Answers the jobs at `held`, which were not stored because their key is held: a holder from
/// the last 24 hours answers with its job (same fingerprint) or a conflict; an older one gives
/// its key up and the job is inserted again, up to [`KEY_ROUNDS`] times. Marks what it stores
/// in `stored` and `answers` as it goes, so an error leaves every answer given so far true.
async fn resolve_held_keys(
    client: &deadpool_postgres::Client,
    jobs: &[NewJob],
    mut held: Vec<usize>,
    stored: &mut [bool],
    answers: &mut [Persisted],
) -> Result<(), DbError> {
    let expired_before = clock::now() - IDEMPOTENCY_TTL;
    // Only a held key keeps a job out; a job without one stays unresolved.
    held.retain(|&i| jobs[i].idempotency.is_some());
    for _ in 0..KEY_ROUNDS {
        if held.is_empty() {
            return Ok(());
        }
        let keys: Vec<_> = held
            .iter()
            .filter_map(|&i| {
                let job = &jobs[i];
                job.idempotency.as_ref().map(|k| (job.account_id, &k.key))
            })
            .collect();
        let holders = job_keys::holders(client, &keys).await?;
        let mut expired = Vec::new();
        let mut again = Vec::new();
        for ((i, holder), key) in held.drain(..).zip(holders).zip(&keys) {
            match holder {
                Some(holder) if holder.created_at >= expired_before => {
                    let same = jobs[i]
                        .idempotency
                        .as_ref()
                        .is_some_and(|k| k.fingerprint == holder.fingerprint);
                    answers[i] = if same {
                        Persisted::Replayed(holder.id)
                    } else {
                        Persisted::KeyConflict
                    };
                }
                Some(_) => {
                    expired.push(*key);
                    again.push(i);
                }
                // The holder gave its key up between the insert and the lookup.
                None => again.push(i),
            }
        }
        if again.is_empty() {
            return Ok(());
        }
        job_keys::release(client, &expired, expired_before).await?;
        let retried: Vec<NewJob> = again.iter().map(|&i| jobs[i].clone()).collect();
        let now_stored = jobs::insert_many(client, &retried).await?;
        for (i, now) in again.into_iter().zip(now_stored) {
            if now {
                stored[i] = true;
                answers[i] = Persisted::Queued;
            } else {
                held.push(i);
            }
        }
    }
    Ok(())
}
