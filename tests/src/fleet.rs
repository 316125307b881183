//! The whole fleet as separate processes (api, worker, dispatcher: the real binaries) on a
//! Postgres cluster and a Redis server of its own, each reached through a [`FaultProxy`], so a
//! chaos test can blackhole or cut the network, kill any role and restart the servers without
//! disturbing any other test. Webhooks go to an HTTPS [`TestReceiver`]. Other [`Topology`]s
//! put a streaming standby beside the cluster, or PgBouncer in front of it.

use std::{
    collections::HashMap,
    fs::File,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use moderation_shared::{
    config::{DatabaseSettings, RedisSettings},
    crypto::SealingKey,
    db::{self, accounts::PlanUpdate, audit_events::Actor, Pool},
    domain::Scope,
    policy::PolicyDefaults,
    provisioning,
};

use crate::{
    pgbouncer::PgBouncer, postgres::PrivatePostgres, proxy::FaultProxy, receiver::TestReceiver,
    worker::PrivateRedis,
};

/// How the fleet reaches Postgres.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// One cluster, through [`Fleet::postgres_proxy`].
    Proxied,
    /// A primary ([`Fleet::postgres`]) and a synchronous streaming standby
    /// ([`Fleet::standby`]); `DATABASE_URL` lists both, primary first, with
    /// `target_session_attrs=read-write`.
    Standby,
    /// `DATABASE_URL` through PgBouncer ([`Fleet::pgbouncer`], session mode), and
    /// `APP_DATABASE_DIRECT_URL` (the dispatcher's `LISTEN`) straight to the cluster.
    PgBouncer,
}

/// A process of the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The api, on a fixed port so a restarted one answers where the old one did.
    Api,
    /// A text worker.
    Worker,
    /// The dispatcher.
    Dispatcher,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 3] = [Role::Api, Role::Worker, Role::Dispatcher];

    pub(crate) fn binary(self) -> &'static str {
        match self {
            Role::Api => "api",
            Role::Worker => "worker",
            Role::Dispatcher => "dispatcher",
        }
    }
}

/// The running fleet and its servers; everything stops when dropped.
pub struct Fleet {
    /// The cluster (restart it with [`PrivatePostgres::restart`]); the primary with a standby.
    pub postgres: PrivatePostgres,
    /// The streaming standby ([`Topology::Standby`]).
    pub standby: Option<PrivatePostgres>,
    /// PgBouncer in front of the cluster ([`Topology::PgBouncer`]).
    pub pgbouncer: Option<PgBouncer>,
    /// The Redis server (restart it with [`PrivateRedis::restart`]).
    pub redis: PrivateRedis,
    /// Between the fleet and Postgres.
    pub postgres_proxy: FaultProxy,
    /// Between the fleet and Redis.
    pub redis_proxy: FaultProxy,
    /// The receiver of every webhook.
    pub receiver: TestReceiver,
    /// A pool straight to the fleet's database (not through the proxy or PgBouncer; to both
    /// hosts with a standby, so it follows a promotion), for checks.
    pub pool: Pool,
    /// The api's base URL.
    pub api_url: String,
    /// A key of the fleet's one account, with its rate limit lifted.
    pub key: String,
    env: Vec<(String, String)>,
    processes: HashMap<Role, Child>,
    logs: PathBuf,
    _ca_file: crate::receiver::tempfile_path::TempPath,
}

impl Fleet {
    /// Starts the servers, the proxies, a migrated database with one account and key, and
    /// every role.
    pub async fn start() -> Self {
        Self::start_on(Topology::Proxied).await
    }

    /// [`Self::start`] with Postgres reached as `topology` says.
    pub async fn start_on(topology: Topology) -> Self {
        Self::start_with(topology, None, &[]).await
    }

    /// As [`Self::start_on`], with the roles on `redis` (a cluster, or a master behind
    /// Sentinel) instead of the fleet's own server behind its proxy, when given, and with `env`
    /// added to (or replacing) the roles' environment.
    pub async fn start_with(
        topology: Topology,
        redis: Option<&RedisSettings>,
        env: &[(&str, &str)],
    ) -> Self {
        let extra_env: Vec<(String, String)> = redis
            .map(crate::redis_cluster::redis_env)
            .unwrap_or_default()
            .into_iter()
            .chain(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())))
            .collect();
        let postgres = PrivatePostgres::start();
        let redis = PrivateRedis::start();
        let postgres_proxy = FaultProxy::start(postgres.addr()).await;
        let redis_proxy = FaultProxy::start(redis.addr()).await;
        let receiver = TestReceiver::start().await;
        let ca_file = receiver.ca_file();

        let admin = db::pool(&DatabaseSettings::new(format!(
            "{}/postgres",
            postgres.base_url()
        )))
        .expect("admin pool");
        let admin = admin.get().await.expect("connect to the private cluster");
        admin
            .simple_query("CREATE DATABASE chaos")
            .await
            .expect("create the database");
        let direct = format!("{}/chaos", postgres.base_url());
        let pool = db::pool(&DatabaseSettings::new(direct.as_str())).expect("pool");
        db::migrate(&pool).await.expect("migrate");
        let key = Self::provision(&pool).await;
        let (database_url, standby, pgbouncer, pool) = match topology {
            Topology::Proxied => (
                format!(
                    "postgres://postgres@127.0.0.1:{}/chaos",
                    postgres_proxy.port()
                ),
                None,
                None,
                pool,
            ),
            Topology::Standby => {
                let standby = PrivatePostgres::standby_of(&postgres);
                make_synchronous(&admin).await;
                let both = format!(
                    "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/chaos\
                     ?target_session_attrs=read-write",
                    postgres.port(),
                    standby.port()
                );
                let pool = db::pool(&DatabaseSettings::new(both.as_str())).expect("pool");
                (both, Some(standby), None, pool)
            }
            Topology::PgBouncer => {
                let bouncer = PgBouncer::start(postgres.port()).await;
                (
                    format!("postgres://postgres@127.0.0.1:{}/chaos", bouncer.port()),
                    None,
                    Some(bouncer),
                    pool,
                )
            }
        };
        drop(admin);

        let api_port = crate::unused_port();
        let redis_settings =
            RedisSettings::new(format!("redis://127.0.0.1:{}", redis_proxy.port()), "chaos");
        // Later entries win: `redis`'s variables and `env` replace the defaults.
        let env: Vec<(String, String)> = [
            ("DATABASE_URL", database_url.as_str()),
            (
                "APP_DATABASE_DIRECT_URL",
                database_url_direct(topology, &database_url, &direct),
            ),
            ("REDIS_URL", redis_settings.url.expose()),
            ("APP_REDIS_NAMESPACE", "chaos"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .chain(common_env(ca_file.path(), api_port))
        .chain(extra_env)
        .collect();
        let logs = std::env::temp_dir().join(format!("mt-fleet-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&logs).expect("log directory");
        let mut fleet = Self {
            postgres,
            standby,
            pgbouncer,
            redis,
            postgres_proxy,
            redis_proxy,
            receiver,
            pool,
            api_url: format!("http://127.0.0.1:{api_port}"),
            key,
            env,
            processes: HashMap::new(),
            logs,
            _ca_file: ca_file,
        };
        for role in Role::ALL {
            fleet.spawn(role);
        }
        fleet.wait_for_api().await;
        fleet
    }

    /// The fleet's one account, its rate limit lifted, and a key of it.
    pub(crate) async fn provision(pool: &Pool) -> String {
        let client = pool.get().await.expect("connect");
        let account = provisioning::create_account(&client, "Chaos", &PolicyDefaults::default())
            .await
            .expect("account")
            .id;
        let update = PlanUpdate {
            rate_per_minute: Some(1_000_000),
            ..Default::default()
        };
        db::accounts::update_plan(&client, Actor::Operator, account, &update)
            .await
            .expect("lift the rate limit");
        let scopes = [Scope::ModeratePrompt, Scope::JobRead, Scope::WebhookManage];
        provisioning::issue_key(
            &client,
            Actor::Operator,
            account,
            Some("chaos"),
            Some(&scopes),
            None,
        )
        .await
        .expect("key")
        .key
    }

    /// Fails the primary over to the standby: kills the primary as a crash would, waits
    /// `detection` (what a failover tool takes to notice), then promotes the standby. Returns
    /// when the promotion began.
    pub async fn fail_over(&self, detection: Duration) -> std::time::Instant {
        let standby = self.standby.as_ref().expect("a fleet with a standby");
        tokio::task::block_in_place(|| self.postgres.kill());
        tokio::time::sleep(detection).await;
        let promoting = std::time::Instant::now();
        tokio::task::block_in_place(|| standby.promote());
        promoting
    }

    /// Starts `role` (after [`Self::kill`]).
    pub fn spawn(&mut self, role: Role) {
        let command = Command::new(crate::binary(role.binary()));
        let log = self.logs.join(format!("{}.log", role.binary()));
        let child = start_role(command, role, &self.env, &log);
        self.processes.insert(role, child);
    }

    /// Kills `role` with SIGKILL and reaps it.
    pub fn kill(&mut self, role: Role) {
        if let Some(mut child) = self.processes.remove(&role) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until the api answers its health check (30 s at most).
    pub async fn wait_for_api(&self) {
        let client = reqwest::Client::new();
        let health = format!("{}/health", self.api_url);
        crate::eventually(Duration::from_secs(30), "the api's health", || async {
            client.get(&health).send().await.ok().map(|_| ())
        })
        .await;
    }

    /// Every role's whole log.
    pub fn logs(&self) -> String {
        Role::ALL
            .iter()
            .map(|role| {
                std::fs::read_to_string(self.logs.join(format!("{}.log", role.binary())))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The last `lines` lines of every role's log, for a failing test's message.
    pub fn log_tails(&self, lines: usize) -> String {
        Role::ALL
            .iter()
            .map(|role| {
                let text =
                    std::fs::read_to_string(self.logs.join(format!("{}.log", role.binary())))
                        .unwrap_or_default();
                tail(role.binary(), &text, lines)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Starts `role` by `command` (its binary, on this machine or on a host) with `env`, its
/// output appended to `log`.
pub(crate) fn start_role(
    mut command: Command,
    role: Role,
    env: &[(String, String)],
    log: &std::path::Path,
) -> Child {
    let log = File::options()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    if role == Role::Worker {
        command.args(["--modality", "text"]);
    }
    command
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::from(log.try_clone().expect("log file")))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("start a fleet binary")
}

/// The last `lines` lines of `text`, the log of `name`, headed by that name.
pub(crate) fn tail(name: &str, text: &str, lines: usize) -> String {
    let tail: Vec<&str> = text.lines().rev().take(lines).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    format!("--- {name} ---\n{}", tail.join("\n"))
}

/// Makes the standby of the primary `admin` is connected to synchronous: from now on every
/// commit waits for it. Returns once it is.
pub(crate) async fn make_synchronous(admin: &tokio_postgres::Client) {
    for statement in [
        "ALTER SYSTEM SET synchronous_standby_names = '*'",
        "SELECT pg_reload_conf()",
    ] {
        admin
            .simple_query(statement)
            .await
            .expect("make the standby synchronous");
    }
    crate::eventually(Duration::from_secs(30), "a synchronous standby", || async {
        let row = admin
            .query_opt(
                "SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync'",
                &[],
            )
            .await
            .expect("pg_stat_replication");
        row.map(drop)
    })
    .await;
}

/// `APP_DATABASE_DIRECT_URL`: straight to the cluster behind PgBouncer, else `DATABASE_URL`.
fn database_url_direct<'a>(topology: Topology, database_url: &'a str, direct: &'a str) -> &'a str {
    match topology {
        Topology::PgBouncer => direct,
        Topology::Proxied | Topology::Standby => database_url,
    }
}

/// What every role of a test fleet runs with, but for where Postgres and Redis are: its keys,
/// the receiver's CA (`ca_file`), the api's port, no models, and short deadlines and schedules
/// so that a scenario recovers in seconds.
pub(crate) fn common_env(ca_file: &std::path::Path, api_port: u16) -> Vec<(String, String)> {
    let encryption = SealingKey::random().expect("key").to_base64();
    let registry = random_key();
    [
        ("APP_ENCRYPTION_KEY", encryption.as_str()),
        ("APP_REGISTRY_KEY", &registry),
        ("APP_ALLOW_PRIVATE_URLS", "true"),
        ("APP_EXTRA_CA_FILE", ca_file.to_str().expect("utf-8")),
        ("PORT", &api_port.to_string()),
        ("METRICS_PORT", "0"),
        ("RUST_LOG", "warn"),
        // The faults are the subject here; the model tier (`models::`) runs the models.
        ("APP_MODEL_DIR", crate::worker::NO_MODELS),
        ("APP_REQUEST_DEADLINE_MS", "3000"),
        ("APP_WEBHOOK_SCHEDULE_SCALE", "0.01"),
        ("APP_WEBHOOK_TIMEOUT_MS", "2000"),
        ("APP_QUEUE_MIN_IDLE_MS", "2000"),
        ("APP_JOB_LEASE_MS", "2000"),
        ("APP_RELAY_INTERVAL_MS", "500"),
        ("APP_RELAY_GRACE_MS", "1000"),
        ("APP_DISPATCH_IDLE_POLL_MS", "200"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// 32 random bytes in base64, as `APP_REGISTRY_KEY` takes them.
fn random_key() -> String {
    use base64::Engine;
    let bytes = [
        *uuid::Uuid::new_v4().as_bytes(),
        *uuid::Uuid::new_v4().as_bytes(),
    ]
    .concat();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for role in Role::ALL {
            self.kill(role);
        }
        let _ = std::fs::remove_dir_all(&self.logs);
    }
}
