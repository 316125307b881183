//! Process plumbing shared by the worker and the dispatcher: checked connections at start,
//! the metrics listener and the shutdown signal.

use std::net::SocketAddr;

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;

use crate::{
    config::{ConfigError, DatabaseSettings, RedisMode, RedisSettings},
    db::{self, Pool},
    redis_conn::RedisConn,
    telemetry,
};

/// Why a process could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Postgres did not answer.
    #[error("cannot reach Postgres")]
    Postgres(#[source] anyhow::Error),
    /// Redis did not answer.
    #[error("cannot reach Redis")]
    Redis(#[source] redis::RedisError),
    /// An outgoing HTTP client could not be built (e.g. a bad extra CA file).
    #[error("cannot build the HTTP client")]
    HttpClient(#[source] anyhow::Error),
    /// A built-in model is missing (with `APP_LOCAL_MODELS=required`) or cannot be read.
    #[error("cannot load the {model} model")]
    Model {
        /// The model's name, as in the `classifier_model_loaded` gauge.
        model: &'static str,
        /// Why: names the missing or unreadable file.
        #[source]
        source: anyhow::Error,
    },
    /// The metrics port could not be bound.
    #[error("cannot listen for metrics on {addr}")]
    Metrics {
        /// The address tried.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Opens the pool and the Redis handle and checks that both answer.
pub async fn connect(
    database: &DatabaseSettings,
    redis: &RedisSettings,
) -> Result<(Pool, RedisConn), StartupError> {
    let pool = db::pool(database)?;
    let client = pool
        .get()
        .await
        .map_err(|e| StartupError::Postgres(e.into()))?;
    client
        .simple_query("SELECT 1")
        .await
        .map_err(|e| StartupError::Postgres(e.into()))?;
    drop(client);
    let redis = RedisConn::new(redis)?;
    check_redis_layout(&redis).await?;
    redis.ping().await.map_err(StartupError::Redis)?;
    Ok((pool, redis))
}

/// In cluster and sentinel modes, checks at start that Redis is laid out as configured: a
/// cluster node answers at some seed of `REDIS_URL`, or the sentinels name a master called
/// `REDIS_SENTINEL_MASTER`. A standalone server is not asked (the api, the dispatcher and the
/// dashboard start while it is down and recover when it returns).
pub async fn check_redis_layout(redis: &RedisConn) -> Result<(), StartupError> {
    let mode = redis.mode().clone();
    if mode == RedisMode::Standalone {
        return Ok(());
    }
    let Err(err) = redis.ping().await else {
        return Ok(());
    };
    Err(match mode {
        RedisMode::Sentinel { master }
            if err.kind() == redis::ErrorKind::MasterNameNotFoundBySentinel =>
        {
            ConfigError::new(
                "REDIS_SENTINEL_MASTER",
                format!("no sentinel of REDIS_URL knows a master named {master:?}: {err}"),
            )
        }
        RedisMode::Sentinel { .. } => ConfigError::new(
            "REDIS_URL",
            format!("no sentinel of REDIS_URL named a reachable master: {err}"),
        ),
        _ => ConfigError::new(
            "REDIS_URL",
            format!("no seed node of the cluster answered (REDIS_MODE=cluster): {err}"),
        ),
    }
    .into())
}

/// A bound metrics listener; serve it with [`MetricsListener::serve`].
pub struct MetricsListener {
    listener: TcpListener,
    handle: PrometheusHandle,
}

impl MetricsListener {
    /// Binds `addr` (port 0 picks a free port) and installs the recorder, so everything
    /// recorded from here on is exported.
    pub async fn bind(addr: SocketAddr) -> Result<Self, StartupError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| StartupError::Metrics { addr, source })?;
        Ok(Self {
            listener,
            handle: telemetry::install_metrics(),
        })
    }

    /// The port bound.
    pub fn port(&self) -> u16 {
        self.listener.local_addr().map_or(0, |a| a.port())
    }

    /// Serves `GET /metrics` until dropped.
    pub async fn serve(self) {
        telemetry::serve_metrics(self.listener, self.handle).await;
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(err) => {
                    tracing::warn!(error = %err, "Cannot listen for SIGTERM; only Ctrl-C stops");
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Probes Postgres and Redis every `every`, counting outcomes in
/// [`telemetry::DEPENDENCY_CHECKS_TOTAL`], until dropped.
pub async fn watch_dependencies(pool: Pool, redis: RedisConn, every: std::time::Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        telemetry::record_pool_use(&pool);
        let postgres = tokio::time::timeout(every, async {
            let client = pool.get().await.map_err(anyhow::Error::from)?;
            client
                .simple_query("SELECT 1")
                .await
                .map_err(anyhow::Error::from)?;
            anyhow::Ok(())
        })
        .await;
        let redis = tokio::time::timeout(every, redis.ping()).await;
        for (dependency, ok) in [
            ("postgres", matches!(postgres, Ok(Ok(())))),
            ("redis", matches!(redis, Ok(Ok(())))),
        ] {
            let outcome = if ok { "ok" } else { "error" };
            if !ok {
                tracing::warn!(dependency, "Dependency check failed");
            }
            metrics::counter!(telemetry::DEPENDENCY_CHECKS_TOTAL, "dependency" => dependency, "outcome" => outcome)
                .increment(1);
        }
    }
}
