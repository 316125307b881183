//! The fleet across hosts ([`crate::netns`]) for the multi-host chaos tier: a six-node Redis
//! Cluster (three masters, a replica each) with a host per node, a Postgres primary and its
//! synchronous streaming standby on hosts of their own, and the api, two text workers, two
//! dispatchers and the webhook receiver each on its own host. Roles reach Postgres through a
//! two-host `DATABASE_URL` (`target_session_attrs=read-write`) and Redis through the cluster's
//! seed list; the tests reach everything across the bridge. Everything stops when dropped.

use std::{collections::HashMap, path::PathBuf, process::Child, time::Duration};

use moderation_shared::{
    config::DatabaseSettings,
    db::{self, Pool},
};

use crate::{
    fleet::{common_env, make_synchronous, start_role, tail, Fleet, Role},
    netns::{Host, Network},
    postgres::PrivatePostgres,
    receiver::{tempfile_path::TempPath, TestReceiver},
    redis_cluster::{redis_env, RedisCluster},
};

/// Workers and dispatchers, each on a host of its own.
pub const REPLICAS: usize = 2;
/// The port of the api on its host.
const API_PORT: u16 = 8080;

/// The hosts of a [`MultiNode`].
pub struct Hosts {
    /// The api's.
    pub api: Host,
    /// The workers', in order.
    pub workers: Vec<Host>,
    /// The dispatchers', in order.
    pub dispatchers: Vec<Host>,
    /// The webhook receiver's.
    pub receiver: Host,
    /// The Postgres primary's.
    pub primary: Host,
    /// The Postgres standby's.
    pub standby: Host,
}

/// The fleet across hosts; see the module's comment.
pub struct MultiNode {
    /// The api's base URL.
    pub api_url: String,
    /// A key of the fleet's one account, with its rate limit lifted.
    pub key: String,
    /// A pool to whichever of the two Postgres servers takes writes, for checks.
    pub pool: Pool,
    /// The receiver of every webhook.
    pub receiver: TestReceiver,
    /// The Redis Cluster.
    pub redis: RedisCluster,
    /// The Postgres primary.
    pub primary: PrivatePostgres,
    /// Its synchronous standby.
    pub standby: PrivatePostgres,
    /// Where each process runs.
    pub hosts: Hosts,
    env: Vec<(String, String)>,
    processes: HashMap<(Role, usize), Child>,
    logs: PathBuf,
    _ca_file: TempPath,
    /// Dropped last: the hosts go once every process on them has stopped.
    _network: Network,
}

impl MultiNode {
    /// Makes the hosts, starts the servers, a migrated database with one account and key,
    /// and every process.
    pub async fn start() -> Self {
        let network = Network::new();
        let redis_hosts: Vec<Host> = (1..=6)
            .map(|i| network.host(&format!("redis-{i}")))
            .collect();
        let hosts = Hosts {
            api: network.host("api"),
            workers: (1..=REPLICAS)
                .map(|i| network.host(&format!("worker-{i}")))
                .collect(),
            dispatchers: (1..=REPLICAS)
                .map(|i| network.host(&format!("dispatcher-{i}")))
                .collect(),
            receiver: network.host("receiver"),
            primary: network.host("pg-primary"),
            standby: network.host("pg-standby"),
        };
        let redis = RedisCluster::start_in(&redis_hosts).await;
        let primary = PrivatePostgres::start_in(&hosts.primary);
        let receiver = TestReceiver::start_in(&hosts.receiver);
        let ca_file = receiver.ca_file();

        let admin = db::pool(&DatabaseSettings::new(format!(
            "{}/postgres",
            primary.base_url()
        )))
        .expect("admin pool");
        let admin = admin.get().await.expect("connect to the primary");
        admin
            .simple_query("CREATE DATABASE chaos")
            .await
            .expect("create the database");
        let standby = PrivatePostgres::standby_in(&primary, &hosts.standby);
        make_synchronous(&admin).await;
        drop(admin);
        let database_url = format!(
            "postgres://postgres@{},{}/chaos?target_session_attrs=read-write",
            primary.addr(),
            standby.addr()
        );
        let pool = db::pool(&DatabaseSettings::new(database_url.as_str())).expect("pool");
        db::migrate(&pool).await.expect("migrate");
        let key = Fleet::provision(&pool).await;

        let env = [
            ("DATABASE_URL", database_url.as_str()),
            ("APP_DATABASE_DIRECT_URL", database_url.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .chain(common_env(ca_file.path(), API_PORT))
        .chain(redis_env(&redis.settings("chaos")))
        .collect();
        let logs = std::env::temp_dir().join(format!("mt-hosts-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&logs).expect("log directory");
        let mut nodes = Self {
            api_url: format!("http://{}:{API_PORT}", hosts.api.ip),
            key,
            pool,
            receiver,
            redis,
            primary,
            standby,
            hosts,
            env,
            processes: HashMap::new(),
            logs,
            _ca_file: ca_file,
            _network: network,
        };
        nodes.spawn(Role::Api, 0);
        for i in 0..REPLICAS {
            nodes.spawn(Role::Worker, i);
            nodes.spawn(Role::Dispatcher, i);
        }
        nodes.wait_for_api().await;
        nodes
    }

    /// The `i`th process of `role` (the api has one), on its host.
    fn spawn(&mut self, role: Role, i: usize) {
        let host = match role {
            Role::Api => &self.hosts.api,
            Role::Worker => &self.hosts.workers[i],
            Role::Dispatcher => &self.hosts.dispatchers[i],
        };
        let command = host.command(crate::binary(role.binary()));
        let log = self.logs.join(format!("{}.log", host.name));
        let child = start_role(command, role, &self.env, &log);
        self.processes.insert((role, i), child);
    }

    /// Fails the Postgres primary over to the standby: kills the primary as a crash would,
    /// waits `detection` (what a failover tool takes to notice), then promotes the standby.
    pub async fn fail_over_postgres(&self, detection: Duration) {
        tokio::task::block_in_place(|| self.primary.kill());
        tokio::time::sleep(detection).await;
        tokio::task::block_in_place(|| self.standby.promote());
    }

    async fn wait_for_api(&self) {
        let client = reqwest::Client::new();
        let health = format!("{}/health", self.api_url);
        crate::eventually(Duration::from_secs(30), "the api's health", || async {
            client.get(&health).send().await.ok().map(|_| ())
        })
        .await;
    }

    /// Every process's log, each headed by its host's name.
    fn each_log(&self) -> Vec<(String, String)> {
        let mut names: Vec<&str> = vec![self.hosts.api.name.as_str()];
        names.extend(self.hosts.workers.iter().map(|h| h.name.as_str()));
        names.extend(self.hosts.dispatchers.iter().map(|h| h.name.as_str()));
        names
            .into_iter()
            .map(|name| {
                let text = std::fs::read_to_string(self.logs.join(format!("{name}.log")))
                    .unwrap_or_default();
                (name.to_owned(), text)
            })
            .collect()
    }

    /// Every process's whole log.
    pub fn logs(&self) -> String {
        self.each_log()
            .into_iter()
            .map(|(_, text)| text)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The last `lines` lines of every process's log, for a failing test's message.
    pub fn log_tails(&self, lines: usize) -> String {
        self.each_log()
            .into_iter()
            .map(|(name, text)| tail(&name, &text, lines))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for MultiNode {
    fn drop(&mut self) {
        for child in self.processes.values_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.logs);
    }
}
