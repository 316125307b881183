//! A lazily (re)connecting Redis handle.
//!
//! Processes start while Redis is down and recover when it returns: the multiplexed connection
//! is opened on first use, and dropped after a connection-level error so the next call opens a
//! new one. Every connect and every reply has a deadline, so nothing waits on a dead server.
//!
//! Callers never queue behind each other's connects: concurrent callers share one connect
//! attempt, and after a failed one every call fails at once for [`RETRY_CONNECT_AFTER`], so a
//! Redis that does not answer costs each request at most one deadline, not one per caller
//! before it.

use std::{
    future::Future,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures_util::{
    future::{BoxFuture, Shared},
    FutureExt,
};
use redis::{
    aio::MultiplexedConnection, AsyncConnectionConfig, ErrorKind, RedisError, RedisResult,
};

use crate::config::{ConfigError, RedisSettings};

/// How long opening a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long one reply may take.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);
/// After a failed connect, how long calls fail at once before the next connect is tried.
pub const RETRY_CONNECT_AFTER: Duration = Duration::from_millis(500);

/// A connect attempt that every caller arriving during it awaits.
type Connecting = Shared<BoxFuture<'static, Result<MultiplexedConnection, Arc<RedisError>>>>;

/// Where the shared connection stands.
enum Link {
    /// Nothing open; the next call connects.
    Idle,
    /// A connect is under way.
    Connecting(Connecting),
    /// Open.
    Open(MultiplexedConnection),
    /// The last connect failed; calls fail at once until then.
    Failed(Instant),
}

/// A cloneable handle to Redis within one key namespace.
#[derive(Clone)]
pub struct RedisConn {
    client: redis::Client,
    link: Arc<Mutex<Link>>,
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
            link: Arc::new(Mutex::new(Link::Idle)),
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
                let mut link = self.lock();
                // The next call opens a new connection (a connect under way is kept).
                if matches!(&*link, Link::Open(_)) {
                    *link = Link::Idle;
                }
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
        let connecting = {
            let mut link = self.lock();
            match &*link {
                Link::Open(conn) => return Ok(conn.clone()),
                Link::Failed(until) if Instant::now() < *until => {
                    return Err(RedisError::from((
                        ErrorKind::Io,
                        "Redis did not answer the last connect; retrying shortly",
                    )))
                }
                Link::Connecting(connecting) => connecting.clone(),
                Link::Idle | Link::Failed(_) => {
                    let client = self.client.clone();
                    let connecting: Connecting = async move {
                        let config = AsyncConnectionConfig::new()
                            .set_connection_timeout(Some(CONNECT_TIMEOUT))
                            .set_response_timeout(Some(RESPONSE_TIMEOUT));
                        client
                            .get_multiplexed_async_connection_with_config(&config)
                            .await
                            .map_err(Arc::new)
                    }
                    .boxed()
                    .shared();
                    *link = Link::Connecting(connecting.clone());
                    connecting
                }
            }
        };
        let result = connecting.clone().await;
        let mut link = self.lock();
        // The first caller to see the attempt end records it; later ones find it recorded.
        if let Link::Connecting(current) = &*link {
            if current.ptr_eq(&connecting) {
                *link = match &result {
                    Ok(conn) => Link::Open(conn.clone()),
                    Err(_) => Link::Failed(Instant::now() + RETRY_CONNECT_AFTER),
                };
            }
        }
        result.map_err(|err| {
            RedisError::from((err.kind(), "cannot connect to Redis", err.to_string()))
        })
    }

    /// The link's state; held only for a few instructions, never across an await.
    fn lock(&self) -> std::sync::MutexGuard<'_, Link> {
        self.link
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn is_connection_error(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_unrecoverable_error()
}
