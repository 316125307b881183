//! The durable job queue on Redis Streams: one stream and consumer group per modality.
//!
//! Postgres is the truth: a job is persisted first, then enqueued. Each stream entry carries
//! only the job id (and the attempt number). A set per modality records which job ids are on
//! the stream, so the relay can tell which queued jobs are missing (after a Redis outage or a
//! restart that lost data) and enqueue them again. Enqueuing twice is harmless: workers claim
//! a job in Postgres before working on it.

use crate::{
    domain::{JobId, Modality},
    redis_conn::RedisConn,
};

/// A queue failure.
#[derive(Debug, thiserror::Error)]
#[error("the job queue is unavailable")]
pub struct QueueError(#[from] redis::RedisError);

/// The producer side of the queue.
#[derive(Debug, Clone)]
pub struct JobQueue {
    redis: RedisConn,
}

impl JobQueue {
    /// A queue in `redis`'s namespace.
    pub fn new(redis: RedisConn) -> Self {
        Self { redis }
    }

    /// The stream of `modality`.
    pub fn stream_key(&self, modality: Modality) -> String {
        self.redis.key(&format!("queue:{modality}"))
    }

    /// The set of job ids currently on `modality`'s stream.
    pub fn members_key(&self, modality: Modality) -> String {
        self.redis.key(&format!("queue:{modality}:members"))
    }

    /// Puts `job` on `modality`'s stream.
    pub async fn enqueue(&self, modality: Modality, job: JobId) -> Result<(), QueueError> {
        let stream = self.stream_key(modality);
        let members = self.members_key(modality);
        let id = job.to_string();
        self.redis
            .with(|mut conn| async move {
                redis::pipe()
                    .atomic()
                    .sadd(&members, &id)
                    .ignore()
                    .cmd("XADD")
                    .arg(&stream)
                    .arg("*")
                    .arg("job_id")
                    .arg(&id)
                    .arg("attempt")
                    .arg(0)
                    .ignore()
                    .query_async::<()>(&mut conn)
                    .await
            })
            .await
            .map_err(QueueError)
    }
}
