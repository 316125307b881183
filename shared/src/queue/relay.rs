//! The relay: rescues `processing` jobs whose lease ran out, then finds queued jobs that are
//! not on the queue and enqueues them again.
//!
//! Rescue ([`Relay::try_rescue`]): a `processing` job whose worker stopped renewing its lease
//! (the worker died, and Redis may have lost its entry too) goes back to `queued`, never
//! enqueued, so the same round enqueues it; one out of tries fails with `INTERNAL`. Rows are
//! taken with `FOR UPDATE SKIP LOCKED`, so rescuers of several processes never collide.
//!
//! A queued job is missing when the api's enqueue failed (its row of `open_jobs` has no
//! `enqueued_at`) or when its entry is not in the stream: the entry id recorded for it is
//! unknown, or names an entry the stream no longer holds (Redis lost it, or the stream went
//! while the hash survived). Each round, per modality, one process (a short Redis lock)
//! enqueues every never-enqueued job older than the grace time, then checks up to
//! [`SCAN_LIMIT`] enqueued ones against the stream (a script looks each entry up, a thousand
//! jobs per call), continuing where the previous round stopped, so a large backlog costs a
//! bounded amount per round. Enqueuing a job twice is harmless, so two relays racing lose
//! nothing.

use std::{collections::HashMap, sync::Mutex};

use time::OffsetDateTime;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::{JobQueue, QueueError, QueueSettings, JOB_MAX_TRIES};
use crate::{
    clock,
    db::{self, jobs::JobResult, DbError, GenericClient, Pool},
    domain::{ClaimToken, JobId, Modality},
    outcome::JobOutcome,
    telemetry,
};

/// Queued jobs checked against the stream per modality and round.
pub const SCAN_LIMIT: i64 = 50_000;
/// Expired jobs rescued per modality and round.
pub const RESCUE_LIMIT: i64 = 1_000;
/// Ids per call of [`ON_STREAM`].
const CHECK_CHUNK: usize = 1_000;

/// For each job id of `ARGV`, 1 when hash `KEYS[2]` names an entry of it that stream `KEYS[1]`
/// still holds (waiting or pending), else 0.
const ON_STREAM: &str = r"
local found = {}
for i, job in ipairs(ARGV) do
  local entry = redis.call('HGET', KEYS[2], job)
  found[i] = 0
  if entry and #redis.call('XRANGE', KEYS[1], entry, entry) > 0 then
    found[i] = 1
  end
end
return found
";

/// What one rescue round did: see [`Relay::try_rescue`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rescued {
    /// Jobs put back to `queued`.
    pub requeued: usize,
    /// Jobs out of tries, now `failed` with `INTERNAL`.
    pub exhausted: usize,
}

/// A failed relay round.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// Postgres failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// Redis failed.
    #[error(transparent)]
    Queue(#[from] QueueError),
}

impl From<tokio_postgres::Error> for RelayError {
    fn from(err: tokio_postgres::Error) -> Self {
        Self::Db(err.into())
    }
}

impl From<redis::RedisError> for RelayError {
    fn from(err: redis::RedisError) -> Self {
        Self::Queue(err.into())
    }
}

/// Where the previous round's scan of enqueued jobs stopped.
type Cursor = (OffsetDateTime, OffsetDateTime, Uuid);

/// The relay for some modalities.
#[derive(Debug)]
pub struct Relay {
    pool: Pool,
    queue: JobQueue,
    modalities: Vec<Modality>,
    settings: QueueSettings,
    cursors: Mutex<HashMap<Modality, Cursor>>,
}

impl Relay {
    /// A relay for `modalities`.
    pub fn new(
        pool: Pool,
        queue: JobQueue,
        modalities: Vec<Modality>,
        settings: QueueSettings,
    ) -> Self {
        Self {
            pool,
            queue,
            modalities,
            settings,
            cursors: Mutex::new(HashMap::new()),
        }
    }

    /// Runs a round every `relay_interval` until dropped.
    pub async fn run_until_stopped(self) {
        let mut tick = tokio::time::interval(self.settings.relay_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            for &modality in &self.modalities {
                match self.try_rescue(modality).await {
                    Ok(rescued) if rescued == Rescued::default() => {}
                    Ok(rescued) => tracing::warn!(
                        %modality, requeued = rescued.requeued, exhausted = rescued.exhausted,
                        "Rescued jobs whose worker stopped renewing their lease"
                    ),
                    Err(err) => tracing::warn!(%modality, error = %err, "Rescue round failed"),
                }
                match self.try_relay(modality).await {
                    Ok(0) => {}
                    Ok(count) => {
                        tracing::info!(%modality, count, "Relayed jobs missing from the queue")
                    }
                    Err(err) => tracing::warn!(%modality, error = %err, "Relay round failed"),
                }
            }
        }
    }

    /// Rescues up to [`RESCUE_LIMIT`] `processing` jobs of `modality` whose lease ran out: those
    /// with tries left go back to `queued` for [`Self::try_relay`] to enqueue; the others end
    /// `failed` with `INTERNAL` and their webhook delivery, and go to the dead stream.
    pub async fn try_rescue(&self, modality: Modality) -> Result<Rescued, RelayError> {
        let mut client = self.pool.get().await.map_err(DbError::from)?;
        let tx = client.transaction().await?;
        let expired =
            db::job_leases::take_expired(&tx, modality, RESCUE_LIMIT, JOB_MAX_TRIES).await?;
        let results: Vec<JobResult> = expired
            .exhausted
            .iter()
            .map(|&id| JobResult {
                id,
                token: ClaimToken::new(),
                stamp: None,
                outcome: JobOutcome::exhausted(JOB_MAX_TRIES),
            })
            .collect();
        if !results.is_empty() {
            db::jobs::finish_many(&tx, &results).await?;
        }
        tx.commit().await?;
        for &job in &expired.exhausted {
            if let Err(err) = self.queue.record_dead(modality, job).await {
                tracing::warn!(job_id = %job, error = %err, "Could not record a dead job");
            }
        }
        let rescued = Rescued {
            requeued: expired.requeued.len(),
            exhausted: expired.exhausted.len(),
        };
        metrics::counter!(telemetry::QUEUE_RESCUED_TOTAL, "modality" => modality.as_str())
            .increment((rescued.requeued + rescued.exhausted) as u64);
        Ok(rescued)
    }

    /// One round for `modality`: returns how many jobs it enqueued again (0 when another
    /// process holds this round).
    pub async fn try_relay(&self, modality: Modality) -> Result<usize, RelayError> {
        if !self.lock(modality).await? {
            return Ok(0);
        }
        let client = self.pool.get().await.map_err(DbError::from)?;
        let cutoff = clock::now() - self.settings.relay_grace;
        let never = self.never_enqueued(&client, modality, cutoff).await?;
        let lost = self.lost(&client, modality, cutoff).await?;
        let candidates: Vec<Uuid> = never.into_iter().chain(lost).map(|j| j.0).collect();
        if candidates.is_empty() {
            return Ok(0);
        }
        // Only jobs still queued now: one claimed (and acknowledged) since the scan is not
        // missing. Marking them first means a failed enqueue is retried by a later round.
        let stmt = client
            .prepare_cached(
                "UPDATE open_jobs SET enqueued_at = now()
                 WHERE job_id = ANY($1) AND status = 'queued' RETURNING job_id",
            )
            .await?;
        let missing: Vec<JobId> = client
            .query(&stmt, &[&candidates])
            .await?
            .iter()
            .map(|r| JobId(r.get(0)))
            .collect();
        self.queue.enqueue_many(modality, &missing).await?;
        metrics::counter!(telemetry::QUEUE_RELAYED_TOTAL, "modality" => modality.as_str())
            .increment(missing.len() as u64);
        Ok(missing.len())
    }

    async fn never_enqueued(
        &self,
        client: &impl GenericClient,
        modality: Modality,
        cutoff: OffsetDateTime,
    ) -> Result<Vec<JobId>, RelayError> {
        let stmt = client
            .prepare_cached(
                "SELECT job_id FROM open_jobs
                 WHERE status = 'queued' AND enqueued_at IS NULL AND created_at < $1 AND type = $2
                 ORDER BY enqueued_at NULLS FIRST, created_at LIMIT $3",
            )
            .await?;
        let rows = client
            .query(&stmt, &[&cutoff, &modality.as_str(), &SCAN_LIMIT])
            .await?;
        Ok(rows.iter().map(|r| JobId(r.get(0))).collect())
    }

    /// Enqueued jobs (enqueued before `cutoff`) whose entry is not in the stream.
    async fn lost(
        &self,
        client: &impl GenericClient,
        modality: Modality,
        cutoff: OffsetDateTime,
    ) -> Result<Vec<JobId>, RelayError> {
        let start = self
            .cursors
            .lock()
            .ok()
            .and_then(|c| c.get(&modality).copied())
            .unwrap_or((
                OffsetDateTime::UNIX_EPOCH,
                OffsetDateTime::UNIX_EPOCH,
                Uuid::nil(),
            ));
        let stmt = client
            .prepare_cached(
                "SELECT job_id, enqueued_at, created_at FROM open_jobs
                 WHERE status = 'queued' AND enqueued_at IS NOT NULL AND enqueued_at < $1
                   AND type = $2 AND (enqueued_at, created_at, job_id) > ($3, $4, $5)
                 ORDER BY enqueued_at, created_at, job_id LIMIT $6",
            )
            .await?;
        let params: [&(dyn ToSql + Sync); 6] = [
            &cutoff,
            &modality.as_str(),
            &start.0,
            &start.1,
            &start.2,
            &SCAN_LIMIT,
        ];
        let rows = client.query(&stmt, &params).await?;
        let next = match rows.last() {
            Some(last) if rows.len() as i64 == SCAN_LIMIT => {
                Some((last.get(1), last.get(2), last.get(0)))
            }
            _ => None,
        };
        if let Ok(mut cursors) = self.cursors.lock() {
            match next {
                Some(cursor) => cursors.insert(modality, cursor),
                None => cursors.remove(&modality),
            };
        }
        let ids: Vec<Uuid> = rows.iter().map(|r| r.get(0)).collect();
        let mut lost = Vec::new();
        let [stream, entries] = self.queue.entry_keys(modality);
        for chunk in ids.chunks(CHECK_CHUNK) {
            let names: Vec<String> = chunk.iter().map(Uuid::to_string).collect();
            let (stream, entries) = (&stream, &entries);
            let present: Vec<bool> = self
                .queue
                .redis()
                .with(|mut conn| async move {
                    redis::Script::new(ON_STREAM)
                        .key(stream)
                        .key(entries)
                        .arg(&names)
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            lost.extend(
                chunk
                    .iter()
                    .zip(present)
                    .filter(|(_, present)| !present)
                    .map(|(id, _)| JobId(*id)),
            );
        }
        Ok(lost)
    }

    /// Takes this round for `modality`, unless another relay took it within the interval.
    async fn lock(&self, modality: Modality) -> Result<bool, RelayError> {
        let key = self.queue.relay_lock_key(modality);
        let ttl = u64::try_from(self.settings.relay_interval.as_millis())
            .unwrap_or(u64::MAX)
            .saturating_sub(1)
            .max(1);
        let taken: Option<String> = self
            .queue
            .redis()
            .with(|mut conn| async move {
                redis::cmd("SET")
                    .arg(&key)
                    .arg(std::process::id())
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl)
                    .query_async(&mut conn)
                    .await
            })
            .await?;
        Ok(taken.is_some())
    }
}
