//! The worker fleet: takes jobs of the chosen modalities off the queue, fetches media and
//! classifies. It never answers API requests and never sends webhooks.
//!
//! Each modality gets one apalis worker on a [`StreamBackend`], with the modality's
//! concurrency, all under one apalis `Monitor` that stops them gracefully. The relay (with the
//! rescue of jobs whose lease ran out) and the renewal of the leases of jobs in progress run
//! beside them for the same modalities, the purge of expired idempotency keys
//! ([`key_purge`]) for all jobs, and the data lifecycle (one process of the fleet at a time).

use std::{
    future::Future,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use apalis::layers::WorkerBuilderExt;
use apalis_core::{monitor::Monitor, worker::builder::WorkerBuilder, worker::event::Event};
use moderation_shared::{
    config::DatabaseSettings,
    db::{self, Pool},
    lifecycle::Lifecycle,
    queue::{relay::Relay, JobQueue, StreamBackend},
    redis_conn::RedisConn,
    runtime::{self, MetricsListener, StartupError},
    telemetry,
};

pub mod checks;
pub mod classify;
pub mod decide;
pub mod failure;
pub mod fetch;
pub mod jobs;
pub mod key_purge;
pub mod models;
pub mod policy;
pub mod probe;
mod settings;

pub use settings::{
    ClassifierSettings, Concurrency, ModelSettings, WorkerSettings, DEFAULT_CONCURRENCY,
    LIFECYCLE_INTERVAL,
};

use checks::Checks;
use jobs::{lease::Leases, store::JobStore, JobContext};

/// Counters of one worker process, for tests and diagnostics.
#[derive(Debug, Clone, Default)]
pub struct WorkerStats {
    handled: Arc<AtomicU64>,
    handler_errors: Arc<AtomicU64>,
    worker_errors: Arc<AtomicU64>,
}

impl WorkerStats {
    /// Deliveries handled successfully.
    pub fn handled(&self) -> u64 {
        self.handled.load(Ordering::Relaxed)
    }

    /// Deliveries whose handler failed (they are retried).
    pub fn handler_errors(&self) -> u64 {
        self.handler_errors.load(Ordering::Relaxed)
    }

    /// Times an apalis worker stopped with an error (and was restarted).
    pub fn worker_errors(&self) -> u64 {
        self.worker_errors.load(Ordering::Relaxed)
    }
}

/// A started worker process.
pub struct Worker {
    settings: WorkerSettings,
    metrics: MetricsListener,
    pool: Pool,
    /// Claims' connections (see [`JobStore`]).
    claims: Pool,
    redis: RedisConn,
    checks: Arc<Checks>,
    stats: WorkerStats,
}

impl Worker {
    /// Connects to Postgres and Redis and binds the metrics port.
    pub async fn build(settings: WorkerSettings) -> Result<Self, StartupError> {
        let (pool, redis) = runtime::connect(&settings.database, &settings.redis).await?;
        let claims = db::pool(&DatabaseSettings {
            pool_size: jobs::store::IN_FLIGHT,
            ..settings.database.clone()
        })?;
        let metrics = MetricsListener::bind(settings.metrics_addr).await?;
        let checks = Arc::new(Checks::build(&settings, pool.clone())?);
        if settings.url_guard.allows_private() {
            tracing::warn!("APP_ALLOW_PRIVATE_URLS is on: media may be fetched from private addresses (development and tests only)");
        }
        let names: Vec<&str> = settings.modalities.iter().map(|m| m.as_str()).collect();
        tracing::info!(
            modalities = ?names, metrics_port = metrics.port(),
            provider = checks.provider_name(), "Worker started"
        );
        Ok(Self {
            settings,
            metrics,
            pool,
            claims,
            redis,
            checks,
            stats: WorkerStats::default(),
        })
    }

    /// The port `/metrics` is served on.
    pub fn metrics_port(&self) -> u16 {
        self.metrics.port()
    }

    /// This process's counters.
    pub fn stats(&self) -> WorkerStats {
        self.stats.clone()
    }

    /// Works until `shutdown` resolves, then stops taking jobs and waits up to the shutdown
    /// timeout for jobs in progress.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()> + Send + 'static) {
        metrics::gauge!(telemetry::PROCESS_UP, "process" => "worker").set(1.0);
        telemetry::zero_worker_counters(&self.settings.modalities);
        let queue = JobQueue::new(self.redis.clone());
        let relay = Relay::new(
            self.pool.clone(),
            queue.clone(),
            self.settings.modalities.clone(),
            self.settings.queue.clone(),
        );
        let leases = Leases::default();
        let monitor = self.monitor(queue, leases.clone());
        let models = self.checks.model_set().cloned();
        let recorded = tokio::spawn(record_model_set(self.pool.clone(), models));
        let stopped = monitor.run_with_signal(async move {
            shutdown.await;
            tracing::info!("Worker stopping");
            Ok(())
        });
        tokio::select! {
            result = stopped => match result {
                Ok(()) => tracing::info!("Worker stopped"),
                Err(err) => tracing::error!(error = %err, "Worker stopped with an error"),
            },
            () = self.metrics.serve() => {}
            () = relay.run_until_stopped() => {}
            () = leases.run_until_stopped(self.pool.clone(), self.settings.queue.lease) => {}
            () = key_purge::run_until_stopped(self.pool.clone()) => {}
            () = Lifecycle::new(self.pool.clone(), self.settings.retention, LIFECYCLE_INTERVAL)
                .run_until_stopped() => {}
            () = runtime::watch_dependencies(self.pool, self.redis, Duration::from_secs(5)) => {}
        }
        recorded.abort();
    }

    fn monitor(&self, queue: JobQueue, leases: Leases) -> Monitor {
        let ctx = JobContext {
            pool: self.pool.clone(),
            store: JobStore::start(
                self.pool.clone(),
                self.claims.clone(),
                self.settings.queue.lease,
            ),
            leases,
            queue: queue.clone(),
            checks: self.checks.clone(),
        };
        let mut monitor = Monitor::new();
        for &modality in &self.settings.modalities {
            let concurrency = self.settings.concurrency.of(modality);
            let queue = queue.clone();
            let ctx = ctx.clone();
            let settings = self.settings.queue.clone();
            monitor = monitor.register(move |_| {
                let backend =
                    StreamBackend::new(queue.clone(), modality, concurrency, settings.clone());
                WorkerBuilder::new(format!("worker-{modality}"))
                    .backend(backend)
                    .data(ctx.clone())
                    .concurrency(concurrency)
                    .build(jobs::handle_as_task)
            });
        }
        let stats = self.stats.clone();
        let restarts = self.stats.clone();
        monitor
            .on_event(move |_, event| match event {
                Event::Success(_) => {
                    stats.handled.fetch_add(1, Ordering::Relaxed);
                }
                Event::Error(err) => {
                    stats.handler_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %err, "Job delivery failed; it will be retried");
                }
                _ => {}
            })
            .should_restart(move |worker, err| {
                restarts.worker_errors.fetch_add(1, Ordering::Relaxed);
                metrics::counter!(telemetry::WORKER_RESTARTS_TOTAL).increment(1);
                tracing::error!(worker = worker.name(), error = %err, "Worker failed; restarting");
                true
            })
            .shutdown_timeout(self.settings.shutdown_timeout)
    }
}

/// Records the set of models this worker loaded in `model_sets` (jobs name it), retrying
/// while Postgres is unreachable.
async fn record_model_set(pool: Pool, set: Option<models::set::ModelSet>) {
    let Some(set) = set else {
        return;
    };
    loop {
        let recorded = match pool.get().await {
            Ok(client) => db::model_sets::record(&client, &set.id, &set.models)
                .await
                .map_err(|e| e.to_string()),
            Err(err) => Err(err.to_string()),
        };
        match recorded {
            Ok(()) => return,
            Err(error) => {
                tracing::warn!(%error, model_set = %set.id, "Could not record the model set; retrying");
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    }
}
