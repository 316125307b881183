//! The queue-depth sampler: reads every modality's depth from Redis and publishes it as
//! [`telemetry::QUEUE_DEPTH`].
//!
//! It runs in the dispatcher, not in the workers, so the depth of a modality is published even
//! while no worker of it runs (an autoscaler scaling from zero needs exactly that), and a fleet
//! of many workers does not read the same numbers many times over.

use std::time::Duration;

use super::JobQueue;
use crate::{domain::Modality, telemetry};

/// Publishes the depth of every modality's queue at a fixed interval.
#[derive(Debug)]
pub struct DepthSampler {
    queue: JobQueue,
    min_idle: Duration,
    interval: Duration,
}

impl DepthSampler {
    /// A sampler of `queue`; `min_idle` is the workers' takeover time (an entry held longer
    /// counts as `retrying`).
    pub fn new(queue: JobQueue, min_idle: Duration, interval: Duration) -> Self {
        Self {
            queue,
            min_idle,
            interval,
        }
    }

    /// Samples every interval until dropped.
    pub async fn run_until_stopped(self) {
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            for modality in Modality::ALL {
                self.sample(modality).await;
            }
        }
    }

    /// Publishes `modality`'s depth; on a Redis error the previous values stay.
    async fn sample(&self, modality: Modality) {
        let depth = match self.queue.depth(modality, self.min_idle).await {
            Ok(depth) => depth,
            Err(err) => {
                tracing::debug!(%modality, error = %err, "Sampling the queue depth failed");
                return;
            }
        };
        for (state, value) in [
            ("waiting", depth.waiting),
            ("in_flight", depth.pending),
            ("retrying", depth.retrying),
            ("dead", depth.dead),
        ] {
            metrics::gauge!(telemetry::QUEUE_DEPTH, "modality" => modality.as_str(), "state" => state)
                .set(value as f64);
        }
    }
}
