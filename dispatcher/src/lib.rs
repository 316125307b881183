//! The dispatcher: owns the signed webhook schedule. It claims due deliveries from Postgres
//! (several dispatchers can run), signs and sends them, records every attempt and schedules
//! the next. It never classifies and never answers API requests.

pub mod deliver;
mod health;
pub mod listen;
mod records;
pub mod schedule;
pub mod settings;

use std::{future::Future, sync::Arc, time::Duration};

use time::OffsetDateTime;

use moderation_shared::{
    batch::Batcher,
    clock,
    config::postgres_config,
    db::{
        self,
        audit_events::Actor,
        deliveries,
        deliveries::{
            AttemptRecord, Claimed, Lane, NextDue, NextStep, CHANNEL, RECOVERIES_CHANNEL,
            RESENDS_CHANNEL,
        },
        endpoints, review_items, webhooks, Pool,
    },
    endpoint_health::Attempted,
    queue::{sampler::DepthSampler, JobQueue},
    redis_conn::RedisConn,
    runtime::{check_redis_layout, MetricsListener, StartupError},
    telemetry,
};
use tokio::{
    sync::{Notify, Semaphore},
    task::JoinSet,
};

pub use settings::DispatcherSettings;

use crate::{
    deliver::{Outcome, Sender},
    records::Records,
};

/// Beyond twice the attempt deadline, how long a claim lasts before a silent dispatcher's
/// attempt is given up and the row is due again (an attempt never takes longer).
const LEASE_MARGIN: Duration = Duration::from_secs(1);
/// How often the age of the oldest due delivery is sampled.
const OLDEST_DUE_SAMPLE: Duration = Duration::from_secs(1);

/// The shortest sleep, so rows due but locked by another dispatcher cause no hot loop.
const MIN_IDLE: Duration = Duration::from_millis(5);

/// Deliveries a recover restarts per transaction.
const RECOVER_BATCH: i64 = 2000;
/// How often open recovers are looked for without a notification.
const RECOVER_POLL: Duration = Duration::from_secs(1);

/// Which lanes besides the scheduled one (always asked) a round of the loop asks for due
/// attempts: those woken for, or due by their next attempt's time. At low load a wake-up per
/// delivery otherwise asked the two quiet lanes for nothing each time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lanes {
    resend: bool,
    recovered: bool,
}

impl Lanes {
    const ALL: Self = Self {
        resend: true,
        recovered: true,
    };
    const NONE: Self = Self {
        resend: false,
        recovered: false,
    };

    /// Whether a round asks `lane`.
    fn asks(self, lane: Lane) -> bool {
        match lane {
            Lane::Scheduled => true,
            Lane::Resend => self.resend,
            Lane::Recovered => self.recovered,
        }
    }

    /// These lanes and those `next` says are due by now; every lane when `next` is unknown.
    fn with_due(self, next: Option<&NextDue>) -> Self {
        let Some(next) = next else {
            return Self::ALL;
        };
        let now = clock::now();
        let due = |at: Option<OffsetDateTime>| at.is_some_and(|at| at <= now);
        Self {
            resend: self.resend || due(next.resend),
            recovered: self.recovered || due(next.recovered),
        }
    }
}

/// How long from now until `at`, at least [`MIN_IDLE`].
fn wait_until(at: OffsetDateTime) -> Duration {
    Duration::try_from(at - clock::now())
        .unwrap_or(Duration::ZERO)
        .max(MIN_IDLE)
}

/// What one [`Dispatcher::try_dispatch_due`] step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatched {
    /// This many attempts were made, each ended and recorded.
    Done(usize),
    /// Nothing was due.
    Empty,
}

/// A started dispatcher.
pub struct Dispatcher {
    metrics: MetricsListener,
    core: Arc<Core>,
    depth: DepthSampler,
    /// The listening session's connection settings (`APP_DATABASE_DIRECT_URL`).
    listen: tokio_postgres::Config,
}

/// What every attempt needs.
struct Core {
    pool: Pool,
    settings: DispatcherSettings,
    sender: Sender,
    slots: Arc<Semaphore>,
    /// The share of `slots` the recovered lane may hold: half, so the other lanes always
    /// have the rest.
    recovery_slots: Arc<Semaphore>,
    /// The records of attempts to per-request URLs, batched.
    records: Batcher<Records>,
}

impl Dispatcher {
    /// Connects to Postgres and binds the metrics port.
    pub async fn build(settings: DispatcherSettings) -> Result<Self, StartupError> {
        let pool = db::pool(&settings.database)?;
        let listen = postgres_config(settings.direct_url.expose(), "APP_DATABASE_DIRECT_URL")?;
        drop(
            pool.get()
                .await
                .map_err(|e| StartupError::Postgres(e.into()))?,
        );
        let sender = Sender::new(
            settings.url_guard.clone(),
            settings.attempt_timeout,
            settings.extra_ca_pem.as_deref(),
        )
        .map_err(|e| StartupError::HttpClient(e.into()))?;
        if settings.url_guard.allows_private() {
            tracing::warn!("APP_ALLOW_PRIVATE_URLS is on: webhooks may reach private addresses (development and tests only)");
        }
        let redis = RedisConn::new(&settings.redis)?;
        check_redis_layout(&redis).await?;
        let depth = DepthSampler::new(
            JobQueue::new(redis),
            settings.queue_min_idle,
            settings.depth_sample,
        );
        let metrics = MetricsListener::bind(settings.metrics_addr).await?;
        tracing::info!(metrics_port = metrics.port(), "Dispatcher started");
        Ok(Self {
            metrics,
            depth,
            listen,
            core: Arc::new(Core {
                slots: Arc::new(Semaphore::new(settings.concurrency)),
                recovery_slots: Arc::new(Semaphore::new(settings.concurrency.div_ceil(2))),
                records: Records::start(pool.clone()),
                pool,
                sender,
                settings,
            }),
        })
    }

    /// The port `/metrics` is served on.
    pub fn metrics_port(&self) -> u16 {
        self.metrics.port()
    }

    /// One step without the loop: applies the open recovers, claims what is due now (as many
    /// deliveries as there are slots), makes their attempts and waits until every one has
    /// ended and been recorded. Tests drive the dispatcher with it, calling it until it answers
    /// [`Dispatched::Empty`].
    pub async fn try_dispatch_due(&self) -> anyhow::Result<Dispatched> {
        while self.core.apply_recoveries().await? > 0 {}
        health::sweep(&self.core.pool, &self.core.settings.health).await?;
        let mut running = JoinSet::new();
        let made = self.core.dispatch_due(&mut running, Lanes::ALL).await?
            + health::send_notices(&self.core.pool, self.core.notifier()).await?;
        while running.join_next().await.is_some() {}
        Ok(match made {
            0 => Dispatched::Empty,
            n => Dispatched::Done(n),
        })
    }

    /// Runs until `shutdown` resolves; then finishes the attempts in flight (each has a
    /// deadline), so no lease is left to run out.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()>) {
        metrics::gauge!(telemetry::PROCESS_UP, "process" => "dispatcher").set(1.0);
        telemetry::zero_dispatcher_counters(self.core.settings.schedule.attempts());
        telemetry::zero_endpoint_counters();
        let wake = Arc::new(Notify::new());
        let resend_wake = Arc::new(Notify::new());
        let recovered_wake = Arc::new(Notify::new());
        let recover_wake = Arc::new(Notify::new());
        let listener = tokio::spawn(listen::notify_on_new(
            self.listen.clone(),
            vec![
                (CHANNEL, wake.clone()),
                (RESENDS_CHANNEL, resend_wake.clone()),
                (RECOVERIES_CHANNEL, recover_wake.clone()),
            ],
        ));
        // Recovers are applied beside the loop: restarting 100 000 deliveries takes seconds
        // of Postgres work that must not hold up a single attempt.
        let recover = tokio::spawn(
            self.core
                .clone()
                .apply_recoveries_until_stopped(recover_wake, recovered_wake.clone()),
        );
        let metrics = tokio::spawn(self.metrics.serve());
        let depth = tokio::spawn(self.depth.run_until_stopped());
        let mut running = JoinSet::new();
        // Sampling runs beside the loop, so a slow connection never delays an attempt.
        let core = self.core.clone();
        let oldest_due = tokio::spawn(async move {
            let mut tick = tokio::time::interval(OLDEST_DUE_SAMPLE);
            loop {
                tick.tick().await;
                core.sample_oldest_due().await;
                core.sample_review().await;
                if let Err(err) = health::sweep(&core.pool, &core.settings.health).await {
                    tracing::warn!(error = ?err, "Sweeping endpoint health failed");
                }
                if let Err(err) = health::send_notices(&core.pool, core.notifier()).await {
                    tracing::warn!(error = ?err, "Sending operator notices failed");
                }
            }
        });
        tokio::pin!(shutdown);
        let mut lanes = Lanes::ALL;
        'rounds: loop {
            while running.try_join_next().is_some() {}
            let (idle, next) = match self.core.dispatch_due(&mut running, lanes).await {
                // Every slot busy: a finishing attempt wakes the loop.
                Ok(_) if self.core.slots.available_permits() == 0 => {
                    (self.core.settings.idle_poll, None)
                }
                Ok(_) => self.core.idle_for().await,
                Err(err) => {
                    tracing::warn!(error = ?err, "Claiming due deliveries failed");
                    (self.core.settings.idle_poll, None)
                }
            };
            // With every slot (or the recovered lane's whole share) busy a finishing attempt
            // starts a round; otherwise it only brings the wake-up forward to its retry, if
            // that comes sooner (a round then would claim nothing: at low load it was a
            // second round per delivery).
            let slot_bound = self.core.slots.available_permits() == 0
                || self.core.recovery_slots.available_permits() == 0;
            let mut until = tokio::time::Instant::now() + idle;
            lanes = Lanes::NONE;
            loop {
                tokio::select! {
                    () = &mut shutdown => break 'rounds,
                    () = wake.notified() => break,
                    () = resend_wake.notified() => {
                        lanes.resend = true;
                        break;
                    }
                    () = recovered_wake.notified() => {
                        lanes.recovered = true;
                        break;
                    }
                    () = tokio::time::sleep_until(until) => break,
                    Some(ended) = running.join_next(), if !running.is_empty() => {
                        if slot_bound {
                            break;
                        }
                        if let Ok(Some(retry)) = ended {
                            until = until.min(tokio::time::Instant::now() + wait_until(retry));
                        }
                    }
                }
            }
            lanes = lanes.with_due(next.as_ref());
        }
        tracing::info!(
            in_flight = running.len(),
            "Dispatcher stopping; finishing attempts in flight"
        );
        while running.join_next().await.is_some() {}
        listener.abort();
        recover.abort();
        metrics.abort();
        oldest_due.abort();
        depth.abort();
    }
}

impl Core {
    /// Claims as many due attempts as there are free slots and starts them: the schedule of
    /// new deliveries first, then resends, then recovered deliveries with their share.
    async fn dispatch_due(
        self: &Arc<Self>,
        running: &mut JoinSet<Option<OffsetDateTime>>,
        lanes: Lanes,
    ) -> anyhow::Result<usize> {
        let client = self.pool.get().await?;
        let max_attempts = self.max_attempts();
        let lease = self.settings.attempt_timeout * 2 + LEASE_MARGIN;
        let mut made = 0;
        for lane in [Lane::Scheduled, Lane::Resend, Lane::Recovered] {
            if !lanes.asks(lane) {
                continue;
            }
            loop {
                let free = self.free_slots(lane);
                if free == 0 {
                    break;
                }
                let asked = free.min(500);
                let claimed =
                    deliveries::claim_due(&client, lane, asked as i64, lease, max_attempts).await?;
                // Fewer than asked: the lane had no more due (a delivery abandoned in the claim
                // is not returned; its lane is asked again after `idle_for`, at once).
                let drained = claimed.len() < asked;
                for delivery in claimed {
                    let permit = self.slots.clone().acquire_owned().await?;
                    let share = match lane {
                        Lane::Recovered => Some(self.recovery_slots.clone().acquire_owned().await?),
                        Lane::Scheduled | Lane::Resend => None,
                    };
                    let core = self.clone();
                    made += 1;
                    running.spawn(async move {
                        let retry = core.attempt(delivery).await;
                        drop((permit, share));
                        retry
                    });
                }
                if drained {
                    break;
                }
            }
        }
        Ok(made)
    }

    /// How operator notices are sent: on the delivery schedule, with the delivery lease.
    fn notifier(&self) -> health::Notifier<'_> {
        health::Notifier {
            operator: self.settings.operator.as_ref(),
            sender: &self.sender,
            schedule: &self.settings.schedule,
            lease: self.settings.attempt_timeout * 2 + LEASE_MARGIN,
        }
    }

    /// Slots free for attempts of `lane`.
    fn free_slots(&self, lane: Lane) -> usize {
        let free = self.slots.available_permits();
        match lane {
            Lane::Recovered => free.min(self.recovery_slots.available_permits()),
            Lane::Scheduled | Lane::Resend => free,
        }
    }

    /// Applies one batch of the oldest open recover; returns how many deliveries it restarted.
    async fn apply_recoveries(&self) -> anyhow::Result<u64> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let restarted = deliveries::apply_recoveries(&tx, RECOVER_BATCH).await?;
        tx.commit().await?;
        Ok(restarted)
    }

    /// Applies recovers as they are asked for, a batch at a time, waking the loop after each
    /// batch that restarted deliveries.
    async fn apply_recoveries_until_stopped(
        self: Arc<Self>,
        asked: Arc<Notify>,
        restarted: Arc<Notify>,
    ) {
        loop {
            match self.apply_recoveries().await {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(restarted = n, "Recovered deliveries restarted");
                    restarted.notify_one();
                    continue;
                }
                Err(err) => tracing::warn!(error = ?err, "Applying a recover failed"),
            }
            tokio::select! {
                () = asked.notified() => {}
                () = tokio::time::sleep(RECOVER_POLL) => {}
            }
        }
    }

    /// Publishes how long the oldest due delivery has waited (0 when none is overdue), leaving
    /// out recovered ones: it grows when the dispatcher falls behind or stops.
    async fn sample_oldest_due(&self) {
        telemetry::record_pool_use(&self.pool);
        let Ok(client) = self.pool.get().await else {
            return;
        };
        // A recover's backlog drains behind the other deliveries by design: it is left out,
        // so the gauge (and its alert) speaks of new deliveries and resends.
        if let Ok(next) = deliveries::next_due(&client).await {
            let waited = next
                .earliest(false)
                .map_or(0.0, |at| (clock::now() - at).as_seconds_f64().max(0.0));
            metrics::gauge!(telemetry::WEBHOOK_OLDEST_DUE_SECONDS).set(waited);
        }
    }

    /// Publishes the open review items across accounts and how long the oldest pending one
    /// has waited, beside the SLA it is alerted against.
    async fn sample_review(&self) {
        let Ok(client) = self.pool.get().await else {
            return;
        };
        if let Ok((pending, claimed, oldest)) = review_items::totals(&client).await {
            metrics::gauge!(telemetry::REVIEW_ITEMS, "state" => "pending").set(pending as f64);
            metrics::gauge!(telemetry::REVIEW_ITEMS, "state" => "claimed").set(claimed as f64);
            let waited = oldest.map_or(0.0, |at| (clock::now() - at).as_seconds_f64().max(0.0));
            metrics::gauge!(telemetry::REVIEW_OLDEST_PENDING_SECONDS).set(waited);
        }
        metrics::gauge!(telemetry::REVIEW_SLA_SECONDS).set(self.settings.review_sla.as_secs_f64());
    }

    /// How long to sleep: until the next delivery falls due, at most the idle poll; and when
    /// each lane's next attempt falls due (`None` when that could not be read).
    async fn idle_for(&self) -> (Duration, Option<NextDue>) {
        let most = self.settings.idle_poll;
        let Ok(client) = self.pool.get().await else {
            return (most, None);
        };
        let Ok(next) = deliveries::next_due(&client).await else {
            return (most, None);
        };
        // With the recovered lane's share in use, its due rows cannot be claimed: a finishing
        // attempt wakes the loop instead.
        let recovered = self.recovery_slots.available_permits() > 0;
        let idle = next
            .earliest(recovered)
            .map_or(most, |at| wait_until(at).min(most));
        (idle, Some(next))
    }

    /// One attempt: sign, send, record, schedule; or, when its account URL is disabled or
    /// paused, hold the delivery instead. Returns when the delivery is due again, when the
    /// attempt scheduled a retry.
    async fn attempt(&self, delivery: Claimed) -> Option<OffsetDateTime> {
        let secrets = match self.prepare(&delivery).await {
            Ok(Some(secrets)) => secrets,
            Ok(None) => return None,
            Err(err) => {
                // The lease runs out and the attempt is made again later.
                tracing::warn!(delivery_id = %delivery.id, error = ?err, "Cannot load signing secrets");
                return None;
            }
        };
        // The attempt starts when the request does, and its recorded start and duration end
        // where the next delay begins.
        let started_at = clock::now();
        let lateness = (started_at - delivery.scheduled_at)
            .as_seconds_f64()
            .max(0.0);
        metrics::histogram!(telemetry::WEBHOOK_LATENESS_SECONDS).record(lateness);
        let (outcome, duration) = self
            .sender
            .send(
                &delivery.target_url,
                &delivery.id.to_string(),
                &secrets,
                started_at.unix_timestamp(),
                &delivery.body,
            )
            .await;
        // Its end by the same measure its record keeps (start and duration), not by a second
        // reading of the clock: a thread descheduled between the answer and that reading would
        // start the next delay later than the recorded end.
        let ended_at = started_at + duration;
        let attempted = match &outcome {
            Outcome::Acknowledged { .. } => Attempted::Acknowledged,
            Outcome::Refused { status, .. } => Attempted::Failed {
                status_code: Some(i32::from(*status)),
                error: format!("answered {status}"),
            },
            Outcome::Failed { error } => Attempted::Failed {
                status_code: None,
                error: error.clone(),
            },
            Outcome::Undeliverable { reason } => Attempted::Failed {
                status_code: None,
                error: reason.to_string(),
            },
        };
        let (status_code, error, body, next) = match &outcome {
            Outcome::Acknowledged { status, body } => (
                Some(i32::from(*status)),
                None,
                Some(body.as_str()),
                NextStep::Delivered,
            ),
            Outcome::Refused { status, body } => (
                Some(i32::from(*status)),
                None,
                Some(body.as_str()),
                self.retry(&delivery, ended_at),
            ),
            Outcome::Failed { error } => (
                None,
                Some(error.clone()),
                None,
                self.retry(&delivery, ended_at),
            ),
            Outcome::Undeliverable { reason } => (
                None,
                Some(reason.to_string()),
                None,
                match delivery.lane {
                    Lane::Resend => NextStep::Unchanged,
                    Lane::Scheduled | Lane::Recovered => NextStep::Undeliverable,
                },
            ),
        };
        let (label, number) = match (delivery.lane, next) {
            (Lane::Resend, NextStep::Delivered) => {
                ("delivered", telemetry::WEBHOOK_RESEND.to_owned())
            }
            (Lane::Resend, _) => ("failed", telemetry::WEBHOOK_RESEND.to_owned()),
            (Lane::Scheduled | Lane::Recovered, next) => (
                match next {
                    NextStep::Delivered => "delivered",
                    NextStep::RetryAt(_) => "retry",
                    NextStep::Abandoned | NextStep::Unchanged => "abandoned",
                    NextStep::Undeliverable => "undeliverable",
                },
                telemetry::webhook_attempt_label(
                    usize::try_from(delivery.position).unwrap_or(0),
                    self.settings.schedule.attempts(),
                ),
            ),
        };
        metrics::counter!(telemetry::WEBHOOK_ATTEMPTS_TOTAL, "outcome" => label, "attempt" => number)
            .increment(1);
        tracing::info!(
            delivery_id = %delivery.id,
            attempt = delivery.attempt,
            status = ?status_code,
            outcome = label,
            duration_ms = duration.as_millis() as u64,
            "Webhook attempt ended"
        );
        let record = AttemptRecord {
            id: delivery.id,
            attempt: delivery.attempt,
            lane: delivery.lane,
            scheduled_at: delivery.scheduled_at,
            status_code,
            error,
            response_body: body.map(str::to_owned),
            started_at,
            duration,
            next,
        };
        if let Err(err) = self.record(&delivery, record, attempted, ended_at).await {
            tracing::warn!(delivery_id = %delivery.id, error = ?err, "Cannot record an attempt; it will be retried after the lease");
            return None;
        }
        match next {
            NextStep::RetryAt(at) => Some(at),
            NextStep::Delivered
            | NextStep::Abandoned
            | NextStep::Undeliverable
            | NextStep::Unchanged => None,
        }
    }

    /// The attempt limit: the schedule's length.
    fn max_attempts(&self) -> i32 {
        i32::try_from(self.settings.schedule.attempts()).unwrap_or(i32::MAX)
    }

    /// The step after a failed attempt that ended at `ended_at`: the schedule's next
    /// attempt or its end; a resend is never retried.
    fn retry(&self, delivery: &Claimed, ended_at: OffsetDateTime) -> NextStep {
        if delivery.lane == Lane::Resend {
            return NextStep::Unchanged;
        }
        match self
            .settings
            .schedule
            .next_after(delivery.position, ended_at)
        {
            Some(at) => NextStep::RetryAt(at),
            None => NextStep::Abandoned,
        }
    }

    /// The signing secrets of the delivery's account; `None` when the delivery was held
    /// instead (a scheduled one to the account's URL while it is disabled or paused: pings and
    /// resends, asked for by the account, go out whatever the state).
    async fn prepare(&self, delivery: &Claimed) -> anyhow::Result<Option<Vec<String>>> {
        let client = self.pool.get().await?;
        if delivery.to_account_url && !delivery.ping && delivery.lane != Lane::Resend {
            let endpoint = endpoints::get(&client, delivery.account_id).await?;
            if endpoint.is_some_and(|e| e.url == delivery.target_url && e.health.state.holds()) {
                if deliveries::hold_claimed(&client, delivery).await? {
                    tracing::info!(delivery_id = %delivery.id, "Delivery held: its URL is disabled or paused");
                }
                return Ok(None);
            }
        }
        let secrets =
            webhooks::signing_secrets(&client, &self.settings.encryption_key, delivery.account_id)
                .await?;
        Ok(Some(secrets.into_iter().map(|s| s.secret).collect()))
    }

    /// Records the attempt: one to a per-request URL together with the others ending at once;
    /// one to the account's URL with the URL's health after it.
    async fn record(
        &self,
        delivery: &Claimed,
        record: AttemptRecord,
        attempted: Attempted,
        ended_at: OffsetDateTime,
    ) -> anyhow::Result<()> {
        let ours = if delivery.to_account_url {
            self.record_with_health(delivery, &record, attempted, ended_at)
                .await?
        } else {
            self.records.run(record).await?
        };
        if !ours {
            tracing::warn!(delivery_id = %delivery.id, "Another dispatcher took this delivery over");
        }
        Ok(())
    }

    /// Records an attempt to the account's URL and the URL's health after it, in one
    /// transaction (the URL's row is locked first, as every change of health does). Returns
    /// whether the delivery was still this dispatcher's.
    async fn record_with_health(
        &self,
        delivery: &Claimed,
        record: &AttemptRecord,
        attempted: Attempted,
        ended_at: OffsetDateTime,
    ) -> anyhow::Result<bool> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let endpoint = endpoints::lock(&tx, delivery.account_id)
            .await?
            .filter(|e| e.url == delivery.target_url);
        let ours = deliveries::record_attempts(&tx, std::slice::from_ref(record)).await? == [true];
        let mut change = None;
        if let Some(endpoint) = endpoint {
            let mut after = endpoint.health.clone();
            let events = after.after_attempt(ended_at, attempted, &self.settings.health);
            if after != endpoint.health {
                change = endpoints::save(
                    &tx,
                    &endpoint,
                    &after,
                    Actor::Operator,
                    &events,
                    &self.settings.health,
                )
                .await?;
            }
        }
        tx.commit().await?;
        if let Some(change) = change {
            health::count(delivery.account_id, change);
        }
        Ok(ours)
    }
}
