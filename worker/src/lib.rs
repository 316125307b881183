//! The worker fleet: takes jobs of the chosen modalities off the queue, fetches media and
//! classifies. It never answers API requests and never sends webhooks.

use std::{future::Future, net::SocketAddr, time::Duration};

use moderation_shared::{
    config::{env_or, ConfigError, DatabaseSettings, RedisSettings},
    db::Pool,
    domain::Modality,
    redis_conn::RedisConn,
    runtime::{self, MetricsListener, StartupError},
    telemetry,
};

/// The worker's settings.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// Postgres.
    pub database: DatabaseSettings,
    /// Redis.
    pub redis: RedisSettings,
    /// The modalities this process works on (`--modality`).
    pub modalities: Vec<Modality>,
    /// `METRICS_PORT`: where `/metrics` is served (default 9091; 0 picks a free port).
    pub metrics_addr: SocketAddr,
}

impl WorkerSettings {
    /// Reads the environment; `modalities` come from the command line.
    pub fn from_env(modalities: Vec<Modality>) -> Result<Self, ConfigError> {
        Ok(Self {
            database: DatabaseSettings::from_env()?,
            redis: RedisSettings::from_env()?,
            modalities,
            metrics_addr: SocketAddr::from(([0, 0, 0, 0], env_or("METRICS_PORT", 9091u16)?)),
        })
    }
}

/// A started worker process.
pub struct Worker {
    metrics: MetricsListener,
    pool: Pool,
    redis: RedisConn,
}

impl Worker {
    /// Connects to Postgres and Redis and binds the metrics port.
    pub async fn build(settings: WorkerSettings) -> Result<Self, StartupError> {
        let (pool, redis) = runtime::connect(&settings.database, &settings.redis).await?;
        let metrics = MetricsListener::bind(settings.metrics_addr).await?;
        let names: Vec<&str> = settings.modalities.iter().map(|m| m.as_str()).collect();
        tracing::info!(modalities = ?names, metrics_port = metrics.port(), "Worker started");
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
        metrics::gauge!(telemetry::PROCESS_UP, "process" => "worker").set(1.0);
        tokio::select! {
            () = self.metrics.serve() => {}
            () = runtime::watch_dependencies(self.pool, self.redis, Duration::from_secs(5)) => {}
            () = shutdown => tracing::info!("Worker stopping"),
        }
    }
}
