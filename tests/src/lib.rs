//! Test harness: each test gets its own Postgres database (migrated), its own Redis
//! namespace, and an api running in the test process on a random port.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "test harness: a failed set-up step must stop the test loudly"
)]

pub mod browser;
pub mod dashboard;
pub mod dispatch;
pub mod fixtures;
pub mod fleet;
pub mod forms;
pub mod media;
pub mod model_server;
pub mod multinode;
pub mod netns;
pub mod openai;
pub mod pgbouncer;
pub mod plans;
pub mod postgres;
pub mod proxy;
pub mod receiver;
pub mod redis_cluster;
pub mod registry;
pub mod review;
pub mod scores;
pub mod startup;
pub mod traces;
pub mod worker;

use std::{sync::Once, time::Duration};

use moderation_api::{ApiSettings, Application};
use moderation_shared::{
    config::{DatabaseSettings, RedisSettings},
    crypto::SealingKey,
    db::{self, audit_events::Actor, Pool},
    domain::{AccountId, Scope},
    policy::PolicyDefaults,
    provisioning,
    registry::RegistryKey,
};
use time::OffsetDateTime;
use uuid::Uuid;

/// Postgres server the tests create their databases on (`TEST_DATABASE_URL`, a URL without a
/// database name).
pub fn postgres_base_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned())
}

/// Redis server the tests use (`TEST_REDIS_URL`).
pub fn redis_url() -> String {
    std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// Starts test logging once; silent unless `TEST_LOG` is set.
pub fn init_tracing() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("TEST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| "info".into()),
                )
                .with_test_writer()
                .try_init();
        }
    });
}

/// A fresh database, dropped when this value is dropped.
pub struct TestDatabase {
    /// Its name.
    pub name: String,
    /// Settings pointing at it.
    pub settings: DatabaseSettings,
    /// A pool on it for the test's own queries.
    pub pool: Pool,
}

impl TestDatabase {
    /// Creates and migrates a new database.
    pub async fn create() -> Self {
        Self::create_at(None).await
    }

    /// Creates a new database migrated up to `version` (every migration when `None`): an
    /// upgrade test starts from the schema as it was.
    pub async fn create_at(version: Option<i32>) -> Self {
        let name = format!("mt_{}", Uuid::new_v4().simple());
        let admin = DatabaseSettings::new(format!("{}/postgres", postgres_base_url()));
        let admin_pool = db::pool(&admin).expect("admin pool");
        let client = admin_pool.get().await.expect("connect to Postgres");
        client
            .simple_query(&format!("CREATE DATABASE \"{name}\""))
            .await
            .expect("create test database");
        let settings = DatabaseSettings {
            pool_size: 8,
            ..DatabaseSettings::new(format!("{}/{name}", postgres_base_url()))
        };
        let pool = db::pool(&settings).expect("pool");
        match version {
            Some(version) => db::migrate_to(&pool, version).await,
            None => db::migrate(&pool).await,
        }
        .expect("migrate test database");
        Self {
            name,
            settings,
            pool,
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        self.pool.close();
        let name = self.name.clone();
        // Drop runs outside async context; a small thread with its own runtime does the work.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let admin = DatabaseSettings::new(format!("{}/postgres", postgres_base_url()));
                if let Ok(pool) = db::pool(&admin) {
                    if let Ok(client) = pool.get().await {
                        let _ = client
                            .simple_query(&format!(
                                "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                            ))
                            .await;
                    }
                }
            });
        })
        .join();
    }
}

/// A loopback port nothing listens on (bound, then released).
pub fn unused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Redis settings pointing at a port where no Redis answers.
pub fn unreachable_redis() -> RedisSettings {
    RedisSettings::new(
        format!("redis://127.0.0.1:{}", unused_port()),
        "unreachable",
    )
}

/// A running api with its own database and Redis namespace.
pub struct TestApp {
    /// `http://127.0.0.1:PORT`.
    pub address: String,
    /// The api's port.
    pub port: u16,
    /// The test database.
    pub db: TestDatabase,
    /// The Redis settings (URL and namespace) the fleet uses.
    pub redis: RedisSettings,
    /// The key sealing webhook secrets (the dispatcher needs the same one).
    pub encryption_key: SealingKey,
    /// An HTTP client with no redirects and a short timeout.
    pub client: reqwest::Client,
}

/// Starts an api with default test settings.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// Starts an api after `adjust` has changed its settings.
pub async fn spawn_app_with(adjust: impl FnOnce(&mut ApiSettings)) -> TestApp {
    init_tracing();
    let db = TestDatabase::create().await;
    let redis = RedisSettings::new(redis_url(), format!("test-{}", Uuid::new_v4().simple()));
    let encryption_key = SealingKey::random().expect("random key");
    let registry_key = RegistryKey::random().expect("random key");
    let mut settings = ApiSettings::for_local(
        db.settings.clone(),
        redis.clone(),
        encryption_key.clone(),
        registry_key,
    );
    settings.http_workers = 1;
    adjust(&mut settings);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let encryption_key = settings.encryption_key.clone();
    let app = Application::build_with_listener(settings, listener).expect("build api");
    let port = app.port();
    tokio::spawn(app.run_until_stopped());
    TestApp {
        address: format!("http://127.0.0.1:{port}"),
        port,
        db,
        redis,
        encryption_key,
        client: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client"),
    }
}

impl TestApp {
    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    /// Creates an active account with the default plan.
    pub async fn create_account(&self) -> AccountId {
        let client = self.db.pool.get().await.expect("connect");
        provisioning::create_account(&client, "Test account", &PolicyDefaults::default())
            .await
            .expect("create account")
            .id
    }

    /// Issues a key; `None` scopes give the client defaults.
    pub async fn create_key(&self, account: AccountId, scopes: Option<&[Scope]>) -> TestKey {
        self.create_key_expiring(account, scopes, None).await
    }

    /// Issues a key with an expiry.
    pub async fn create_key_expiring(
        &self,
        account: AccountId,
        scopes: Option<&[Scope]>,
        expires_at: Option<OffsetDateTime>,
    ) -> TestKey {
        let client = self.db.pool.get().await.expect("connect");
        let issued = provisioning::issue_key(
            &client,
            Actor::Operator,
            account,
            Some("test key"),
            scopes,
            expires_at,
        )
        .await
        .expect("issue key");
        TestKey {
            account,
            key_id: issued.key_id.0,
            key: issued.key,
        }
    }

    /// A new account and a key with `scopes` (every issuable scope but the registry ones when
    /// `None`).
    pub async fn account_with_key(&self, scopes: Option<&[Scope]>) -> TestKey {
        let account = self.create_account().await;
        let all: Vec<Scope> = Scope::ALL
            .into_iter()
            .filter(|s| s.issuable_to_keys() && !s.needs_registry_membership())
            .collect();
        self.create_key(account, Some(scopes.unwrap_or(&all))).await
    }

    /// Makes a version of `account`'s policy from its active one changed by `change`, and
    /// activates it (as the api does); returns its number.
    pub async fn activate_policy(
        &self,
        account: AccountId,
        change: impl FnOnce(&mut moderation_shared::policy::PolicyDoc),
    ) -> i32 {
        use moderation_shared::db::policy_versions::{self, Switched};
        let mut client = self.db.pool.get().await.expect("connect");
        let tx = client.transaction().await.expect("begin");
        let active = policy_versions::deciding(&tx, account)
            .await
            .expect("read the versions")
            .active
            .expect("an active version");
        let mut doc = active.doc;
        change(&mut doc);
        let draft = policy_versions::insert_draft(&tx, account, &doc, Some("a test's"))
            .await
            .expect("draft");
        let switched = policy_versions::activate(&tx, account, draft.version)
            .await
            .expect("activate");
        assert!(matches!(switched, Switched::Changed { .. }), "{switched:?}");
        tx.commit().await.expect("commit");
        draft.version
    }

    /// Lifts the account's rate limit, for tests that send bursts and are not about limits.
    /// Call it before the account's first request (keys are cached for a moment).
    pub async fn lift_rate_limit(&self, account: AccountId) {
        let client = self.db.pool.get().await.expect("connect");
        let update = moderation_shared::db::accounts::PlanUpdate {
            rate_per_minute: Some(1_000_000),
            ..Default::default()
        };
        moderation_shared::db::accounts::update_plan(&client, Actor::Operator, account, &update)
            .await
            .expect("update plan");
    }

    /// `GET path` with `key` as bearer.
    pub async fn get(&self, path: &str, key: &TestKey) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .bearer_auth(&key.key)
            .send()
            .await
            .expect("request")
    }
}

/// A key issued for a test.
#[derive(Debug, Clone)]
pub struct TestKey {
    /// Its account.
    pub account: AccountId,
    /// Its id.
    pub key_id: Uuid,
    /// The full key value.
    pub key: String,
}

/// `GET http://127.0.0.1:<port><path>` without a key: its status, content type and body.
pub async fn get_plain(port: u16, path: &str) -> (u16, String, String) {
    let response = reqwest::get(format!("http://127.0.0.1:{port}{path}"))
        .await
        .expect("GET");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (status, content_type, response.text().await.expect("body"))
}

/// Asserts that `response` is the contract's error body with `status` and `code`, and returns
/// the body.
pub async fn assert_error(
    response: reqwest::Response,
    status: u16,
    code: &str,
) -> serde_json::Value {
    let actual = response.status().as_u16();
    let body: serde_json::Value = response.json().await.expect("error body is JSON");
    assert_eq!(actual, status, "unexpected status, body {body}");
    assert_eq!(body["error"], code, "unexpected code, body {body}");
    assert_eq!(body["statusCode"], status, "statusCode, body {body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "message, body {body}"
    );
    body
}

/// Polls `probe` until it returns `Some`, or panics after `deadline`.
pub async fn eventually<T, F, Fut>(deadline: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = std::time::Instant::now();
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            started.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The path of a workspace binary (`api`, `worker`, `dispatcher`, `modctl`) built beside this
/// test executable. `scripts/test` builds them first (`cargo build --workspace --bins`).
pub fn binary(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/it-<hash> -> target/<profile>/<name>
    let path = exe
        .parent()
        .and_then(std::path::Path::parent)
        .map(|dir| dir.join(name))
        .expect("target directory");
    assert!(
        path.exists(),
        "{} is not built; run `cargo build --workspace --bins`",
        path.display()
    );
    path
}
