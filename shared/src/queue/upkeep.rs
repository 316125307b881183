//! Removing consumers that are gone, so the group does not collect the names of dead
//! processes. A consumer is removed only when it has nothing pending, checked and done in one
//! script: `XGROUP DELCONSUMER` would otherwise drop entries still owed to the queue.

use std::time::Duration;

use redis::streams::StreamInfoConsumersReply;

use super::{JobQueue, QueueError, GROUP};
use crate::domain::Modality;

/// Deletes consumer `ARGV[2]` of group `ARGV[1]` on stream `KEYS[1]` when it has no pending
/// entry; returns 1 when deleted.
const DELETE_IF_EMPTY: &str = r"
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if #pending == 0 then
  redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
  return 1
end
return 0
";

impl JobQueue {
    /// Removes consumer `name` from `modality`'s group if it holds no entry. Returns whether
    /// it was removed.
    pub async fn remove_consumer_if_idle(
        &self,
        modality: Modality,
        name: &str,
    ) -> Result<bool, QueueError> {
        let stream = self.stream_key(modality);
        let name = name.to_owned();
        let removed: i64 = self
            .redis()
            .with(|mut conn| async move {
                redis::Script::new(DELETE_IF_EMPTY)
                    .key(&stream)
                    .arg(GROUP)
                    .arg(&name)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        Ok(removed == 1)
    }

    /// Removes the consumers of `modality`'s group, other than `me`, that have been idle for
    /// longer than `idle` and hold no entry (processes that were killed). A live consumer
    /// removed while it waits is added again by its next read. Returns how many went.
    pub async fn remove_stale_consumers(
        &self,
        modality: Modality,
        me: &str,
        idle: Duration,
    ) -> Result<usize, QueueError> {
        let stream = self.stream_key(modality);
        let info: StreamInfoConsumersReply = self
            .redis()
            .with(|mut conn| async move {
                redis::cmd("XINFO")
                    .arg("CONSUMERS")
                    .arg(&stream)
                    .arg(GROUP)
                    .query_async(&mut conn)
                    .await
            })
            .await?;
        let idle = usize::try_from(idle.as_millis()).unwrap_or(usize::MAX);
        let mut removed = 0;
        for consumer in info.consumers {
            if consumer.name != me
                && consumer.pending == 0
                && consumer.idle > idle
                && self
                    .remove_consumer_if_idle(modality, &consumer.name)
                    .await?
            {
                removed += 1;
            }
        }
        Ok(removed)
    }
}
