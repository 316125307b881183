//! The two writes every delivery makes, batched across the deliveries in progress.
//!
//! A worker running many jobs at once would otherwise claim and finish each one with its own
//! statement and commit. Here concurrent claims go to Postgres as one `UPDATE`, and concurrent
//! results as one transaction (results and their webhook deliveries), through a
//! [`Batcher`]; each delivery still gets its own answer, so exactly-once holds per job.
//!
//! A batch whose reply is lost (the connection drops after the commit) is run again one
//! request at a time by the [`Batcher`]; each claim and result carries its delivery's token,
//! so such a re-run recognises its own committed write and answers as the first run did.
//!
//! Claims commit without waiting for the disk (see [`db::jobs::claim_many`]). A claim lost in
//! a crash is lost together with everything the job did after it (the log is flushed in
//! order, and the result's commit waits for it), so the job is simply queued again, as if the
//! worker had died; the wait saved is one log flush per job, most of a claim's time under load.

use std::time::Duration;

use moderation_shared::{
    batch::{BatchError, Batcher, Execute},
    db::{
        self,
        jobs::{Claim, ClaimRequest, Finish, JobResult},
        DbError, Pool,
    },
    queue::JOB_MAX_TRIES,
};

/// The most claims, or results, written in one statement.
const MAX_BATCH: usize = 128;
/// Batches of each kind in flight at once (each holds a pooled connection).
pub const IN_FLIGHT: usize = 2;

/// The job writes of this process.
#[derive(Clone, Debug)]
pub struct JobStore {
    claims: Batcher<Claims>,
    results: Batcher<Results>,
}

impl JobStore {
    /// Starts the batching tasks (call it inside the Tokio runtime): claims, each leasing its
    /// job for `lease`, through `claims` (a pool of their own, of [`IN_FLIGHT`] connections, so
    /// they never wait behind other work), results through `pool`.
    pub fn start(pool: Pool, claims: Pool, lease: Duration) -> Self {
        Self {
            claims: Batcher::spawn(
                Claims {
                    pool: claims,
                    lease,
                },
                MAX_BATCH,
                IN_FLIGHT,
            ),
            results: Batcher::spawn(Results(pool), MAX_BATCH, IN_FLIGHT),
        }
    }

    /// Claims a job (see [`db::jobs::claim_many`]).
    pub async fn claim(&self, request: ClaimRequest) -> Result<Claim, StoreError> {
        Ok(self.claims.run(request).await?)
    }

    /// Writes a job's result and its webhook delivery together (see
    /// [`db::jobs::finish_many`]).
    pub async fn finish(&self, result: JobResult) -> Result<Finish, StoreError> {
        Ok(self.results.run(result).await?)
    }
}

/// A job write that did not happen.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct StoreError(#[from] BatchError<DbError>);

struct Claims {
    pool: Pool,
    lease: Duration,
}

impl Execute for Claims {
    type Request = ClaimRequest;
    type Response = Claim;
    type Error = DbError;

    async fn execute(&self, requests: &[ClaimRequest]) -> Result<Vec<Claim>, DbError> {
        let client = self.pool.get().await?;
        db::jobs::claim_many(&client, requests, JOB_MAX_TRIES, self.lease).await
    }
}

struct Results(Pool);

impl Execute for Results {
    type Request = JobResult;
    type Response = Finish;
    type Error = DbError;

    async fn execute(&self, results: &[JobResult]) -> Result<Vec<Finish>, DbError> {
        let mut client = self.0.get().await?;
        let tx = client.transaction().await?;
        let finished = db::jobs::finish_many(&tx, results).await?;
        tx.commit().await?;
        Ok(finished)
    }
}
