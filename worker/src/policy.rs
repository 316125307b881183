//! Account policies, compiled once per (account, policy version) and cached.
//!
//! A job is claimed together with its account's `policy_version`, which the api bumps with
//! every change to the account's custom categories or blocklist. A cached policy is therefore
//! never used for a job claimed after a change: the new version misses the cache and loads.

use std::{sync::Arc, time::Duration};

use moderation_shared::{
    db::{self, jobs::ClaimedJob, DbError, Pool},
    domain::AccountId,
};

use crate::classify::{terms::TermMatcher, CustomCategory, Policy};

/// What an account term flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountTerm {
    /// A term of the account's own blocklist.
    Blocklist,
    /// A keyword of the custom category with this name.
    Custom(String),
}

/// An account's policy with its terms compiled.
#[derive(Debug)]
pub struct AccountPolicy {
    /// What the account asks to be checked.
    pub policy: Policy,
    /// The account's blocklist terms and custom-category keywords.
    pub terms: TermMatcher<AccountTerm>,
}

impl AccountPolicy {
    /// Compiles `policy`.
    pub fn new(policy: Policy) -> Self {
        let blocklist = policy
            .account_terms
            .iter()
            .map(|term| (term.clone(), AccountTerm::Blocklist));
        let keywords = policy.custom.iter().flat_map(|category| {
            category
                .keywords
                .iter()
                .map(|keyword| (keyword.clone(), AccountTerm::Custom(category.name.clone())))
        });
        let terms = TermMatcher::new(blocklist.chain(keywords));
        Self { policy, terms }
    }
}

/// Compiled policies by (account, policy version, NSFW check).
pub struct PolicyCache {
    cache: moka::sync::Cache<(AccountId, i64, bool), Arc<AccountPolicy>>,
}

impl Default for PolicyCache {
    fn default() -> Self {
        Self::new()
    }
}

impl PolicyCache {
    /// An empty cache holding up to 10,000 accounts' policies for 10 minutes each.
    pub fn new() -> Self {
        Self {
            cache: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_idle(Duration::from_secs(600))
                .build(),
        }
    }

    /// The policy of `job`'s account at the version it was claimed with.
    pub async fn load(&self, pool: &Pool, job: &ClaimedJob) -> Result<Arc<AccountPolicy>, DbError> {
        let key = (job.account_id, job.policy_version, job.nsfw_check);
        if let Some(policy) = self.cache.get(&key) {
            return Ok(policy);
        }
        let client = pool.get().await?;
        let custom = db::custom_categories::enabled(&client, job.account_id)
            .await?
            .into_iter()
            .map(|row| CustomCategory {
                name: row.name,
                description: row.description,
                keywords: row.keywords,
            })
            .collect();
        let account_terms = db::blocklist::terms(&client, job.account_id).await?;
        let policy = Arc::new(AccountPolicy::new(Policy {
            nsfw_check: job.nsfw_check,
            custom,
            account_terms,
        }));
        self.cache.insert(key, policy.clone());
        Ok(policy)
    }
}
