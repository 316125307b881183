//! Redis beyond one node, made here from Debian's `redis-server` on free ports in a temporary
//! directory: a six-node cluster (three masters, a replica each, `redis-cli --cluster create`)
//! and a Sentinel set-up (a master, a replica and three sentinels). A cluster can also run with
//! each node on a [`Host`] of its own (the multi-host tier). Every process stops, and the
//! directory goes, when the value is dropped.

use std::{
    collections::HashSet,
    net::{Ipv4Addr, SocketAddrV4},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use moderation_shared::config::{RedisMode, RedisSettings};

use crate::{eventually, netns::Host};

/// How long a node may go unanswered before the cluster (or the sentinels) fail it over.
const NODE_TIMEOUT_MS: u64 = 1000;

/// One `redis-server` process, on loopback or on a host of its own.
struct Node {
    port: u16,
    args: Vec<String>,
    child: Option<Child>,
    host: Option<Host>,
}

impl Node {
    fn start(host: Option<Host>, port: u16, args: Vec<String>) -> Self {
        let mut node = Self {
            port,
            args,
            child: None,
            host,
        };
        node.spawn();
        node
    }

    fn spawn(&mut self) {
        let mut command = match &self.host {
            Some(host) => host.command("redis-server"),
            None => Command::new("redis-server"),
        };
        let child = command
            .args(&self.args)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed (scripts/test installs it)");
        self.child = Some(child);
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn ip(&self) -> Ipv4Addr {
        self.host.as_ref().map_or(Ipv4Addr::LOCALHOST, |h| h.ip)
    }

    fn addr(&self) -> SocketAddrV4 {
        SocketAddrV4::new(self.ip(), self.port)
    }

    fn url(&self) -> String {
        format!("redis://{}", self.addr())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback port that is free, and (for a cluster node's bus) so is the port 10000 above it.
fn free_port_pair() -> u16 {
    loop {
        let port = crate::unused_port();
        if port < 55_000 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// A temporary directory of the servers' files.
fn temp_dir(kind: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mt-{kind}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

/// Sends `args` to the server at `addr`; `None` when it does not answer.
async fn ask<T: redis::FromRedisValue>(addr: SocketAddrV4, args: &[&str]) -> Option<T> {
    let client = redis::Client::open(format!("redis://{addr}")).ok()?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(500)))
        .set_response_timeout(Some(Duration::from_secs(2)));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .ok()?;
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query_async(&mut conn).await.ok()
}

/// A Redis cluster of three masters with one replica each.
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: PathBuf,
}

impl RedisCluster {
    /// Starts six nodes, makes them a cluster and waits until every slot is served.
    pub async fn start() -> Self {
        Self::start_on(&[None, None, None, None, None, None]).await
    }

    /// [`Self::start`] with each node on a host of its own (six hosts).
    pub async fn start_in(hosts: &[Host]) -> Self {
        assert_eq!(hosts.len(), 6, "a host per node");
        let hosts: Vec<Option<Host>> = hosts.iter().cloned().map(Some).collect();
        Self::start_on(&hosts).await
    }

    async fn start_on(hosts: &[Option<Host>]) -> Self {
        let dir = temp_dir("cluster");
        // Nodes are told apart by port ([`Self::kill`]), so no two share one.
        let mut ports = HashSet::new();
        let nodes: Vec<Node> = hosts
            .iter()
            .map(|host| {
                let port = std::iter::repeat_with(free_port_pair)
                    .find(|p| ports.insert(*p))
                    .expect("a free port");
                let ip = host.as_ref().map_or(Ipv4Addr::LOCALHOST, |h| h.ip);
                let mut args = [
                    "--port",
                    &port.to_string(),
                    "--bind",
                    &ip.to_string(),
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    dir.join(format!("nodes-{port}.conf"))
                        .to_str()
                        .expect("utf-8"),
                    "--cluster-node-timeout",
                    &NODE_TIMEOUT_MS.to_string(),
                    "--dir",
                    dir.to_str().expect("utf-8"),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ]
                .map(str::to_owned)
                .to_vec();
                if host.is_some() {
                    // Its clients are other hosts, and it has no password: a test's own network.
                    args.extend(["--protected-mode".to_owned(), "no".to_owned()]);
                }
                Node::start(host.clone(), port, args)
            })
            .collect();
        for node in &nodes {
            let addr = node.addr();
            eventually(Duration::from_secs(20), "a cluster node to answer", || {
                ask::<String>(addr, &["PING"])
            })
            .await;
        }
        let addresses: Vec<String> = nodes.iter().map(|n| n.addr().to_string()).collect();
        let created = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli is installed");
        assert!(
            created.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&created.stdout)
        );
        let cluster = Self { nodes, dir };
        cluster.wait_until_served(Duration::from_secs(30)).await;
        cluster
    }

    /// The seed list for `REDIS_URL`: every node.
    pub fn seeds(&self) -> String {
        self.nodes
            .iter()
            .map(Node::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Cluster-mode settings on it, in `namespace`.
    pub fn settings(&self, namespace: &str) -> RedisSettings {
        RedisSettings::new(self.seeds(), namespace).with_mode(RedisMode::Cluster)
    }

    /// The addresses of its nodes.
    pub fn addresses(&self) -> Vec<SocketAddrV4> {
        self.nodes.iter().map(Node::addr).collect()
    }

    /// The nodes running now.
    fn live(&self) -> impl Iterator<Item = &Node> + '_ {
        self.nodes.iter().filter(|n| n.child.is_some())
    }

    /// Waits until every live node says the cluster is `ok` and every slot's master is a live
    /// node (after a kill: a replica was promoted).
    pub async fn wait_until_served(&self, deadline: Duration) {
        eventually(deadline, "every slot served by a live master", || async {
            for node in self.live() {
                let info: String = ask(node.addr(), &["CLUSTER", "INFO"]).await?;
                if !info.contains("cluster_state:ok") {
                    return None;
                }
            }
            let masters = self.masters().await?;
            let live: Vec<u16> = self.live().map(|n| n.port).collect();
            let covered: u32 = masters
                .iter()
                .filter(|m| live.contains(&m.port))
                .flat_map(|m| &m.slots)
                .map(|(from, to)| u32::from(to - from) + 1)
                .sum();
            (covered == 16_384).then_some(())
        })
        .await;
    }

    /// The port of the master serving `key`'s slot now.
    pub async fn master_of(&self, key: &str) -> u16 {
        let node = self.live().next().expect("a live node").addr();
        let slot: u16 = ask(node, &["CLUSTER", "KEYSLOT", key])
            .await
            .expect("CLUSTER KEYSLOT");
        let masters = self.masters().await.expect("CLUSTER NODES");
        masters
            .iter()
            .find(|m| {
                m.slots
                    .iter()
                    .any(|(from, to)| (*from..=*to).contains(&slot))
            })
            .map(|m| m.port)
            .expect("a master serves every slot")
    }

    /// The replica of the master at `port`.
    pub async fn replica_of(&self, port: u16) -> u16 {
        let live = self.live().find(|n| n.port != port).expect("a live node");
        let nodes: String = ask(live.addr(), &["CLUSTER", "NODES"])
            .await
            .expect("CLUSTER NODES");
        let lines: Vec<Vec<&str>> = nodes
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        let master_id = lines
            .iter()
            .find(|f| f.get(1).and_then(|a| node_port(a)) == Some(port))
            .map(|f| f[0])
            .expect("the master is listed");
        lines
            .iter()
            .find(|f| f.get(3) == Some(&master_id))
            .and_then(|f| node_port(f[1]))
            .expect("the master has a replica")
    }

    /// SIGKILLs the node at `port`; its data is kept in memory only, so it is gone.
    pub fn kill(&mut self, port: u16) {
        if let Some(node) = self.nodes.iter_mut().find(|n| n.port == port) {
            node.kill();
        }
    }

    /// Starts the killed node at `port` again (it rejoins from its nodes file).
    pub fn restart(&mut self, port: u16) {
        if let Some(node) = self.nodes.iter_mut().find(|n| n.port == port) {
            node.kill();
            node.spawn();
        }
    }

    /// The masters and their slot ranges, as a live node sees them.
    async fn masters(&self) -> Option<Vec<Master>> {
        let node = self.live().next()?.addr();
        let nodes: String = ask(node, &["CLUSTER", "NODES"]).await?;
        Some(
            nodes
                .lines()
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let flags = fields.get(2)?;
                    if !flags.split(',').any(|f| f == "master") || flags.contains("fail") {
                        return None;
                    }
                    let slots = fields[8..]
                        .iter()
                        .filter(|s| !s.starts_with('['))
                        .filter_map(|s| match s.split_once('-') {
                            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                            None => s.parse().ok().map(|n| (n, n)),
                        })
                        .collect();
                    Some(Master {
                        port: node_port(fields[1])?,
                        slots,
                    })
                })
                .collect(),
        )
    }
}

/// A master in `CLUSTER NODES`.
struct Master {
    port: u16,
    slots: Vec<(u16, u16)>,
}

/// The port of `ip:port@bus` (as `CLUSTER NODES` lists a node).
fn node_port(address: &str) -> Option<u16> {
    address.split('@').next()?.rsplit(':').next()?.parse().ok()
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A master, its replica and three sentinels watching it under [`RedisSentinels::MASTER`].
pub struct RedisSentinels {
    master: Node,
    replica: Node,
    sentinels: Vec<Node>,
    dir: PathBuf,
}

impl RedisSentinels {
    /// The name the sentinels know the master by.
    pub const MASTER: &'static str = "mymaster";

    /// Starts the servers and waits until every sentinel knows the master and its replica.
    pub async fn start() -> Self {
        let dir = temp_dir("sentinel");
        let server = |port: u16, extra: &[String]| {
            let mut args: Vec<String> = [
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                dir.to_str().expect("utf-8"),
            ]
            .map(str::to_owned)
            .to_vec();
            args.extend_from_slice(extra);
            Node::start(None, port, args)
        };
        let master = server(crate::unused_port(), &[]);
        let replica_port = crate::unused_port();
        let replica = server(
            replica_port,
            &[
                "--replicaof".to_owned(),
                "127.0.0.1".to_owned(),
                master.port.to_string(),
            ],
        );
        let sentinels = (0..3)
            .map(|i| {
                let port = crate::unused_port();
                let conf = dir.join(format!("sentinel-{i}.conf"));
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndir {}\n\
                         sentinel monitor {} 127.0.0.1 {} 2\n\
                         sentinel down-after-milliseconds {} {NODE_TIMEOUT_MS}\n\
                         sentinel failover-timeout {} 5000\n",
                        dir.display(),
                        Self::MASTER,
                        master.port,
                        Self::MASTER,
                        Self::MASTER,
                    ),
                )
                .expect("sentinel config");
                Node::start(
                    None,
                    port,
                    vec![
                        conf.to_str().expect("utf-8").to_owned(),
                        "--sentinel".to_owned(),
                    ],
                )
            })
            .collect();
        let set = Self {
            master,
            replica,
            sentinels,
            dir,
        };
        for sentinel in &set.sentinels {
            let addr = sentinel.addr();
            eventually(
                Duration::from_secs(30),
                "a sentinel to see the replica",
                || async move {
                    let replicas: Vec<redis::Value> =
                        ask(addr, &["SENTINEL", "REPLICAS", Self::MASTER]).await?;
                    (!replicas.is_empty()).then_some(())
                },
            )
            .await;
        }
        set
    }

    /// Sentinel-mode settings on it, in `namespace`, for the master named `master`.
    pub fn settings(&self, namespace: &str, master: &str) -> RedisSettings {
        let urls: Vec<String> = self.sentinels.iter().map(Node::url).collect();
        RedisSettings::new(urls.join(","), namespace).with_mode(RedisMode::Sentinel {
            master: master.to_owned(),
        })
    }

    /// SIGKILLs the master, then waits until the sentinels name the replica instead.
    pub async fn fail_over(&mut self) {
        self.master.kill();
        let replica = self.replica.port.to_string();
        let sentinel = self.sentinels[0].addr();
        eventually(
            Duration::from_secs(30),
            "the sentinels to promote the replica",
            || {
                let replica = replica.clone();
                async move {
                    let address: Vec<String> = ask(
                        sentinel,
                        &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", Self::MASTER],
                    )
                    .await?;
                    (address.get(1) == Some(&replica)).then_some(())
                }
            },
        )
        .await;
    }
}

impl Drop for RedisSentinels {
    fn drop(&mut self) {
        for sentinel in &mut self.sentinels {
            sentinel.kill();
        }
        self.master.kill();
        self.replica.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The environment a fleet process needs to reach `redis`: `REDIS_URL`, `REDIS_MODE` and, in
/// sentinel mode, `REDIS_SENTINEL_MASTER`.
pub fn redis_env(redis: &RedisSettings) -> Vec<(String, String)> {
    let mut env = vec![("REDIS_URL".to_owned(), redis.url.expose().clone())];
    let mode = match &redis.mode {
        RedisMode::Standalone => "standalone",
        RedisMode::Cluster => "cluster",
        RedisMode::Sentinel { master } => {
            env.push(("REDIS_SENTINEL_MASTER".to_owned(), master.clone()));
            "sentinel"
        }
    };
    env.push(("REDIS_MODE".to_owned(), mode.to_owned()));
    env.push(("APP_REDIS_NAMESPACE".to_owned(), redis.namespace.clone()));
    env
}
