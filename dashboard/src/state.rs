//! State shared by every request handler.

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use moderation_shared::{
    client_ip::TrustedProxies, crypto::SealingKey, db::Pool, lifecycle::Retention, limits::Limiter,
    queue::JobQueue, redis_conn::RedisConn, registry::RegistryKey, url_guard::UrlGuard,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::{preferences::Preferences, sessions::SessionStore};

/// Held in `web::Data` by every worker thread.
pub struct AppState {
    /// Postgres pool.
    pub pool: Pool,
    /// Sessions and one-time notices (Redis).
    pub sessions: SessionStore,
    /// The users' own settings (Redis).
    pub preferences: Preferences,
    /// The failed-authentication lockout shared with the api.
    pub limiter: Limiter,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: TrustedProxies,
    /// The producer side of the job queue, for submissions.
    pub queue: JobQueue,
    /// Checks submitted media URLs.
    pub url_guard: UrlGuard,
    /// Opens and seals webhook signing secrets.
    pub encryption_key: SealingKey,
    /// Turns a member's identifier hashes into stored registry identifiers, as the api does.
    pub registry_key: RegistryKey,
    /// Redis, for the registry's daily check quota (shared with the api).
    pub redis: RedisConn,
    /// An Argon2id hash no password matches: a sign-in for an unknown address verifies
    /// against it, so both take as long.
    pub decoy_hash: String,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// The exports running on this replica.
    pub exports: ExportPermits,
    /// Whether cookies go without `Secure` (development over plain HTTP).
    pub insecure_cookies: bool,
    /// How long jobs are kept: pages never show a row past it.
    pub retention: Retention,
    /// Endpoint health: the `disable_at` the webhook page shows.
    pub health: moderation_shared::endpoint_health::HealthSettings,
}

impl AppState {
    /// The least id still kept now: every read asks for ids at or above it.
    pub fn floor(&self) -> uuid::Uuid {
        self.retention.floor(moderation_shared::clock::now())
    }
}

/// Exports one replica runs at once.
pub const EXPORTS_AT_ONCE: usize = 2;

/// The running exports of this replica.
#[derive(Debug, Clone)]
pub struct ExportPermits(Arc<Semaphore>);

impl Default for ExportPermits {
    fn default() -> Self {
        Self(Arc::new(Semaphore::new(EXPORTS_AT_ONCE)))
    }
}

impl ExportPermits {
    /// A permit for one more export, held until it ends; `None` when all are taken.
    pub fn try_enter(&self) -> Option<OwnedSemaphorePermit> {
        self.0.clone().try_acquire_owned().ok()
    }
}
