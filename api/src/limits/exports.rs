//! The bounds on concurrent exports: in total and per account, on one replica.
//!
//! An export streams for as long as its client reads, so it must not hold anything other
//! requests need. Exports read from a pool of their own, sized to the total bound, so a slot
//! always finds a connection and the main pool is never used by a stream. Kept in process like
//! [`super::in_flight`]: with N replicas an account may run up to N times its bound.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use moderation_shared::{
    config::{env_millis, env_positive, ConfigError},
    domain::AccountId,
};

/// How long a refused export is told to wait before retrying, in seconds.
pub const RETRY_AFTER_SECS: u64 = 5;

/// How many exports may run and how long a stalled one may stay.
#[derive(Debug, Clone)]
pub struct ExportSettings {
    /// `APP_EXPORT_CONCURRENCY`: exports running at once on a replica, and the size of their
    /// own connection pool (default 4); one more is refused with 429.
    pub concurrency: usize,
    /// `APP_EXPORT_PER_ACCOUNT`: exports one account may run at once on a replica (default 2);
    /// one more is refused with 429.
    pub per_account: usize,
    /// `APP_EXPORT_WRITE_TIMEOUT_MS`: how long a chunk may wait for the client to take it
    /// (default 30000). A client that reads nothing for that long has its stream cut, and its
    /// connection and slot given back.
    pub write_timeout: Duration,
}

impl Default for ExportSettings {
    fn default() -> Self {
        Self {
            concurrency: 4,
            per_account: 2,
            write_timeout: Duration::from_secs(30),
        }
    }
}

impl ExportSettings {
    /// Reads the environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        let defaults = Self::default();
        Ok(Self {
            concurrency: env_positive("APP_EXPORT_CONCURRENCY", defaults.concurrency)?,
            per_account: env_positive("APP_EXPORT_PER_ACCOUNT", defaults.per_account)?,
            write_timeout: env_millis(
                "APP_EXPORT_WRITE_TIMEOUT_MS",
                defaults.write_timeout,
                1..=3_600_000,
            )?,
        })
    }
}

/// Counts running exports, in total and per account.
#[derive(Debug, Clone)]
pub struct ExportSlots {
    total: usize,
    per_account: usize,
    counts: Arc<Mutex<Counts>>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    accounts: HashMap<AccountId, usize>,
}

/// One running export; dropping it frees the slot.
#[derive(Debug)]
pub struct ExportSlot {
    account: AccountId,
    counts: Arc<Mutex<Counts>>,
}

impl ExportSlots {
    /// At most `total` exports at a time, and `per_account` of one account.
    pub fn new(total: usize, per_account: usize) -> Self {
        Self {
            total,
            per_account,
            counts: Arc::default(),
        }
    }

    /// A slot for `account`, or `None` when either bound is reached.
    pub fn try_enter(&self, account: AccountId) -> Option<ExportSlot> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let mine = counts.accounts.get(&account).copied().unwrap_or(0);
        if counts.total >= self.total || mine >= self.per_account {
            return None;
        }
        counts.total += 1;
        counts.accounts.insert(account, mine + 1);
        Some(ExportSlot {
            account,
            counts: self.counts.clone(),
        })
    }
}

impl Drop for ExportSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts.total = counts.total.saturating_sub(1);
        if let Some(count) = counts.accounts.get_mut(&self.account) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.accounts.remove(&self.account);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_gets_exactly_its_bound_and_all_accounts_the_total() {
        let slots = ExportSlots::new(3, 2);
        let (a, b, c) = (AccountId::new(), AccountId::new(), AccountId::new());

        let first = slots.try_enter(a).unwrap();
        let _second = slots.try_enter(a).unwrap();
        assert!(slots.try_enter(a).is_none(), "one over the account's bound");
        let _third = slots.try_enter(b).unwrap();
        assert!(slots.try_enter(c).is_none(), "one over the total");
        drop(first);
        assert!(slots.try_enter(c).is_some(), "a freed slot is reused");
    }
}
