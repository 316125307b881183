//! The durable job queue on Redis Streams: one stream and consumer group per modality.
//!
//! Postgres is the truth: a job is persisted first, then enqueued. Each stream entry carries
//! only the job id and an attempt number. A hash per modality maps each job id to its latest
//! entry, so the [`relay`] can look up whether a queued job's entry is still in the stream
//! (after a Redis outage, a restart that lost data, or a stream deleted on its own) and enqueue
//! the missing ones again; the same relay round rescues `processing` jobs whose lease ran out
//! (see [`crate::db::job_leases`]). Enqueuing twice is harmless: workers claim a job in
//! Postgres before working on it.
//!
//! The consumer side is an apalis backend ([`StreamBackend`]); see `docs/queue.md` for the
//! design, the keys and the settings.

use std::time::Duration;

use redis::RedisError;

use crate::{
    config::{env_millis, ConfigError},
    domain::{JobId, Modality},
    redis_conn::RedisConn,
};

mod backend;
mod consumer;
pub mod relay;
pub mod sampler;
mod upkeep;

pub use backend::{AckLayer, AckService, StreamBackend};

/// The consumer group every worker of a modality joins.
pub const GROUP: &str = "workers";
/// How many times a job is tried before it fails with `INTERNAL`.
pub const JOB_MAX_TRIES: i32 = 5;
/// How many dead-lettered job ids each modality keeps for inspection (approximately).
const DEAD_KEPT: usize = 10_000;
/// Job ids per script call when enqueuing in bulk.
const ENQUEUE_CHUNK: usize = 1_000;

/// Adds an entry `job_id ARGV[i] attempt ARGV[1]` to stream `KEYS[1]` for each job id of
/// `ARGV[2..]`, and records each new entry's id under the job id in hash `KEYS[2]`.
const ADD_ENTRIES: &str = r"
for i = 2, #ARGV do
  local entry = redis.call('XADD', KEYS[1], '*', 'job_id', ARGV[i], 'attempt', ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[i], entry)
end
return #ARGV - 1
";

/// Acknowledges and deletes entry `ARGV[1]` of stream `KEYS[1]` (group `ARGV[3]`), and forgets
/// job `ARGV[2]` in hash `KEYS[2]` unless the hash names a newer entry of the job.
const REMOVE_ENTRY: &str = r"
redis.call('XACK', KEYS[1], ARGV[3], ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
if redis.call('HGET', KEYS[2], ARGV[2]) == ARGV[1] then
  redis.call('HDEL', KEYS[2], ARGV[2])
end
return 1
";

/// A queue failure.
#[derive(Debug, thiserror::Error)]
#[error("the job queue is unavailable")]
pub struct QueueError(#[from] RedisError);

/// Timing of the consumers and the relay.
#[derive(Debug, Clone)]
pub struct QueueSettings {
    /// `APP_QUEUE_MIN_IDLE_MS`: how long a delivered entry may go untouched before another
    /// worker takes it over (default 15 s). Workers touch the entries they hold every third of
    /// this, so only the entries of a dead worker ever reach it.
    pub min_idle: Duration,
    /// `APP_QUEUE_BLOCK_MS`: the longest one blocking read waits (default 100 ms). New entries
    /// wake a blocked read at once; this only bounds how late shutdown and upkeep run.
    pub block: Duration,
    /// `APP_RELAY_INTERVAL_MS`: how often the relay looks for queued jobs missing from the
    /// queue (default 5 s).
    pub relay_interval: Duration,
    /// `APP_RELAY_GRACE_MS`: how old a queued job must be before the relay may enqueue it
    /// again (default 5 s), so it does not race the api's own enqueue.
    pub relay_grace: Duration,
    /// `APP_JOB_LEASE_MS`: how long a claimed job stays leased to its worker without a renewal
    /// (default 60 s). Workers renew the leases of the jobs they work on every third of this,
    /// so only a dead (or cut-off) worker's jobs outlive theirs; the relay's rescue then puts
    /// them back on the queue, counting the lost try.
    pub lease: Duration,
}

impl Default for QueueSettings {
    fn default() -> Self {
        Self {
            min_idle: Duration::from_secs(15),
            block: Duration::from_millis(100),
            relay_interval: Duration::from_secs(5),
            relay_grace: Duration::from_secs(5),
            lease: Duration::from_secs(60),
        }
    }
}

impl QueueSettings {
    /// Reads the `APP_QUEUE_*`, `APP_RELAY_*` and `APP_JOB_LEASE_MS` variables.
    pub fn from_env() -> Result<Self, ConfigError> {
        let d = Self::default();
        Ok(Self {
            min_idle: env_millis("APP_QUEUE_MIN_IDLE_MS", d.min_idle, 100..)?,
            block: env_millis("APP_QUEUE_BLOCK_MS", d.block, 10..)?,
            relay_interval: env_millis("APP_RELAY_INTERVAL_MS", d.relay_interval, 10..)?,
            relay_grace: env_millis("APP_RELAY_GRACE_MS", d.relay_grace, 0..)?,
            lease: env_millis("APP_JOB_LEASE_MS", d.lease, 100..)?,
        })
    }
}

/// One delivery of a job: what a worker's handler receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedJob {
    /// The queue it came from.
    pub modality: Modality,
    /// The job.
    pub job_id: JobId,
    /// 0 for a first delivery; more when an earlier delivery was lost (its worker died).
    pub attempt: u32,
    /// The stream entry, acknowledged when the handler succeeds.
    pub entry_id: String,
}

impl QueuedJob {
    /// Whether an earlier delivery of this entry was lost, so the job may be left
    /// `processing` by a dead worker.
    pub fn is_redelivery(&self) -> bool {
        self.attempt > 0
    }
}

/// How much work a modality's queue holds. Every number is 0 for a queue never used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    /// Entries not yet delivered to any worker.
    pub waiting: u64,
    /// Entries delivered and not yet acknowledged (in flight).
    pub pending: u64,
    /// Pending entries idle past the takeover time: their worker is presumed dead and another
    /// will retry them (counted up to 10,000).
    pub retrying: u64,
    /// Jobs failed after their last try (the most recent 10,000 or so are kept).
    pub dead: u64,
}

/// The producer side of the queue, and the bookkeeping the consumer side shares.
#[derive(Debug, Clone)]
pub struct JobQueue {
    redis: RedisConn,
}

impl JobQueue {
    /// A queue in `redis`'s namespace.
    pub fn new(redis: RedisConn) -> Self {
        Self { redis }
    }

    /// The Redis handle.
    pub fn redis(&self) -> &RedisConn {
        &self.redis
    }

    /// The stream of `modality`. Every key of a modality's queue shares one hash tag, so the
    /// scripts and pipelines that use several of them work on a cluster (one slot).
    pub fn stream_key(&self, modality: Modality) -> String {
        self.redis.tagged_key(&format!("queue:{modality}"), "")
    }

    /// The hash from each job id on `modality`'s stream to its latest entry id.
    pub fn entries_key(&self, modality: Modality) -> String {
        self.redis
            .tagged_key(&format!("queue:{modality}"), ":entries")
    }

    /// The capped stream of job ids that failed after their last try.
    pub fn dead_key(&self, modality: Modality) -> String {
        self.redis.tagged_key(&format!("queue:{modality}"), ":dead")
    }

    /// The relay's lock of `modality`'s round.
    pub fn relay_lock_key(&self, modality: Modality) -> String {
        self.redis
            .tagged_key(&format!("queue:{modality}"), ":relay-lock")
    }

    /// The keys [`ADD_ENTRIES`], [`REMOVE_ENTRY`] and the relay's lookup use together: the
    /// stream and its entry-id hash.
    pub fn entry_keys(&self, modality: Modality) -> [String; 2] {
        [self.stream_key(modality), self.entries_key(modality)]
    }

    /// The keys the depth pipeline reads together: the stream and the dead stream.
    pub fn depth_keys(&self, modality: Modality) -> [String; 2] {
        [self.stream_key(modality), self.dead_key(modality)]
    }

    /// Puts `job` on `modality`'s stream.
    pub async fn enqueue(&self, modality: Modality, job: JobId) -> Result<(), QueueError> {
        self.enqueue_many(modality, &[job]).await
    }

    /// Puts every job of `jobs` on `modality`'s stream, a thousand per round trip, each
    /// thousand atomically (one script adds the entries and records their ids).
    pub async fn enqueue_many(&self, modality: Modality, jobs: &[JobId]) -> Result<(), QueueError> {
        for chunk in jobs.chunks(ENQUEUE_CHUNK) {
            let ids: Vec<String> = chunk.iter().map(JobId::to_string).collect();
            self.add_entries(modality, &ids, 0).await?;
        }
        Ok(())
    }

    /// Adds an entry with `attempt` for each of `job_ids` and records their entry ids.
    async fn add_entries(
        &self,
        modality: Modality,
        job_ids: &[String],
        attempt: u32,
    ) -> Result<(), QueueError> {
        let [stream, entries] = self.entry_keys(modality);
        self.redis
            .with(|mut conn| async move {
                redis::Script::new(ADD_ENTRIES)
                    .key(&stream)
                    .key(&entries)
                    .arg(attempt)
                    .arg(job_ids)
                    .invoke_async::<i64>(&mut conn)
                    .await
            })
            .await?;
        Ok(())
    }

    /// Acknowledges a finished delivery: the entry leaves the group's pending list and the
    /// stream, and the job's entry id is forgotten (unless a newer entry of it was added), in
    /// one step.
    pub async fn ack(&self, job: &QueuedJob) -> Result<(), QueueError> {
        let [stream, entries] = self.entry_keys(job.modality);
        self.redis
            .with(|mut conn| async move {
                redis::Script::new(REMOVE_ENTRY)
                    .key(&stream)
                    .key(&entries)
                    .arg(&job.entry_id)
                    .arg(job.job_id.to_string())
                    .arg(GROUP)
                    .invoke_async::<i64>(&mut conn)
                    .await
            })
            .await?;
        Ok(())
    }

    /// Hands deliveries that were taken but never started back to the queue: each goes to the
    /// end of the stream as a new entry with the same attempt, then the old entry is removed.
    pub async fn give_back(&self, jobs: &[QueuedJob]) -> Result<(), QueueError> {
        for job in jobs {
            self.add_entries(job.modality, &[job.job_id.to_string()], job.attempt)
                .await?;
            self.ack(job).await?;
        }
        Ok(())
    }

    /// Records that `job` failed after its last try (for the `dead` count).
    pub async fn record_dead(&self, modality: Modality, job: JobId) -> Result<(), QueueError> {
        let dead = self.dead_key(modality);
        let mut cmd = redis::cmd("XADD");
        cmd.arg(&dead)
            .arg("MAXLEN")
            .arg("~")
            .arg(DEAD_KEPT)
            .arg("*")
            .arg("job_id")
            .arg(job.to_string());
        self.redis
            .with(|mut conn| async move { cmd.query_async::<()>(&mut conn).await })
            .await?;
        Ok(())
    }

    /// The depth of `modality`'s queue, in three round trips at most; `min_idle` is the
    /// takeover time that makes a pending entry count as `retrying`.
    pub async fn depth(
        &self,
        modality: Modality,
        min_idle: Duration,
    ) -> Result<QueueDepth, QueueError> {
        let [stream, dead] = self.depth_keys(modality);
        let (len, dead_len): (u64, u64) = self
            .redis
            .with(|mut conn| async move {
                redis::pipe()
                    .xlen(&stream)
                    .xlen(&dead)
                    .query_async(&mut conn)
                    .await
            })
            .await?;
        let stream = self.stream_key(modality);
        let idle = u64::try_from(min_idle.as_millis()).unwrap_or(u64::MAX);
        let pending = self
            .redis
            .with(|mut conn| async move {
                let summary: redis::Value = redis::cmd("XPENDING")
                    .arg(&stream)
                    .arg(GROUP)
                    .query_async(&mut conn)
                    .await?;
                let stale: Vec<redis::Value> = redis::cmd("XPENDING")
                    .arg(&stream)
                    .arg(GROUP)
                    .arg("IDLE")
                    .arg(idle)
                    .arg("-")
                    .arg("+")
                    .arg(10_000)
                    .query_async(&mut conn)
                    .await?;
                Ok((pending_count(&summary), stale.len() as u64))
            })
            .await;
        let (pending, retrying) = match pending {
            Ok(counts) => counts,
            // No group yet: nothing was ever delivered.
            Err(err) if err.code() == Some("NOGROUP") => (0, 0),
            Err(err) => return Err(err.into()),
        };
        Ok(QueueDepth {
            waiting: len.saturating_sub(pending),
            pending,
            retrying,
            dead: dead_len,
        })
    }
}

/// The count in an `XPENDING key group` summary reply.
fn pending_count(summary: &redis::Value) -> u64 {
    match summary {
        redis::Value::Array(items) => match items.first() {
            Some(redis::Value::Int(n)) => u64::try_from(*n).unwrap_or(0),
            _ => 0,
        },
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis_conn::tests::{assert_one_slot, test_conns};

    #[test]
    fn every_key_group_of_a_queue_is_in_one_slot() {
        for redis in test_conns() {
            let queue = JobQueue::new(redis);
            for modality in Modality::ALL {
                assert_one_slot(&queue.entry_keys(modality));
                assert_one_slot(&queue.depth_keys(modality));
                // The queue of a modality lives on one node: all of its keys in one slot.
                assert_one_slot(&[
                    queue.stream_key(modality),
                    queue.entries_key(modality),
                    queue.dead_key(modality),
                    queue.relay_lock_key(modality),
                ]);
            }
        }
    }
}
