//! Workers for tests: in-process on a [`TestApp`]'s database and Redis namespace, or the real
//! `worker` binary as a child process (for tests that kill it).

use std::{
    fs::File,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use moderation_shared::{
    config::RedisSettings,
    domain::{JobId, Modality},
    queue::JobQueue,
    redis_conn::RedisConn,
};
use moderation_worker::{Worker, WorkerSettings, WorkerStats};
use tokio::{sync::oneshot, task::JoinHandle};

use crate::{eventually, TestApp};

/// A worker running inside the test process.
pub struct TestWorker {
    stop: Option<oneshot::Sender<()>>,
    handle: JoinHandle<()>,
    /// Its counters.
    pub stats: WorkerStats,
}

impl TestWorker {
    /// Whether it is still running (it never stops on its own).
    pub fn is_running(&self) -> bool {
        !self.handle.is_finished()
    }

    /// Asks it to stop and waits until it has.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.handle).await;
    }
}

impl Drop for TestWorker {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// Where tests' workers look for the built-in models unless a test points them elsewhere: a
/// directory that does not exist, so no result depends on whether `scripts/models` ran here.
pub const NO_MODELS: &str = "/nonexistent/moderation-test-models";

/// The models `scripts/models` prepared, for the model tiers: `TEST_MODEL_DIR`, else the
/// default directory of contract 10. Panics, naming `scripts/models`, when it is not prepared.
pub fn model_dir() -> PathBuf {
    let dir = std::env::var_os("TEST_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache")
                });
            cache.join("moderation").join("models")
        });
    assert!(
        dir.join("prepared.sha256").is_file(),
        "no prepared models in {}: run scripts/models",
        dir.display()
    );
    dir
}

/// Worker settings for `app`: its database and Redis namespace, every modality, short queue
/// timings (the relay every 200 ms with no grace, takeover after 2 s) and no built-in models.
pub fn worker_settings(app: &TestApp) -> WorkerSettings {
    let mut settings = WorkerSettings::for_local(app.db.settings.clone(), app.redis.clone());
    settings.models.dir = PathBuf::from(NO_MODELS);
    settings.queue.relay_interval = Duration::from_millis(200);
    settings.queue.relay_grace = Duration::ZERO;
    settings.queue.min_idle = Duration::from_secs(2);
    settings.shutdown_timeout = Duration::from_secs(5);
    settings
}

/// Starts an in-process worker for `app` after `adjust` has changed its settings.
pub async fn spawn_worker(app: &TestApp, adjust: impl FnOnce(&mut WorkerSettings)) -> TestWorker {
    let mut settings = worker_settings(app);
    adjust(&mut settings);
    let worker = Worker::build(settings).await.expect("build worker");
    let stats = worker.stats();
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = tokio::spawn(worker.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    TestWorker {
        stop: Some(stop),
        handle,
        stats,
    }
}

/// The real `worker` binary running as a child process; killed when dropped.
pub struct WorkerProcess {
    child: Child,
    /// The file its log (standard output) goes to, when started with [`Self::spawn_logged`].
    log: Option<PathBuf>,
}

impl WorkerProcess {
    /// Runs `worker --modality <modality>` on `app`'s database and `redis`, with `env` added.
    pub fn spawn(
        app: &TestApp,
        redis: &RedisSettings,
        modality: Modality,
        env: &[(&str, &str)],
    ) -> Self {
        Self::start(app, redis, modality, env, None)
    }

    /// [`Self::spawn`], writing its log to a fresh file that [`Self::log`] reads.
    pub fn spawn_logged(
        app: &TestApp,
        redis: &RedisSettings,
        modality: Modality,
        env: &[(&str, &str)],
    ) -> Self {
        let path = std::env::temp_dir().join(format!("worker-{}.log", uuid::Uuid::new_v4()));
        Self::start(app, redis, modality, env, Some(path))
    }

    fn start(
        app: &TestApp,
        redis: &RedisSettings,
        modality: Modality,
        env: &[(&str, &str)],
        log: Option<PathBuf>,
    ) -> Self {
        let stdout = match &log {
            Some(path) => Stdio::from(File::create(path).expect("create the worker's log")),
            None => Stdio::null(),
        };
        let child = Command::new(crate::binary("worker"))
            .args(["--modality", modality.as_str()])
            .env("DATABASE_URL", app.db.settings.url.expose())
            .env("REDIS_URL", redis.url.expose())
            .env("APP_REDIS_NAMESPACE", &redis.namespace)
            .env("METRICS_PORT", "0")
            .env("RUST_LOG", "warn")
            .env("APP_MODEL_DIR", NO_MODELS)
            .envs(env.iter().copied())
            .stdout(stdout)
            .stderr(Stdio::null())
            .spawn()
            .expect("start the worker binary");
        Self { child, log }
    }

    /// What it has logged so far (empty unless started with [`Self::spawn_logged`]).
    pub fn log(&self) -> String {
        self.log
            .as_ref()
            .and_then(|path| std::fs::read_to_string(path).ok())
            .unwrap_or_default()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends it SIGTERM (from Rust: a minimal Debian has no `kill` program).
    pub fn terminate(&self) {
        let pid = i32::try_from(self.child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .expect("the worker's pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("send SIGTERM");
    }

    /// Its exit status once it has exited.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("wait for the worker")
    }

    /// Kills it with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
        if let Some(path) = &self.log {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl TestApp {
    /// How many entries the stream of `modality` holds in this app's Redis namespace.
    pub async fn stream_len(&self, modality: Modality) -> usize {
        let redis = RedisConn::new(&self.redis).expect("redis settings");
        let key = JobQueue::new(redis.clone()).stream_key(modality);
        redis
            .with(|mut conn| async move {
                redis::cmd("XLEN")
                    .arg(key)
                    .query_async::<usize>(&mut conn)
                    .await
            })
            .await
            .expect("XLEN")
    }
}

/// The queue of `redis` (URL and namespace).
pub fn queue(redis: &RedisSettings) -> JobQueue {
    JobQueue::new(RedisConn::new(redis).expect("redis settings"))
}

/// Inserts `count` queued jobs of `modality` for a new account in one statement, with their
/// rows of `open_jobs`, whose `enqueued_at` is now when `enqueued`, else NULL (as after a
/// failed enqueue).
pub async fn insert_jobs(
    app: &TestApp,
    modality: Modality,
    count: i64,
    enqueued: bool,
) -> Vec<JobId> {
    let account = app.create_account().await;
    let client = app.db.pool.get().await.expect("connect");
    let rows = client
        .query(
            "WITH stored AS (
                 INSERT INTO jobs (id, account_id, type, content)
                 SELECT uuid_v7(), $1, $2, 'queued by a test'
                 FROM generate_series(1, $3::bigint)
                 RETURNING id, account_id, type, created_at)
             INSERT INTO open_jobs (job_id, account_id, type, created_at, enqueued_at)
             SELECT id, account_id, type, created_at, CASE WHEN $4 THEN now() END FROM stored
             RETURNING job_id",
            &[&account.0, &modality.as_str(), &count, &enqueued],
        )
        .await
        .expect("insert jobs");
    rows.iter().map(|r| JobId(r.get(0))).collect()
}

/// Every key matching `pattern` (SCAN, a thousand at a time).
pub(crate) async fn scan_keys(
    conn: &mut impl redis::aio::ConnectionLike,
    pattern: &str,
) -> redis::RedisResult<Vec<String>> {
    let mut keys = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        keys.extend(batch);
        if next == 0 {
            return Ok(keys);
        }
        cursor = next;
    }
}

/// Deletes every key of `redis`'s namespace: as if Redis had lost this test's data, without
/// touching other tests' keys. Returns how many keys went.
pub async fn delete_namespace(redis: &RedisSettings) -> usize {
    let conn = RedisConn::new(redis).expect("redis settings");
    let pattern = conn.key("*");
    conn.with(|mut conn| async move {
        let keys = scan_keys(&mut conn, &pattern).await?;
        if !keys.is_empty() {
            redis::cmd("DEL")
                .arg(&keys)
                .query_async::<()>(&mut conn)
                .await?;
        }
        Ok(keys.len())
    })
    .await
    .expect("delete the namespace's keys")
}

/// How many of the test database's jobs have `status`.
pub async fn count_status(app: &TestApp, status: &str) -> i64 {
    let client = app.db.pool.get().await.expect("connect");
    client
        .query_one("SELECT count(*) FROM jobs WHERE status = $1", &[&status])
        .await
        .expect("count jobs")
        .get(0)
}

/// A Redis server of a test's own on a free port, so restarting it disturbs no other test.
/// It keeps nothing on disk: a restart loses every key.
pub struct PrivateRedis {
    port: u16,
    child: Option<Child>,
}

impl PrivateRedis {
    /// Starts one.
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("address")
            .port();
        let mut redis = Self { port, child: None };
        redis.restart();
        redis
    }

    /// The address it listens on.
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Settings for it in `namespace`.
    pub fn settings(&self, namespace: &str) -> RedisSettings {
        RedisSettings::new(format!("redis://127.0.0.1:{}", self.port), namespace)
    }

    /// Stops it (SIGKILL); its data is gone.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops it if running and starts an empty one on the same port.
    pub fn restart(&mut self) {
        self.stop();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed (scripts/test installs it)");
        self.child = Some(child);
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

impl TestApp {
    /// Polls `GET /api/v1/job/{id}` with `key` until the job is completed or failed (90 s at
    /// most: the models tier decodes video and runs Whisper side by side on two cores) and
    /// returns its body.
    pub async fn finished_job(&self, key: &crate::TestKey, job: uuid::Uuid) -> serde_json::Value {
        eventually(Duration::from_secs(90), "the job to finish", || async {
            let body: serde_json::Value = self
                .get(&format!("/api/v1/job/{job}"), key)
                .await
                .json()
                .await
                .ok()?;
            matches!(body["status"].as_str(), Some("completed" | "failed")).then_some(body)
        })
        .await
    }

    /// How many webhook deliveries exist for `job`.
    pub async fn deliveries_of(&self, job: uuid::Uuid) -> i64 {
        let client = self.db.pool.get().await.expect("connect");
        client
            .query_one("SELECT count(*) FROM deliveries WHERE job_id = $1", &[&job])
            .await
            .expect("count deliveries")
            .get(0)
    }
}
