//! The dispatcher's settings, from the environment.

use std::{net::SocketAddr, time::Duration};

use moderation_shared::{
    config::{
        env_bool, env_millis, env_or, env_positive, env_raw, extra_ca_pem_from_env, metrics_addr,
        postgres_config, ConfigError, DatabaseSettings, RedisSettings, Secret,
    },
    crypto::SealingKey,
    endpoint_health::HealthSettings,
    queue::QueueSettings,
    signing,
    url_guard::{self, UrlGuard, UrlUse},
};

use crate::schedule::Schedule;

/// How often the queue depth is sampled by default (`APP_QUEUE_SAMPLE_MS`).
const DEPTH_SAMPLE: Duration = Duration::from_secs(5);
/// The default whole-attempt deadline (`APP_WEBHOOK_TIMEOUT_MS`).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts in flight at once by default (`APP_DISPATCH_CONCURRENCY`).
const CONCURRENCY: usize = 256;
/// The default longest sleep without a notification (`APP_DISPATCH_IDLE_POLL_MS`).
const IDLE_POLL: Duration = Duration::from_secs(1);
/// How long a review item may wait by default before its alert fires (`APP_REVIEW_SLA_S`).
const REVIEW_SLA: Duration = Duration::from_secs(4 * 3600);

/// Everything the dispatcher needs to start.
#[derive(Debug, Clone)]
pub struct DispatcherSettings {
    /// Postgres.
    pub database: DatabaseSettings,
    /// `APP_DATABASE_DIRECT_URL` (default `DATABASE_URL`): the connection that `LISTEN`s for
    /// new deliveries, which must be a session of its own, so straight to Postgres when
    /// `DATABASE_URL` goes through PgBouncer in transaction mode.
    pub direct_url: Secret<String>,
    /// Redis (`REDIS_URL`, `APP_REDIS_NAMESPACE`): only read, to sample the queue depth.
    pub redis: RedisSettings,
    /// `APP_QUEUE_MIN_IDLE_MS`, as the workers read it: the takeover time that makes a held
    /// queue entry count as `retrying`.
    pub queue_min_idle: Duration,
    /// `APP_QUEUE_SAMPLE_MS`: how often the queue depth of every modality is sampled
    /// (default 5000, at least 10).
    pub depth_sample: Duration,
    /// `APP_HOST` and `METRICS_PORT`: where `/metrics` is served (default `0.0.0.0:9090`;
    /// port 0 picks a free one).
    pub metrics_addr: SocketAddr,
    /// `APP_ENCRYPTION_KEY`: opens the sealed signing secrets.
    pub encryption_key: SealingKey,
    /// Checks targets; `APP_ALLOW_PRIVATE_URLS=true` (development and tests only) lets them
    /// reach private addresses.
    pub url_guard: UrlGuard,
    /// `APP_EXTRA_CA_FILE`: PEM roots trusted besides the system's.
    pub extra_ca_pem: Option<Vec<u8>>,
    /// The retry schedule (`APP_WEBHOOK_SCHEDULE_SCALE` multiplies its delays).
    pub schedule: Schedule,
    /// `APP_WEBHOOK_TIMEOUT_MS`: the whole-attempt deadline (default 10 000).
    pub attempt_timeout: Duration,
    /// `APP_DISPATCH_CONCURRENCY`: attempts in flight at once (default 256).
    pub concurrency: usize,
    /// `APP_DISPATCH_IDLE_POLL_MS`: the longest the dispatcher sleeps between looks for due
    /// work when no notification wakes it (default 1000).
    pub idle_poll: Duration,
    /// `APP_REVIEW_SLA_S`: how long a review item may wait pending (default 14 400, 4 hours);
    /// published as the gauge `review_sla_seconds`, which the `ReviewQueueOverSla` alert
    /// compares the oldest pending item's wait with.
    pub review_sla: Duration,
    /// When an account's URL is disabled on its own and how long held deliveries are kept
    /// (`APP_WEBHOOK_AUTO_DISABLE`, `APP_WEBHOOK_DISABLE_AFTER_S`,
    /// `APP_WEBHOOK_DISABLE_MIN_FAILURES`, `APP_WEBHOOK_HOLD_S`).
    pub health: HealthSettings,
    /// `APP_OPERATOR_WEBHOOK_URL` and `APP_OPERATOR_WEBHOOK_SECRET`: where the notices of
    /// endpoint health go, if anywhere.
    pub operator: Option<OperatorWebhook>,
}

/// The operator's webhook: notices of endpoint health, signed as deliveries are.
#[derive(Debug, Clone)]
pub struct OperatorWebhook {
    /// `APP_OPERATOR_WEBHOOK_URL`.
    pub url: String,
    /// `APP_OPERATOR_WEBHOOK_SECRET` (`whsec_` and base64).
    pub secret: Secret<String>,
}

impl OperatorWebhook {
    /// Reads `APP_OPERATOR_WEBHOOK_URL` (optional) and, when it is set,
    /// `APP_OPERATOR_WEBHOOK_SECRET` (required then, in the `whsec_` form).
    pub fn from_env() -> Result<Option<Self>, ConfigError> {
        let Some(url) = env_raw("APP_OPERATOR_WEBHOOK_URL")? else {
            return Ok(None);
        };
        let url = url_guard::parse(&url, UrlUse::Webhook)
            .map_err(|e| ConfigError::new("APP_OPERATOR_WEBHOOK_URL", e.to_string()))?
            .to_string();
        let secret = env_raw("APP_OPERATOR_WEBHOOK_SECRET")?.ok_or_else(|| {
            ConfigError::new(
                "APP_OPERATOR_WEBHOOK_SECRET",
                "is required when APP_OPERATOR_WEBHOOK_URL is set",
            )
        })?;
        let secret = secret.trim().to_owned();
        if !signing::is_valid_secret(&secret) {
            return Err(ConfigError::new(
                "APP_OPERATOR_WEBHOOK_SECRET",
                "must be `whsec_` followed by base64 of at least 16 bytes",
            ));
        }
        Ok(Some(Self {
            url,
            secret: Secret::new(secret),
        }))
    }
}

impl DispatcherSettings {
    /// Reads the environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        let scale = env_or("APP_WEBHOOK_SCHEDULE_SCALE", 1.0f64)?;
        if !(scale.is_finite() && scale > 0.0) {
            return Err(ConfigError::new(
                "APP_WEBHOOK_SCHEDULE_SCALE",
                "must be a positive number",
            ));
        }
        let concurrency = env_positive("APP_DISPATCH_CONCURRENCY", CONCURRENCY)?;
        let extra_ca_pem = extra_ca_pem_from_env()?;
        let database = DatabaseSettings::from_env()?;
        let direct_url = match env_raw("APP_DATABASE_DIRECT_URL")? {
            Some(url) => {
                postgres_config(&url, "APP_DATABASE_DIRECT_URL")?;
                Secret::new(url)
            }
            None => database.url.clone(),
        };
        Ok(Self {
            database,
            direct_url,
            redis: RedisSettings::from_env()?,
            queue_min_idle: QueueSettings::from_env()?.min_idle,
            depth_sample: env_millis("APP_QUEUE_SAMPLE_MS", DEPTH_SAMPLE, 10..)?,
            metrics_addr: metrics_addr(9090)?,
            encryption_key: SealingKey::from_env()?,
            url_guard: UrlGuard::system(env_bool("APP_ALLOW_PRIVATE_URLS", false)?),
            extra_ca_pem,
            schedule: Schedule::scaled(scale),
            attempt_timeout: env_millis("APP_WEBHOOK_TIMEOUT_MS", ATTEMPT_TIMEOUT, 1..)?,
            concurrency,
            idle_poll: env_millis("APP_DISPATCH_IDLE_POLL_MS", IDLE_POLL, 1..)?,
            review_sla: Duration::from_secs(env_positive(
                "APP_REVIEW_SLA_S",
                REVIEW_SLA.as_secs(),
            )?),
            health: HealthSettings::from_env()?,
            operator: OperatorWebhook::from_env()?,
        })
    }

    /// Settings for tests and local runs: the default schedule and timings, metrics on a free
    /// loopback port, targets allowed at private addresses (a local receiver is on loopback).
    pub fn for_local(
        database: DatabaseSettings,
        redis: RedisSettings,
        encryption_key: SealingKey,
    ) -> Self {
        Self {
            direct_url: database.url.clone(),
            database,
            redis,
            queue_min_idle: QueueSettings::default().min_idle,
            depth_sample: DEPTH_SAMPLE,
            metrics_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            encryption_key,
            url_guard: UrlGuard::system(true),
            extra_ca_pem: None,
            schedule: Schedule::default(),
            attempt_timeout: ATTEMPT_TIMEOUT,
            concurrency: CONCURRENCY,
            idle_poll: IDLE_POLL,
            review_sla: REVIEW_SLA,
            health: HealthSettings::default(),
            operator: None,
        }
    }
}
