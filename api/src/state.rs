//! State shared by every request handler.

use metrics_exporter_prometheus::PrometheusHandle;
use moderation_shared::{
    clock, crypto::SealingKey, db::Pool, endpoint_health::HealthSettings, lifecycle::Retention,
    queue::JobQueue, redis_conn::RedisConn, registry::RegistryKey, url_guard::UrlGuard,
};

use crate::{
    auth::principal::Authenticator,
    client_ip::TrustedProxies,
    intake::Intake,
    limits::{
        exports::{ExportSettings, ExportSlots},
        in_flight::InFlight,
        Limiter,
    },
};

/// Held in `web::Data` by every worker thread.
pub struct AppState {
    /// Postgres pool.
    pub pool: Pool,
    /// Redis handle in this deployment's namespace.
    pub redis: RedisConn,
    /// Key lookup with its short cache.
    pub auth: Authenticator,
    /// The producer side of the job queue.
    pub queue: JobQueue,
    /// Persists and enqueues submissions, batched.
    pub intake: Intake,
    /// Checks submitted URLs.
    pub url_guard: UrlGuard,
    /// Opens and seals webhook signing secrets.
    pub encryption_key: SealingKey,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// Rate limits and the failed-authentication lockout (Redis).
    pub limiter: Limiter,
    /// Authenticating requests in flight per source address (this replica).
    pub in_flight: InFlight,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: TrustedProxies,
    /// Running exports, in total and per account (this replica).
    pub export_slots: ExportSlots,
    /// The exports' own pool, one connection per slot: a stream never holds a connection of
    /// [`Self::pool`].
    pub export_pool: Pool,
    /// The bounds and write deadline of exports.
    pub export_settings: ExportSettings,
    /// The HMAC key of registry identifiers.
    pub registry_key: RegistryKey,
    /// The longest any request takes to be answered (`APP_REQUEST_DEADLINE_MS`).
    pub request_deadline: std::time::Duration,
    /// How long jobs are kept: reads never return a row past it.
    pub retention: Retention,
    /// Endpoint health: the `disable_at` the state shows.
    pub health: HealthSettings,
}

impl AppState {
    /// The least id still kept now: every read asks for ids at or above it.
    pub fn floor(&self) -> uuid::Uuid {
        self.retention.floor(clock::now())
    }
}
