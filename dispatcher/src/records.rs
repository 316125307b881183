//! The records of attempts to per-request URLs, written together across the attempts ending
//! at once ([`deliveries::record_attempts`]). An attempt to the account's URL is recorded in a
//! transaction of its own instead, with the URL's health, under the lock of its row.

use moderation_shared::{
    batch::{Batcher, Execute},
    db::{
        deliveries::{self, AttemptRecord},
        DbError, Pool,
    },
};

/// The most attempts recorded in one statement.
const MAX_BATCH: usize = 128;
/// Batches in flight at once (each holds a pooled connection).
const IN_FLIGHT: usize = 2;

/// Writes batches of attempt records.
pub(crate) struct Records(Pool);

impl Records {
    /// Starts the batching task (inside the Tokio runtime).
    pub(crate) fn start(pool: Pool) -> Batcher<Self> {
        Batcher::spawn(Self(pool), MAX_BATCH, IN_FLIGHT)
    }
}

impl Execute for Records {
    type Request = AttemptRecord;
    /// Whether the delivery's row was still this dispatcher's.
    type Response = bool;
    type Error = DbError;

    async fn execute(&self, entries: &[AttemptRecord]) -> Result<Vec<bool>, DbError> {
        let client = self.0.get().await?;
        deliveries::record_attempts(&client, entries).await
    }
}
