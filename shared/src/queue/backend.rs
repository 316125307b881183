//! The apalis backend over one modality's stream, and the layer that acknowledges deliveries.
//!
//! apalis drives [`StreamBackend`] like any backend (`poll_ready`, `poll_next`, `poll_close`);
//! a [`Consumer`] task does the Redis work and feeds it through a channel. The backend's own
//! middleware, [`AckLayer`], wraps every handler call: a success acknowledges the entry
//! (`XACK` + `XDEL` + `HDEL`, so finished entries never accumulate); a failure leaves it
//! pending, so it is retried by takeover after the min-idle time.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use apalis_core::{
    backend::{finalize::Ephemeral, Backend, BackendConfig},
    task::Task,
    worker::context::WorkerContext,
};
use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, watch, Semaphore};
use tower_layer::Layer;
use tower_service::Service;

use super::{
    consumer::{Consumer, Held},
    JobQueue, QueueError, QueueSettings, QueuedJob,
};
use crate::{domain::Modality, telemetry};

/// An apalis backend delivering one modality's jobs to one worker.
pub struct StreamBackend {
    settings: QueueSettings,
    modality: Modality,
    name: String,
    queue: JobQueue,
    permits: Arc<Semaphore>,
    held: Held,
    rx: mpsc::Receiver<Task<QueuedJob>>,
    stop: watch::Sender<bool>,
    consumer: Option<Consumer>,
    running: Option<tokio::task::JoinHandle<()>>,
    closing: Option<BoxFuture<'static, ()>>,
    closed: bool,
}

impl std::fmt::Debug for StreamBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamBackend")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl StreamBackend {
    /// A backend for `modality` that holds at most `concurrency` deliveries at once (match it
    /// to the worker's concurrency). Its consumer name is unique: host, process id and a
    /// random part.
    pub fn new(
        queue: JobQueue,
        modality: Modality,
        concurrency: usize,
        settings: QueueSettings,
    ) -> Self {
        let concurrency = concurrency.max(1);
        let permits = Arc::new(Semaphore::new(concurrency));
        let held = Held::default();
        let (tx, rx) = mpsc::channel(concurrency);
        let (stop, stop_rx) = watch::channel(false);
        let name = consumer_name();
        let consumer = Consumer {
            queue: queue.clone(),
            modality,
            settings: settings.clone(),
            name: name.clone(),
            permits: permits.clone(),
            batch: concurrency.min(100),
            held: held.clone(),
            tx,
            stop: stop_rx,
        };
        Self {
            settings,
            modality,
            name,
            queue,
            permits,
            held,
            rx,
            stop,
            consumer: Some(consumer),
            running: None,
            closing: None,
            closed: false,
        }
    }

    fn start(&mut self) {
        if let Some(consumer) = self.consumer.take() {
            self.running = Some(tokio::spawn(consumer.run()));
        }
    }
}

impl Backend for StreamBackend {
    type Task = Task<QueuedJob>;
    type Error = QueueError;

    fn poll_ready(
        &mut self,
        _: &mut Context<'_>,
        _: &WorkerContext,
    ) -> Poll<Result<(), QueueError>> {
        self.start();
        Poll::Ready(Ok(()))
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        _: &WorkerContext,
    ) -> Poll<Option<Result<Task<QueuedJob>, QueueError>>> {
        self.start();
        self.rx.poll_recv(cx).map(|task| task.map(Ok))
    }

    fn poll_close(
        &mut self,
        cx: &mut Context<'_>,
        _: &WorkerContext,
    ) -> Poll<Result<(), QueueError>> {
        if self.closing.is_none() {
            let _ = self.stop.send(true);
            let running = self.running.take();
            let (_, placeholder) = mpsc::channel(1);
            let mut rx = std::mem::replace(&mut self.rx, placeholder);
            let queue = self.queue.clone();
            let permits = self.permits.clone();
            let held = self.held.clone();
            let (modality, name) = (self.modality, self.name.clone());
            self.closing = Some(Box::pin(async move {
                if let Some(running) = running {
                    let _ = running.await;
                }
                rx.close();
                let mut unstarted = Vec::new();
                while let Ok(task) = rx.try_recv() {
                    unstarted.push(task.args);
                }
                if !unstarted.is_empty() {
                    if let Err(err) = queue.give_back(&unstarted).await {
                        tracing::warn!(error = %err, "Could not give back unstarted jobs; they will be taken over");
                    }
                    for job in &unstarted {
                        release(&permits, &held, job);
                    }
                }
                // Entries still held (jobs cut off by the shutdown timeout) keep the consumer.
                let _ = queue.remove_consumer_if_idle(modality, &name).await;
            }));
        }
        if let Some(closing) = self.closing.as_mut() {
            if closing.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        self.closing = None;
        self.closed = true;
        Poll::Ready(Ok(()))
    }
}

impl BackendConfig for StreamBackend {
    type Args = QueuedJob;
    type Id = String;
    type Kind = Ephemeral;
    type Config = QueueSettings;
    type Layer = AckLayer;

    fn config(&self) -> &QueueSettings {
        &self.settings
    }

    fn middleware(&mut self, _: &mut WorkerContext) -> AckLayer {
        AckLayer {
            queue: self.queue.clone(),
            permits: self.permits.clone(),
            held: self.held.clone(),
        }
    }
}

/// Acknowledges each delivery whose handler succeeded and frees its slot either way.
#[derive(Clone)]
pub struct AckLayer {
    queue: JobQueue,
    permits: Arc<Semaphore>,
    held: Held,
}

impl std::fmt::Debug for AckLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AckLayer").finish_non_exhaustive()
    }
}

impl<S> Layer<S> for AckLayer {
    type Service = AckService<S>;

    fn layer(&self, inner: S) -> AckService<S> {
        AckService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`AckLayer`] makes.
#[derive(Clone)]
pub struct AckService<S> {
    inner: S,
    layer: AckLayer,
}

impl<S> std::fmt::Debug for AckService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AckService").finish_non_exhaustive()
    }
}

impl<S> Service<Task<QueuedJob>> for AckService<S>
where
    S: Service<Task<QueuedJob>>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, task: Task<QueuedJob>) -> Self::Future {
        let job = task.args.clone();
        let slot = Slot {
            layer: self.layer.clone(),
            job,
        };
        let fut = self.inner.call(task);
        Box::pin(async move {
            let result = fut.await;
            let modality = slot.job.modality.as_str();
            if result.is_ok() {
                if let Err(err) = slot.layer.queue.ack(&slot.job).await {
                    // The entry stays pending and is delivered again after the takeover time;
                    // the handler then sees a job already claimed and ignores it.
                    tracing::warn!(job_id = %slot.job.job_id, error = %err, "Could not acknowledge a job");
                }
                metrics::counter!(telemetry::QUEUE_DELIVERIES_TOTAL, "modality" => modality, "outcome" => "ok")
                    .increment(1);
            } else {
                metrics::counter!(telemetry::QUEUE_DELIVERIES_TOTAL, "modality" => modality, "outcome" => "error")
                    .increment(1);
            }
            drop(slot);
            result
        })
    }
}

/// A held delivery's slot: freed (permit back, no more keep-alive) when dropped, even when the
/// handler's future is dropped at shutdown.
struct Slot {
    layer: AckLayer,
    job: QueuedJob,
}

impl Drop for Slot {
    fn drop(&mut self) {
        release(&self.layer.permits, &self.layer.held, &self.job);
    }
}

fn release(permits: &Semaphore, held: &Held, job: &QueuedJob) {
    if let Ok(mut held) = held.lock() {
        held.remove(&job.entry_id);
    }
    permits.add_permits(1);
}

/// `host-pid-random`, unique among the group's consumers.
fn consumer_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}-{}", std::process::id(), &random[..8])
}
