//! State shared by every request handler.

use metrics_exporter_prometheus::PrometheusHandle;
use moderation_shared::{db::Pool, redis_conn::RedisConn, registry::RegistryKey};

use crate::auth::Authenticator;

/// Held in `web::Data` by every worker thread.
pub struct AppState {
    /// Postgres pool.
    pub pool: Pool,
    /// Redis handle in this deployment's namespace.
    pub redis: RedisConn,
    /// Key lookup with its short cache.
    pub auth: Authenticator,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// The HMAC key of registry identifiers.
    pub registry_key: RegistryKey,
}
