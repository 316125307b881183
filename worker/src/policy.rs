//! Account policies, compiled once per (account, settings stamp) and cached: the custom
//! categories, the blocklist terms and the active and shadow policy versions.
//!
//! A job is claimed together with its account's settings stamp, which every change to the
//! account's custom categories, blocklist or policy versions bumps in its own transaction. A
//! cached policy is therefore never used for a job claimed after a change: the new stamp misses
//! the cache and loads. A job claimed before a change and decided after it is refused when its
//! result is written (`db::jobs::Finish::Stale`) and decided again.

use std::{sync::Arc, time::Duration};

use moderation_shared::{
    db::{self, jobs::ClaimedJob, policy_versions::PolicyVersion, DbError, Pool},
    domain::AccountId,
    policy::{PolicyDefaults, PolicyDoc},
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
    /// The active policy version (`None` for an account without versions: the service
    /// defaults decide).
    pub active: Option<PolicyVersion>,
    /// The shadow version, if one runs.
    pub shadow: Option<PolicyVersion>,
    /// The service defaults, for an account without versions.
    pub defaults: PolicyDoc,
}

impl AccountPolicy {
    /// Compiles `policy`, without policy versions (the service `defaults` decide).
    pub fn new(policy: Policy, defaults: PolicyDefaults) -> Self {
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
        Self {
            policy,
            terms,
            active: None,
            shadow: None,
            defaults: PolicyDoc::defaults(&defaults),
        }
    }
}

/// Compiled policies by (account, settings stamp, NSFW check).
pub struct PolicyCache {
    cache: moka::sync::Cache<(AccountId, i64, bool), Arc<AccountPolicy>>,
    defaults: PolicyDefaults,
}

impl PolicyCache {
    /// An empty cache holding up to 10,000 accounts' policies for 10 minutes each; accounts
    /// without policy versions are decided by `defaults`.
    pub fn new(defaults: PolicyDefaults) -> Self {
        Self {
            cache: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_idle(Duration::from_secs(600))
                .build(),
            defaults,
        }
    }

    /// The policy of `job`'s account at the stamp it was claimed with.
    pub async fn load(&self, pool: &Pool, job: &ClaimedJob) -> Result<Arc<AccountPolicy>, DbError> {
        let key = (job.account_id, job.settings_stamp, job.nsfw_check);
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
        let deciding = db::policy_versions::deciding(&client, job.account_id).await?;
        let mut policy = AccountPolicy::new(
            Policy {
                nsfw_check: job.nsfw_check,
                custom,
                account_terms,
            },
            self.defaults,
        );
        policy.active = deciding.active;
        policy.shadow = deciding.shadow;
        let policy = Arc::new(policy);
        self.cache.insert(key, policy.clone());
        Ok(policy)
    }
}
