//! The dispatcher: owns the signed webhook schedule. It claims due deliveries from Postgres,
//! signs, sends and records each attempt. It never classifies and never answers API requests.

use std::{future::Future, net::SocketAddr, time::Duration};

use moderation_shared::{
    config::{env_or, ConfigError, DatabaseSettings, RedisSettings},
    db::Pool,
    redis_conn::RedisConn,
    runtime::{self, MetricsListener, StartupError},
    telemetry,
};

/// The dispatcher's settings.
#[derive(Debug, Clone)]
pub struct DispatcherSettings {
    /// Postgres.
    pub database: DatabaseSettings,
    /// Redis.
    pub redis: RedisSettings,
    /// `METRICS_PORT`: where `/metrics` is served (default 9090; 0 picks a free port).
    pub metrics_addr: SocketAddr,
}

impl DispatcherSettings {
    /// Reads the environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self {
            database: DatabaseSettings::from_env()?,
            redis: RedisSettings::from_env()?,
            metrics_addr: SocketAddr::from(([0, 0, 0, 0], env_or("METRICS_PORT", 9090u16)?)),
        })
    }
}

/// A started dispatcher process.
pub struct Dispatcher {
    metrics: MetricsListener,
    pool: Pool,
    redis: RedisConn,
}

impl Dispatcher {
    /// Connects to Postgres and Redis and binds the metrics port.
    pub async fn build(settings: DispatcherSettings) -> Result<Self, StartupError> {
        let (pool, redis) = runtime::connect(&settings.database, &settings.redis).await?;
        let metrics = MetricsListener::bind(settings.metrics_addr).await?;
        tracing::info!(metrics_port = metrics.port(), "Dispatcher started");
        Ok(Self {
            metrics,
            pool,
            redis,
        })
    }

    /// The port `/metrics` is served on.
    pub fn metrics_port(&self) -> u16 {
        self.metrics.port()
    }

    /// Runs until `shutdown` resolves.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()>) {
        metrics::gauge!(telemetry::PROCESS_UP, "process" => "dispatcher").set(1.0);
        tokio::select! {
            () = self.metrics.serve() => {}
            () = runtime::watch_dependencies(self.pool, self.redis, Duration::from_secs(5)) => {}
            () = shutdown => tracing::info!("Dispatcher stopping"),
        }
    }
}
