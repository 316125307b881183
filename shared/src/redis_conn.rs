//! A lazily (re)connecting Redis handle.
//!
//! Processes start while Redis is down and recover when it returns: the multiplexed connection
//! is opened on first use, and dropped after a connection-level error so the next call opens a
//! new one. Every connect and every reply has a deadline, so nothing waits on a dead server.

use std::{future::Future, sync::Arc, time::Duration};

use redis::{aio::MultiplexedConnection, AsyncConnectionConfig, RedisError, RedisResult};
use tokio::sync::Mutex;

use crate::config::{ConfigError, RedisSettings};

/// How long opening a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long one reply may take.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// A cloneable handle to Redis within one key namespace.
#[derive(Clone)]
pub struct RedisConn {
    client: redis::Client,
    current: Arc<Mutex<Option<MultiplexedConnection>>>,
    namespace: Arc<str>,
}

impl std::fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConn")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl RedisConn {
    /// A handle for `settings`; no connection is opened yet.
    pub fn new(settings: &RedisSettings) -> Result<Self, ConfigError> {
        let client = redis::Client::open(settings.url.expose().as_str())
            .map_err(|e| ConfigError::new("REDIS_URL", e.to_string()))?;
        Ok(Self {
            client,
            current: Arc::new(Mutex::new(None)),
            namespace: settings.namespace.as_str().into(),
        })
    }

    /// The key namespace, e.g. `moderation`.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `namespace:suffix`, the name of a key of ours.
    pub fn key(&self, suffix: &str) -> String {
        format!("{}:{suffix}", self.namespace)
    }

    /// The underlying client, for code that needs dedicated connections (blocking reads).
    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    /// Runs `f` on the shared connection; a connection-level failure drops that connection so
    /// the next call reconnects.
    pub async fn with<T, F, Fut>(&self, f: F) -> RedisResult<T>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let conn = self.connection().await?;
        let result = f(conn).await;
        if let Err(err) = &result {
            if is_connection_error(err) {
                self.current.lock().await.take();
            }
        }
        result
    }

    /// `PING`, for health checks.
    pub async fn ping(&self) -> RedisResult<()> {
        self.with(|mut conn| async move {
            redis::cmd("PING")
                .query_async::<String>(&mut conn)
                .await
                .map(drop)
        })
        .await
    }

    async fn connection(&self) -> RedisResult<MultiplexedConnection> {
        let mut current = self.current.lock().await;
        if let Some(conn) = current.as_ref() {
            return Ok(conn.clone());
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        let conn = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        *current = Some(conn.clone());
        Ok(conn)
    }
}

fn is_connection_error(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_unrecoverable_error()
}
