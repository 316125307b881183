//! The leases of the jobs this process is working on.
//!
//! A claim leases its job for `APP_JOB_LEASE_MS`; while a handler holds a [`Lease`], one task
//! renews every held job's lease in one statement every third of that time. The relay's rescue
//! puts back on the queue a `processing` job whose lease ran out, so a job still being worked
//! on (a long video download, a slow model) is never rescued, and a dead worker's job is,
//! even when Redis has lost its queue entry.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use moderation_shared::{
    db::{self, DbError, Pool},
    domain::{ClaimToken, JobId},
};

/// The jobs this process holds, by claim token.
#[derive(Clone, Debug, Default)]
pub struct Leases {
    held: Arc<Mutex<HashMap<ClaimToken, JobId>>>,
}

impl Leases {
    /// Renews the lease of `job`, claimed with `token`, until the returned [`Lease`] is dropped.
    pub fn hold(&self, job: JobId, token: ClaimToken) -> Lease {
        if let Ok(mut held) = self.held.lock() {
            held.insert(token, job);
        }
        Lease {
            leases: self.clone(),
            token,
        }
    }

    /// Renews the held leases to `lease` from now, every third of `lease`, until dropped.
    pub async fn run_until_stopped(self, pool: Pool, lease: Duration) {
        let mut tick = tokio::time::interval(lease / 3);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(err) = self.renew(&pool, lease).await {
                tracing::warn!(error = %err, "Could not renew job leases");
            }
        }
    }

    async fn renew(&self, pool: &Pool, lease: Duration) -> Result<(), DbError> {
        let held: Vec<(JobId, ClaimToken)> = match self.held.lock() {
            Ok(held) => held.iter().map(|(&token, &job)| (job, token)).collect(),
            Err(_) => return Ok(()),
        };
        if held.is_empty() {
            return Ok(());
        }
        let client = pool.get().await?;
        let renewed = db::job_leases::renew(&client, &held, lease).await?;
        if renewed < held.len() as u64 {
            tracing::debug!(
                held = held.len(),
                renewed,
                "Some held jobs were rescued or taken over"
            );
        }
        Ok(())
    }
}

/// A held job's lease, renewed until dropped.
#[derive(Debug)]
pub struct Lease {
    leases: Leases,
    token: ClaimToken,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Ok(mut held) = self.leases.held.lock() {
            held.remove(&self.token);
        }
    }
}
