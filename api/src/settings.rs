//! The api's settings, from the environment.

use std::time::Duration;

use moderation_shared::{
    config::{
        env_bool, env_millis, env_or, env_positive, env_raw, ConfigError, DatabaseSettings,
        RedisSettings,
    },
    crypto::SealingKey,
    endpoint_health::HealthSettings,
    lifecycle::Retention,
    registry::RegistryKey,
    url_guard::UrlGuard,
};

use crate::{
    client_ip::TrustedProxies,
    limits::{exports::ExportSettings, LimitSettings},
};

/// How long a looked-up key is trusted by default (`APP_AUTH_CACHE_MS`).
const AUTH_CACHE_TTL: Duration = Duration::from_secs(2);

/// How long a request may take by default (`APP_REQUEST_DEADLINE_MS`).
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// Everything the api needs to start.
#[derive(Debug, Clone)]
pub struct ApiSettings {
    /// Postgres.
    pub database: DatabaseSettings,
    /// Redis.
    pub redis: RedisSettings,
    /// `APP_HOST`: the address to listen on (default `0.0.0.0`).
    pub host: String,
    /// `PORT`: the port to listen on (default 8080; 0 picks a free one).
    pub port: u16,
    /// `APP_HTTP_WORKERS`: actix worker threads (default: one per two cores, at least one).
    pub http_workers: usize,
    /// `APP_AUTH_CACHE_MS`: how long a looked-up key is trusted before it is read again
    /// (default 2000). A disabled or deleted key, or a terminated account, takes effect
    /// within this time on every replica; it must stay under 5 s.
    pub auth_cache_ttl: Duration,
    /// Checks media and webhook URLs. `APP_ALLOW_PRIVATE_URLS=true` (development and tests
    /// only) lets them reach loopback and private addresses.
    pub url_guard: UrlGuard,
    /// `APP_ENCRYPTION_KEY`: seals webhook signing secrets at rest (required).
    pub encryption_key: SealingKey,
    /// `APP_TRUSTED_PROXIES`: comma-separated IPs and CIDR blocks of the proxies whose
    /// `X-Forwarded-For` names the source address (default none: the peer is the source).
    pub trusted_proxies: TrustedProxies,
    /// Rate-limit windows and the failed-authentication lockout.
    pub limits: LimitSettings,
    /// The bounds on concurrent exports and their write deadline.
    pub exports: ExportSettings,
    /// `APP_REGISTRY_KEY` (required): 32 bytes in base64, the HMAC key turning the hashes
    /// members send into the identifiers the registry stores.
    pub registry_key: RegistryKey,
    /// `APP_REQUEST_DEADLINE_MS`: the longest any request takes to be answered (default
    /// 10 000, 100 to 600 000): past it, 503 (a submission's carries its `job_id`). A streamed
    /// export's body has its own write deadline.
    pub request_deadline: Duration,
    /// `APP_RETENTION_DAYS` and `APP_CONTENT_RETENTION_DAYS`: reads never return a row past
    /// retention.
    pub retention: Retention,
    /// Endpoint health (contract 17): the `disable_at` the state shows.
    pub health: HealthSettings,
}

impl ApiSettings {
    /// Reads the environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        let http_workers = env_positive("APP_HTTP_WORKERS", default_workers())?;
        Ok(Self {
            database: DatabaseSettings::from_env()?,
            redis: RedisSettings::from_env()?,
            host: env_raw("APP_HOST")?.unwrap_or_else(|| "0.0.0.0".to_owned()),
            port: env_or("PORT", 8080u16)?,
            http_workers,
            // At most 4000 so revocations take effect within 5 seconds.
            auth_cache_ttl: env_millis("APP_AUTH_CACHE_MS", AUTH_CACHE_TTL, 0..=4000)?,
            url_guard: UrlGuard::system(env_bool("APP_ALLOW_PRIVATE_URLS", false)?),
            encryption_key: SealingKey::from_env()?,
            trusted_proxies: env_raw("APP_TRUSTED_PROXIES")?
                .unwrap_or_default()
                .parse()
                .map_err(|e| ConfigError::new("APP_TRUSTED_PROXIES", format!("{e}")))?,
            limits: LimitSettings::from_env()?,
            exports: ExportSettings::from_env()?,
            registry_key: RegistryKey::from_env()?,
            request_deadline: env_millis(
                "APP_REQUEST_DEADLINE_MS",
                REQUEST_DEADLINE,
                100..=600_000,
            )?,
            retention: Retention::from_env()?,
            health: HealthSettings::from_env()?,
        })
    }

    /// Settings for tests and embedding: loopback, a free port, two workers.
    pub fn for_local(
        database: DatabaseSettings,
        redis: RedisSettings,
        encryption_key: SealingKey,
        registry_key: RegistryKey,
    ) -> Self {
        Self {
            database,
            redis,
            host: "127.0.0.1".to_owned(),
            port: 0,
            http_workers: 2,
            auth_cache_ttl: AUTH_CACHE_TTL,
            url_guard: UrlGuard::system(false),
            encryption_key,
            trusted_proxies: TrustedProxies::default(),
            limits: LimitSettings::default(),
            exports: ExportSettings::default(),
            registry_key,
            request_deadline: REQUEST_DEADLINE,
            retention: Retention::default(),
            health: HealthSettings::default(),
        }
    }
}

/// One thread serves thousands of requests a second, and the api mostly waits on Postgres and
/// Redis, which often share its host. On the 2-core bench machine one thread did 6,097 registry
/// checks/s where two did 4,800-4,900 (and 2,429 completed jobs/s against 2,236-2,302): threads
/// beyond the cores left free cost more in switching than they add.
fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (usize::from(n) / 2).max(1))
}
