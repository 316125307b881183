//! State shared by every request handler.

use metrics_exporter_prometheus::PrometheusHandle;
use moderation_shared::{db::Pool, redis_conn::RedisConn};

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
}
