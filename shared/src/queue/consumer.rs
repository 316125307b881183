//! One consumer of a modality's group: reads entries on a dedicated connection and hands them
//! to the apalis backend through a channel.
//!
//! It holds at most `concurrency` entries at once (a semaphore, released when a delivery is
//! acknowledged or given up), so nothing it has read waits unseen in its pending list. Each
//! round it either takes over entries of dead consumers (`XAUTOCLAIM` past the min-idle time)
//! or blocks briefly on `XREADGROUP ... >`; every third of the min-idle time it touches the
//! entries it holds (`XCLAIM ... JUSTID`) so no one takes over work still in progress.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use apalis_core::task::{builder::TaskBuilder, Task};
use redis::{
    streams::{StreamAutoClaimReply, StreamId, StreamReadReply},
    RedisError, RedisResult,
};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use super::{JobQueue, QueueSettings, QueuedJob, GROUP};
use crate::{domain::Modality, redis_conn::Connection, telemetry};

/// How often a consumer removes the group's stale consumers.
const UPKEEP_EVERY: Duration = Duration::from_secs(60);
/// How long a consumer with nothing pending must have been idle to count as stale.
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// The entries a consumer holds (read and not yet acknowledged or given up).
pub(crate) type Held = Arc<Mutex<HashSet<String>>>;

/// A consumer ready to run.
pub(crate) struct Consumer {
    pub(crate) queue: JobQueue,
    pub(crate) modality: Modality,
    pub(crate) settings: QueueSettings,
    pub(crate) name: String,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) batch: usize,
    pub(crate) held: Held,
    pub(crate) tx: mpsc::Sender<Task<QueuedJob>>,
    pub(crate) stop: watch::Receiver<bool>,
}

impl Consumer {
    /// Reads and hands out entries until told to stop or until the backend is dropped.
    pub(crate) async fn run(mut self) {
        let mut conn: Option<Connection> = None;
        let mut keepalive = tokio::time::interval(self.settings.min_idle / 3);
        keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let reclaim_every = (self.settings.min_idle / 2).min(Duration::from_secs(5));
        let mut reclaim_at = tokio::time::Instant::now();
        let mut cursor = "0-0".to_owned();
        let mut upkeep_at = tokio::time::Instant::now();
        let mut backoff = Duration::from_millis(100);
        loop {
            let first = tokio::select! {
                biased;
                _ = self.stop.changed() => break,
                _ = keepalive.tick() => {
                    if let Err(err) = self.keep_alive(&mut conn).await {
                        self.failed(&mut conn, &err);
                    }
                    continue;
                }
                permit = self.permits.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
            };
            let mut permits = vec![first];
            while permits.len() < self.batch {
                match self.permits.clone().try_acquire_owned() {
                    Ok(permit) => permits.push(permit),
                    Err(_) => break,
                }
            }
            let count = permits.len();
            let round = if tokio::time::Instant::now() >= reclaim_at {
                self.reclaim(&mut conn, &cursor, count).await.map(|reply| {
                    cursor = reply.next_stream_id;
                    if cursor == "0-0" {
                        reclaim_at = tokio::time::Instant::now() + reclaim_every;
                    }
                    (reply.claimed, 1)
                })
            } else {
                self.read(&mut conn, count).await.map(|ids| (ids, 0))
            };
            match round {
                Ok((entries, redelivered)) => {
                    backoff = Duration::from_millis(100);
                    if tokio::time::Instant::now() >= upkeep_at {
                        upkeep_at = tokio::time::Instant::now() + UPKEEP_EVERY;
                        self.remove_stale_consumers().await;
                    }
                    if !self.dispatch(entries, redelivered, permits).await {
                        break;
                    }
                }
                Err(err) if err.code() == Some("NOGROUP") => {
                    drop(permits);
                    if let Err(err) = self.create_group(&mut conn).await {
                        self.failed(&mut conn, &err);
                    }
                }
                Err(err) => {
                    drop(permits);
                    self.failed(&mut conn, &err);
                    tokio::select! {
                        _ = self.stop.changed() => break,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
        tracing::debug!(consumer = %self.name, "Queue consumer stopped");
    }

    /// Hands `entries` to the worker, one permit each; unused permits go back. Returns false
    /// when the backend is gone.
    async fn dispatch(
        &self,
        entries: Vec<StreamId>,
        redelivered: u32,
        mut permits: Vec<OwnedSemaphorePermit>,
    ) -> bool {
        for entry in entries {
            let Some(permit) = permits.pop() else { break };
            let job = match parse(self.modality, &entry) {
                Some(mut job) => {
                    job.attempt += redelivered;
                    job
                }
                None => {
                    tracing::warn!(entry = %entry.id, "Dropping a malformed queue entry");
                    self.drop_malformed(&entry.id).await;
                    continue;
                }
            };
            if let Ok(mut held) = self.held.lock() {
                held.insert(job.entry_id.clone());
            }
            permit.forget();
            let attempt = usize::try_from(job.attempt).unwrap_or(usize::MAX);
            let task = TaskBuilder::new(job).attempt(attempt).build();
            if self.tx.send(task).await.is_err() {
                return false;
            }
        }
        true
    }

    async fn read(
        &self,
        conn: &mut Option<Connection>,
        count: usize,
    ) -> RedisResult<Vec<StreamId>> {
        let stream = self.queue.stream_key(self.modality);
        let block = u64::try_from(self.settings.block.as_millis()).unwrap_or(u64::MAX);
        let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(&self.name)
            .arg("COUNT")
            .arg(count)
            .arg("BLOCK")
            .arg(block)
            .arg("STREAMS")
            .arg(&stream)
            .arg(">")
            .query_async(self.connection(conn).await?)
            .await?;
        Ok(reply
            .map(|r| r.keys.into_iter().flat_map(|k| k.ids).collect())
            .unwrap_or_default())
    }

    async fn reclaim(
        &self,
        conn: &mut Option<Connection>,
        cursor: &str,
        count: usize,
    ) -> RedisResult<StreamAutoClaimReply> {
        let stream = self.queue.stream_key(self.modality);
        let min_idle = u64::try_from(self.settings.min_idle.as_millis()).unwrap_or(u64::MAX);
        let reply: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
            .arg(&stream)
            .arg(GROUP)
            .arg(&self.name)
            .arg(min_idle)
            .arg(cursor)
            .arg("COUNT")
            .arg(count)
            .query_async(self.connection(conn).await?)
            .await?;
        if !reply.claimed.is_empty() {
            tracing::info!(
                modality = %self.modality,
                count = reply.claimed.len(),
                "Took over queue entries of a lost worker"
            );
            metrics::counter!(telemetry::QUEUE_TAKEOVERS_TOTAL, "modality" => self.modality.as_str())
                .increment(reply.claimed.len() as u64);
        }
        Ok(reply)
    }

    /// Resets the idle time of every held entry, so no one takes over work in progress.
    async fn keep_alive(&self, conn: &mut Option<Connection>) -> RedisResult<()> {
        let ids: Vec<String> = match self.held.lock() {
            Ok(held) => held.iter().cloned().collect(),
            Err(_) => return Ok(()),
        };
        if ids.is_empty() {
            return Ok(());
        }
        let stream = self.queue.stream_key(self.modality);
        let mut cmd = redis::cmd("XCLAIM");
        cmd.arg(&stream).arg(GROUP).arg(&self.name).arg(0);
        cmd.arg(&ids).arg("JUSTID");
        cmd.query_async::<redis::Value>(self.connection(conn).await?)
            .await
            .map(drop)
    }

    async fn remove_stale_consumers(&self) {
        match self
            .queue
            .remove_stale_consumers(self.modality, &self.name, STALE_AFTER)
            .await
        {
            Ok(0) => {}
            Ok(count) => {
                tracing::info!(modality = %self.modality, count, "Removed stale queue consumers")
            }
            Err(err) => tracing::debug!(error = %err, "Could not remove stale queue consumers"),
        }
    }

    async fn create_group(&self, conn: &mut Option<Connection>) -> RedisResult<()> {
        let stream = self.queue.stream_key(self.modality);
        let created: RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&stream)
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(self.connection(conn).await?)
            .await;
        match created {
            Err(err) if err.code() != Some("BUSYGROUP") => Err(err),
            _ => Ok(()),
        }
    }

    async fn drop_malformed(&self, entry: &str) {
        let stream = self.queue.stream_key(self.modality);
        let entry = entry.to_owned();
        let _ = self
            .queue
            .redis()
            .with(|mut conn| async move {
                redis::pipe()
                    .atomic()
                    .xack(&stream, GROUP, &[&entry])
                    .xdel(&stream, &[&entry])
                    .query_async::<()>(&mut conn)
                    .await
            })
            .await;
    }

    async fn connection<'a>(
        &self,
        conn: &'a mut Option<Connection>,
    ) -> RedisResult<&'a mut Connection> {
        if conn.is_none() {
            let opened = self
                .queue
                .redis()
                .dedicated(self.settings.block + Duration::from_secs(2))
                .await?;
            *conn = Some(opened);
        }
        conn.as_mut()
            .ok_or_else(|| RedisError::from((redis::ErrorKind::Io, "connection was not opened")))
    }

    /// Logs and counts a failed round and drops the connection, so the next one reconnects.
    fn failed(&self, conn: &mut Option<Connection>, err: &RedisError) {
        tracing::warn!(modality = %self.modality, error = %err, "Queue read failed; retrying");
        metrics::counter!(telemetry::QUEUE_READ_ERRORS_TOTAL, "modality" => self.modality.as_str())
            .increment(1);
        *conn = None;
    }
}

/// The delivery an entry describes, or `None` for an entry that is not ours.
fn parse(modality: Modality, entry: &StreamId) -> Option<QueuedJob> {
    let job_id = entry.get::<String>("job_id")?.parse().ok()?;
    let attempt = entry.get::<u32>("attempt").unwrap_or(0);
    Some(QueuedJob {
        modality,
        job_id,
        attempt,
        entry_id: entry.id.clone(),
    })
}
