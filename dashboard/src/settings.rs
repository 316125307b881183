//! The dashboard's settings, from the environment.

use moderation_shared::{
    client_ip::TrustedProxies,
    config::{env_bool, env_or, env_raw, ConfigError, DatabaseSettings, RedisSettings},
    crypto::SealingKey,
    endpoint_health::HealthSettings,
    lifecycle::Retention,
    limits::LimitSettings,
    registry::RegistryKey,
    url_guard::UrlGuard,
};

/// Everything the dashboard needs to start.
#[derive(Debug, Clone)]
pub struct DashboardSettings {
    /// Postgres.
    pub database: DatabaseSettings,
    /// Redis (sessions, the lockout, the job queue).
    pub redis: RedisSettings,
    /// `APP_HOST`: the address to listen on (default `0.0.0.0`).
    pub host: String,
    /// `DASHBOARD_PORT`: the port to listen on (default 8081; 0 picks a free one).
    pub port: u16,
    /// `APP_DASHBOARD_INSECURE_COOKIES`: leaves `Secure` off the session cookie, so a browser
    /// keeps it over plain HTTP (development and tests only; default false).
    pub insecure_cookies: bool,
    /// `APP_TRUSTED_PROXIES`: whose `X-Forwarded-For` names the source address of a sign-in.
    pub trusted_proxies: TrustedProxies,
    /// The failed-authentication lockout, shared with the api (`APP_AUTH_FAILURE_*`).
    pub limits: LimitSettings,
    /// Checks the media URLs submitted from the dashboard (`APP_ALLOW_PRIVATE_URLS`).
    pub url_guard: UrlGuard,
    /// `APP_ENCRYPTION_KEY` (required): opens and seals webhook signing secrets.
    pub encryption_key: SealingKey,
    /// `APP_REGISTRY_KEY` (required, the api's): the key of stored registry identifiers, for
    /// members' reports and checks.
    pub registry_key: RegistryKey,
    /// `APP_RETENTION_DAYS` and `APP_CONTENT_RETENTION_DAYS`, as the api reads them: pages
    /// never show a row past retention.
    pub retention: Retention,
    /// Endpoint health (contract 17), as the api and dispatcher read it: the `disable_at` the
    /// webhook page shows.
    pub health: HealthSettings,
}

impl DashboardSettings {
    /// Reads the environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self {
            database: DatabaseSettings::from_env()?,
            redis: RedisSettings::from_env()?,
            host: env_raw("APP_HOST")?.unwrap_or_else(|| "0.0.0.0".to_owned()),
            port: env_or("DASHBOARD_PORT", 8081u16)?,
            insecure_cookies: env_bool("APP_DASHBOARD_INSECURE_COOKIES", false)?,
            trusted_proxies: env_raw("APP_TRUSTED_PROXIES")?
                .unwrap_or_default()
                .parse()
                .map_err(|e| ConfigError::new("APP_TRUSTED_PROXIES", format!("{e}")))?,
            limits: LimitSettings::from_env()?,
            url_guard: UrlGuard::system(env_bool("APP_ALLOW_PRIVATE_URLS", false)?),
            encryption_key: SealingKey::from_env()?,
            registry_key: RegistryKey::from_env()?,
            retention: Retention::from_env()?,
            health: HealthSettings::from_env()?,
        })
    }

    /// Settings for tests: loopback, a free port, cookies without `Secure` (plain HTTP).
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
            insecure_cookies: true,
            trusted_proxies: TrustedProxies::default(),
            limits: LimitSettings::default(),
            url_guard: UrlGuard::system(false),
            encryption_key,
            registry_key,
            retention: Retention::default(),
            health: HealthSettings::default(),
        }
    }
}
