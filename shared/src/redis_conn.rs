//! A lazily (re)connecting Redis handle, whatever the deployment's layout (`REDIS_MODE`): one
//! server, a cluster (the `redis` crate's own cluster client routes each command to the node
//! owning its keys' slot and follows the cluster through failovers), or a master found through
//! Sentinel (asked again on every reconnect, so a promoted replica is found). Every caller uses
//! one connection type, [`Connection`].
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
    aio::{ConnectionLike, MultiplexedConnection},
    cluster::ClusterClient,
    cluster_async::ClusterConnection,
    sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType},
    AsyncConnectionConfig, Cmd, ErrorKind, IntoConnectionInfo, Pipeline, RedisError, RedisFuture,
    RedisResult, Value,
};

use crate::config::{ConfigError, RedisMode, RedisSettings};

/// How long opening a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long one reply may take.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);
/// After a failed connect, how long calls fail at once before the next connect is tried.
pub const RETRY_CONNECT_AFTER: Duration = Duration::from_millis(500);

/// A connect attempt that every caller arriving during it awaits.
type Connecting = Shared<BoxFuture<'static, Result<Connection, Arc<RedisError>>>>;

/// One connection to Redis: to a single server (standalone, or the master Sentinel named), or
/// to a cluster. Cheap to clone; clones share the underlying connections.
#[derive(Clone)]
pub enum Connection {
    /// A multiplexed connection to one server.
    Single(MultiplexedConnection),
    /// The cluster client's connection to every node.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(conn) => conn.req_packed_command(cmd),
            Self::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(conn) => conn.get_db(),
            Self::Cluster(conn) => conn.get_db(),
        }
    }
}

/// Where connections come from.
enum Source {
    /// One server.
    Single(redis::Client),
    /// A cluster, from its seed nodes' URLs.
    Cluster(Vec<String>),
    /// The master the sentinels name (a lookup takes `&mut`, so callers take turns).
    Sentinel(tokio::sync::Mutex<SentinelClient>),
}

impl Source {
    fn new(settings: &RedisSettings) -> Result<Self, ConfigError> {
        let invalid = |e: RedisError| ConfigError::new("REDIS_URL", e.to_string());
        settings.check_urls()?;
        let urls = settings.urls();
        Ok(match &settings.mode {
            RedisMode::Standalone => {
                Self::Single(redis::Client::open(settings.url.expose().as_str()).map_err(invalid)?)
            }
            RedisMode::Cluster => {
                let seeds: Vec<String> = urls.into_iter().map(str::to_owned).collect();
                cluster_client(&seeds, RESPONSE_TIMEOUT)
                    .map(drop)
                    .map_err(invalid)?;
                Self::Cluster(seeds)
            }
            RedisMode::Sentinel { master } => {
                // The first sentinel URL's credentials and database apply to the master too.
                let first = urls
                    .first()
                    .copied()
                    .ok_or_else(|| ConfigError::new("REDIS_URL", "no sentinel given"))?
                    .into_connection_info()
                    .map_err(invalid)?;
                let node = SentinelNodeConnectionInfo::default()
                    .set_redis_connection_info(first.redis_settings().clone());
                let client = SentinelClient::build(
                    urls,
                    master.clone(),
                    Some(node),
                    SentinelServerType::Master,
                )
                .map_err(invalid)?;
                Self::Sentinel(tokio::sync::Mutex::new(client))
            }
        })
    }

    /// Opens a new connection whose replies may take up to `response_timeout`.
    async fn open(&self, response_timeout: Duration) -> RedisResult<Connection> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(response_timeout));
        match self {
            Self::Single(client) => client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map(Connection::Single),
            Self::Cluster(seeds) => cluster_client(seeds, response_timeout)?
                .get_async_connection()
                .await
                .map(Connection::Cluster),
            Self::Sentinel(sentinel) => {
                let lookup = async {
                    match sentinel.lock().await.async_get_client().await {
                        Ok(master) => {
                            master
                                .get_multiplexed_async_connection_with_config(&config)
                                .await
                        }
                        Err(err) => Err(err),
                    }
                };
                // Each sentinel asked and then the master: a bound on the whole lookup.
                match tokio::time::timeout(CONNECT_TIMEOUT * 3, lookup).await {
                    Ok(conn) => conn.map(Connection::Single),
                    Err(_) => Err(RedisError::from((
                        ErrorKind::Io,
                        "no sentinel named the master in time",
                    ))),
                }
            }
        }
    }
}

/// Where the shared connection stands.
enum Link {
    /// Nothing open; the next call connects.
    Idle,
    /// A connect is under way.
    Connecting(Connecting),
    /// Open.
    Open(Connection),
    /// The last connect failed; calls fail at once until then.
    Failed(Instant),
}

/// A cloneable handle to Redis within one key namespace.
#[derive(Clone)]
pub struct RedisConn {
    source: Arc<Source>,
    mode: RedisMode,
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
        Ok(Self {
            source: Arc::new(Source::new(settings)?),
            mode: settings.mode.clone(),
            link: Arc::new(Mutex::new(Link::Idle)),
            namespace: settings.namespace.as_str().into(),
        })
    }

    /// How Redis is laid out (`REDIS_MODE`).
    pub fn mode(&self) -> &RedisMode {
        &self.mode
    }

    /// The key namespace, e.g. `moderation`.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `namespace:suffix`, the name of a key of ours that no script, transaction or pipeline
    /// uses together with another key.
    pub fn key(&self, suffix: &str) -> String {
        format!("{}:{suffix}", self.namespace)
    }

    /// `namespace:{namespace:tag}rest`, the name of a key of ours that is used together with
    /// others: keys with the same `tag` hash to the same cluster slot (only the part between
    /// the braces is hashed), so one script, transaction or pipeline may use them all.
    pub fn tagged_key(&self, tag: &str, rest: &str) -> String {
        format!("{ns}:{{{ns}:{tag}}}{rest}", ns = self.namespace)
    }

    /// A new connection of its own, for blocking reads, whose replies may take up to
    /// `response_timeout` (a blocking read on the shared connection would hold up every
    /// command queued behind it).
    pub async fn dedicated(&self, response_timeout: Duration) -> RedisResult<Connection> {
        self.source.open(response_timeout).await
    }

    /// Runs `f` on the shared connection; a connection-level failure drops that connection so
    /// the next call reconnects.
    pub async fn with<T, F, Fut>(&self, f: F) -> RedisResult<T>
    where
        F: FnOnce(Connection) -> Fut,
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

    async fn connection(&self) -> RedisResult<Connection> {
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
                    let source = self.source.clone();
                    let connecting: Connecting =
                        async move { source.open(RESPONSE_TIMEOUT).await.map_err(Arc::new) }
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

/// Whether `err` means the connection is of no more use: it failed, or (after a failover) it
/// leads to a server that is no longer the master.
/// A cluster client on `seeds` whose replies may take up to `response_timeout` each, and a
/// whole request (its retries after a failover, redirections and slot refreshes included)
/// twice that. Retries start after 10 ms and wait at most 400 ms, so a request can follow a
/// replica's promotion within its deadline.
fn cluster_client(seeds: &[String], response_timeout: Duration) -> RedisResult<ClusterClient> {
    ClusterClient::builder(seeds.iter().map(String::as_str))
        .connection_timeout(CONNECT_TIMEOUT)
        .response_timeout(response_timeout)
        .overall_response_timeout(Some(response_timeout * 2))
        .retries(6)
        .min_retry_wait(10)
        .max_retry_wait(400)
        .build()
}

/// Whether every key of `keys` hashes to the same cluster slot (CRC16 of the key, or of its
/// hash tag), as every group of keys one script, transaction or pipeline uses must.
pub fn one_slot(keys: &[String]) -> bool {
    let mut slots = keys.iter().map(redis::cluster_routing::Slot::for_key);
    let first = slots.next();
    slots.all(|slot| Some(slot) == first)
}

fn is_connection_error(err: &RedisError) -> bool {
    err.is_io_error()
        || err.kind() == ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_unrecoverable_error()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Handles in a few namespaces (nothing is opened).
    pub(crate) fn test_conns() -> Vec<RedisConn> {
        ["moderation", "test-0123456789abcdef", "a", "x.y_z-1"]
            .into_iter()
            .map(|ns| {
                RedisConn::new(&RedisSettings::new("redis://127.0.0.1:1", ns)).expect("settings")
            })
            .collect()
    }

    /// Fails naming the group when its keys are in more than one slot.
    pub(crate) fn assert_one_slot(keys: &[String]) {
        assert!(
            one_slot(keys),
            "keys in more than one cluster slot: {keys:?}"
        );
    }

    #[test]
    fn keys_with_one_hash_tag_share_a_slot_and_untagged_ones_need_not() {
        for redis in test_conns() {
            assert_one_slot(&[
                redis.tagged_key("queue:text", ""),
                redis.tagged_key("queue:text", ":entries"),
            ]);
        }
        // The check can fail: the queue's keys as they were before hash tags.
        assert!(!one_slot(&[
            "moderation:queue:text".to_owned(),
            "moderation:queue:text:entries".to_owned(),
        ]));
    }

    #[test]
    fn the_slot_is_crc16_of_the_hash_tag() {
        // Redis's own examples (CLUSTER KEYSLOT): "foo" is slot 12182, "{user1000}.following"
        // shares the slot of "user1000".
        assert!(one_slot(&[
            "{user1000}.following".to_owned(),
            "{user1000}.followers".to_owned(),
            "user1000".to_owned(),
        ]));
        assert_eq!(
            redis::cluster_routing::Slot::for_key("foo"),
            redis::cluster_routing::Slot::new(12182).expect("in range")
        );
    }
}
