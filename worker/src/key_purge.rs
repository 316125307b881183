//! The purge of idempotency keys past their 24 hours.
//!
//! An expired key never blocks a submission (the api clears it when a new submission reuses
//! it), but a key left in `idempotency_keys` keeps its row and request fingerprint forever. Every worker process clears expired keys now and then, a bounded number per
//! statement; rows another process is clearing are skipped, so processes running it at once
//! share the work.

use std::time::Duration;

use moderation_shared::{
    clock,
    db::{job_keys, DbError, Pool},
    domain::IDEMPOTENCY_TTL,
};
use time::OffsetDateTime;

/// How often a process purges.
const PURGE_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// Keys cleared per statement.
const PURGE_CHUNK: i64 = 5_000;

/// Purges every [`PURGE_INTERVAL`] until dropped.
pub async fn run_until_stopped(pool: Pool) {
    let mut tick = tokio::time::interval(PURGE_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match try_purge(&pool, clock::now()).await {
            Ok(0) => {}
            Ok(count) => tracing::info!(count, "Cleared expired idempotency keys"),
            Err(err) => tracing::warn!(error = %err, "Purge of expired idempotency keys failed"),
        }
    }
}

/// Deletes every key taken more than 24 hours before `now`; returns how many.
pub async fn try_purge(pool: &Pool, now: OffsetDateTime) -> Result<u64, DbError> {
    let client = pool.get().await?;
    let expired_before = now - IDEMPOTENCY_TTL;
    let mut total = 0;
    loop {
        let cleared = job_keys::purge(&client, expired_before, PURGE_CHUNK).await?;
        total += cleared;
        if cleared < PURGE_CHUNK as u64 {
            return Ok(total);
        }
    }
}
