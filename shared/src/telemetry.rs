//! Logging and metrics.
//!
//! Metric names live here as constants, are described once by [`install_metrics`], and carry
//! only labels with small fixed value sets (route patterns, methods, status classes).

use std::{convert::Infallible, net::SocketAddr, sync::OnceLock};

use http_body_util::Full;
use hyper::{body::Bytes, server::conn::http1, service::service_fn, Request, Response};
use hyper_util::rt::TokioIo;
use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tracing_subscriber::{fmt, prelude::*, EnvFilter};

/// HTTP requests answered by the api, by `route` pattern, `method` and `status` class.
pub const HTTP_REQUESTS_TOTAL: &str = "http_requests_total";
/// Latency of HTTP requests answered by the api, by `route` and `method`.
pub const HTTP_REQUEST_DURATION_SECONDS: &str = "http_request_duration_seconds";
/// Set to 1 by every process once it serves; labelled by `process`.
pub const PROCESS_UP: &str = "process_up";
/// Health probes of dependencies, by `dependency` (`postgres`, `redis`) and `outcome`.
pub const DEPENDENCY_CHECKS_TOTAL: &str = "dependency_checks_total";
/// Queue deliveries finished by a worker, by `modality` and `outcome` (`ok`, `error`).
pub const QUEUE_DELIVERIES_TOTAL: &str = "queue_deliveries_total";
/// Queue entries taken over from a lost worker, by `modality`.
pub const QUEUE_TAKEOVERS_TOTAL: &str = "queue_takeovers_total";
/// Failed queue reads (Redis errors a consumer retried), by `modality`.
pub const QUEUE_READ_ERRORS_TOTAL: &str = "queue_read_errors_total";
/// Jobs the relay put on the queue again, by `modality`.
pub const QUEUE_RELAYED_TOTAL: &str = "queue_relayed_total";
/// `processing` jobs whose lease ran out and that the relay rescued, by `modality`.
pub const QUEUE_RESCUED_TOTAL: &str = "queue_rescued_total";
/// Gauge: 1 when the worker loaded a built-in model, 0 when it is missing; label `model`.
pub const CLASSIFIER_MODEL_LOADED: &str = "classifier_model_loaded";
/// Queue depth by `modality` and `state` (`waiting`, `in_flight`, `retrying`, `dead`).
pub const QUEUE_DEPTH: &str = "queue_depth";
/// Jobs a worker took to an end or gave back, by `modality` and `outcome` (`passed`,
/// `prohibited`, `failed`, `requeued`, `exhausted`).
pub const WORKER_JOBS_TOTAL: &str = "worker_jobs_total";
/// From submission to result (completed or failed), by `modality`.
pub const JOB_TURNAROUND_SECONDS: &str = "job_turnaround_seconds";
/// Time to classify one job (fetching included), by `modality` and `provider`.
pub const CLASSIFY_DURATION_SECONDS: &str = "worker_classify_duration_seconds";

/// Webhook attempts by `outcome` (`delivered`, `retry`, `abandoned`, `undeliverable`) and
/// `attempt` number (`1` to the schedule's length, 12 by default; `other` outside it).
pub const WEBHOOK_ATTEMPTS_TOTAL: &str = "webhook_attempts_total";
/// Postgres connections of this process's pool, by `state` (`in_use`, `idle`, and `waiting`
/// for callers queued for one).
pub const DB_POOL_CONNECTIONS: &str = "db_pool_connections";
/// How long the oldest due webhook delivery has waited past its due time (0 when none).
pub const WEBHOOK_OLDEST_DUE_SECONDS: &str = "webhook_oldest_due_seconds";
/// Apalis workers that stopped with an error and were restarted.
pub const WORKER_RESTARTS_TOTAL: &str = "worker_restarts_total";
/// How late attempts start against their schedule.
pub const WEBHOOK_LATENESS_SECONDS: &str = "webhook_lateness_seconds";
/// Requests refused with 429 by the api's limits, by `reason` (`rate`, `lockout`,
/// `concurrency`).
pub const REQUESTS_LIMITED_TOTAL: &str = "requests_limited_total";
/// Requests admitted without rate limiting because Redis did not answer (the limits fail open).
pub const RATE_LIMIT_UNAVAILABLE_TOTAL: &str = "rate_limit_unavailable_total";

/// The filter directive keeping statement parameters out of the log.
const QUIET_STATEMENT_PARAMETERS: &str = "tokio_postgres=info";
/// The filter directive keeping symphonia's (the audio probe's) `log` records out of the log:
/// it warns once per bad frame header it skips, which made 8 MB of crafted MP3 junk two
/// million lines.
const QUIET_AUDIO_DEMUXERS: &str = "symphonia=off";
/// Registry checks answered, by `context` (`signup`, `login`, `periodic`) and `outcome`
/// (`match`, `no_match`).
pub const REGISTRY_CHECKS_TOTAL: &str = "registry_checks_total";

/// Gauge: accounts' webhook URLs by `state` (`active`, `failing`, `disabled`, `paused`).
pub const WEBHOOK_ENDPOINTS: &str = "webhook_endpoints";
/// Changes of accounts' webhook URL states, by the `state` entered.
pub const WEBHOOK_ENDPOINT_TRANSITIONS_TOTAL: &str = "webhook_endpoint_transitions_total";

/// Gauge: open review items across accounts, by `state` (`pending`, `claimed`).
pub const REVIEW_ITEMS: &str = "review_items";
/// Gauge: how long the oldest pending review item has waited (0 when none).
pub const REVIEW_OLDEST_PENDING_SECONDS: &str = "review_oldest_pending_seconds";
/// Gauge: `APP_REVIEW_SLA_S`, how long a review item may wait pending (the alert's bound).
pub const REVIEW_SLA_SECONDS: &str = "review_sla_seconds";
/// Human decisions of review items, by `outcome` (`upheld`, `overturned`).
pub const REVIEW_DECISIONS_TOTAL: &str = "review_decisions_total";

/// Counts a reviewer's decision: `overturned` when it changed the job's outcome.
pub fn count_review_decision(changed: bool) {
    let outcome = if changed { "overturned" } else { "upheld" };
    metrics::counter!(REVIEW_DECISIONS_TOTAL, "outcome" => outcome).increment(1);
}

/// Counts a change of an account's webhook URL state, by the state entered.
pub fn count_endpoint_change(entered: crate::domain::EndpointState) {
    metrics::counter!(WEBHOOK_ENDPOINT_TRANSITIONS_TOTAL, "state" => entered.as_str()).increment(1);
}

/// The `outcome` values of [`WORKER_JOBS_TOTAL`].
pub const JOB_OUTCOMES: [&str; 5] = ["passed", "prohibited", "failed", "requeued", "exhausted"];
/// The `outcome` values of [`WEBHOOK_ATTEMPTS_TOTAL`].
pub const WEBHOOK_OUTCOMES: [&str; 4] = ["delivered", "retry", "abandoned", "undeliverable"];
/// The `attempt` label of [`WEBHOOK_ATTEMPTS_TOTAL`] for a resend, outside the schedule.
pub const WEBHOOK_RESEND: &str = "resend";
/// The `outcome` values of [`WEBHOOK_ATTEMPTS_TOTAL`] for a resend (which never retries).
pub const WEBHOOK_RESEND_OUTCOMES: [&str; 2] = ["delivered", "failed"];
/// The `reason` values of [`REQUESTS_LIMITED_TOTAL`].
pub const LIMIT_REASONS: [&str; 3] = ["rate", "lockout", "concurrency"];

/// Creates the api's counters at zero, so rates and alerts have a series before the first
/// event.
pub fn zero_api_counters() {
    for reason in LIMIT_REASONS {
        metrics::counter!(REQUESTS_LIMITED_TOTAL, "reason" => reason).increment(0);
    }
    metrics::counter!(RATE_LIMIT_UNAVAILABLE_TOTAL).increment(0);
    zero_review_counters();
    for context in ["signup", "login", "periodic"] {
        for outcome in ["match", "no_match"] {
            metrics::counter!(REGISTRY_CHECKS_TOTAL, "context" => context, "outcome" => outcome)
                .increment(0);
        }
    }
}

/// Creates the review decision counters at zero (the api and the dashboard decide).
pub fn zero_review_counters() {
    for outcome in ["upheld", "overturned"] {
        metrics::counter!(REVIEW_DECISIONS_TOTAL, "outcome" => outcome).increment(0);
    }
}

/// Creates a worker's counters for `modalities` at zero.
pub fn zero_worker_counters(modalities: &[crate::domain::Modality]) {
    for modality in modalities.iter().map(|m| m.as_str()) {
        for outcome in JOB_OUTCOMES {
            metrics::counter!(WORKER_JOBS_TOTAL, "modality" => modality, "outcome" => outcome)
                .increment(0);
        }
        for outcome in ["ok", "error"] {
            metrics::counter!(QUEUE_DELIVERIES_TOTAL, "modality" => modality, "outcome" => outcome)
                .increment(0);
        }
        metrics::counter!(QUEUE_TAKEOVERS_TOTAL, "modality" => modality).increment(0);
        metrics::counter!(QUEUE_READ_ERRORS_TOTAL, "modality" => modality).increment(0);
        metrics::counter!(QUEUE_RELAYED_TOTAL, "modality" => modality).increment(0);
        metrics::counter!(QUEUE_RESCUED_TOTAL, "modality" => modality).increment(0);
    }
    metrics::counter!(WORKER_RESTARTS_TOTAL).increment(0);
}

/// Creates the dispatcher's counters at zero, for attempts 1 to `attempts` (the schedule's
/// length).
pub fn zero_dispatcher_counters(attempts: usize) {
    for outcome in WEBHOOK_OUTCOMES {
        for attempt in 1..=attempts {
            metrics::counter!(
                WEBHOOK_ATTEMPTS_TOTAL,
                "outcome" => outcome,
                "attempt" => webhook_attempt_label(attempt, attempts),
            )
            .increment(0);
        }
    }
    for outcome in WEBHOOK_RESEND_OUTCOMES {
        metrics::counter!(WEBHOOK_ATTEMPTS_TOTAL, "outcome" => outcome, "attempt" => WEBHOOK_RESEND)
            .increment(0);
    }
}

/// Publishes every state of [`WEBHOOK_ENDPOINT_TRANSITIONS_TOTAL`] at zero.
pub fn zero_endpoint_counters() {
    for state in crate::domain::EndpointState::ALL {
        metrics::counter!(WEBHOOK_ENDPOINT_TRANSITIONS_TOTAL, "state" => state.as_str())
            .increment(0);
    }
}

/// The `attempt` label of [`WEBHOOK_ATTEMPTS_TOTAL`] for attempt number `attempt` of
/// `attempts`: the number, or `other` outside 1 to `attempts` (which keeps the set fixed).
pub fn webhook_attempt_label(attempt: usize, attempts: usize) -> String {
    if (1..=attempts).contains(&attempt) {
        attempt.to_string()
    } else {
        "other".to_owned()
    }
}

const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Starts structured logging for `service`. `RUST_LOG` filters (default `info`);
/// `APP_LOG_FORMAT=json` switches to JSON lines. Calling it twice is harmless.
///
/// `tokio_postgres` is held at `info` whatever `RUST_LOG` says: at `debug` it logs every
/// statement's parameters, which carry account ids, registry identifiers and case references.
/// The `symphonia` crates are silenced, so one uploaded file cannot flood the log; a
/// `RUST_LOG` directive naming one of them by its full name (`symphonia_bundle_mp3=warn`)
/// still turns it on for debugging.
pub fn init_tracing(service: &'static str) {
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    for directive in [QUIET_STATEMENT_PARAMETERS, QUIET_AUDIO_DEMUXERS] {
        if let Ok(quiet) = directive.parse() {
            filter = filter.add_directive(quiet);
        }
    }
    let json = std::env::var("APP_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    let registry = tracing_subscriber::registry().with(filter);
    let result = if json {
        registry
            .with(fmt::layer().json().flatten_event(true))
            .try_init()
    } else {
        registry.with(fmt::layer().compact()).try_init()
    };
    if result.is_ok() {
        tracing::debug!(service, "Logging started");
    }
}

/// Publishes the pool's use ([`DB_POOL_CONNECTIONS`]).
pub fn record_pool_use(pool: &deadpool_postgres::Pool) {
    let status = pool.status();
    let in_use = status.size.saturating_sub(status.available);
    for (state, value) in [
        ("in_use", in_use),
        ("idle", status.available),
        ("waiting", status.waiting),
    ] {
        metrics::gauge!(DB_POOL_CONNECTIONS, "state" => state).set(value as f64);
    }
}

/// Installs the process-wide Prometheus recorder (once) and describes every metric.
pub fn install_metrics() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .map(|b| b.build_recorder())
                .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
            let handle = recorder.handle();
            // A recorder may already be installed when tests link several services in one
            // process; the handle still renders what this one records.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            spawn_upkeep(handle.clone());
            handle
        })
        .clone()
}

/// How often histogram samples are folded into their buckets.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Folds recorded histogram samples into their buckets every [`UPKEEP_EVERY`], on a thread of
/// its own. The recorder keeps every sample until this runs (a scrape runs it too): without it,
/// a process nobody scrapes grows by every request's and job's timings (the soak showed it).
fn spawn_upkeep(handle: PrometheusHandle) {
    let spawned = std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || loop {
            std::thread::park_timeout(UPKEEP_EVERY);
            handle.run_upkeep();
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "could not start the metrics upkeep thread");
    }
}

fn describe() {
    describe_counter!(
        HTTP_REQUESTS_TOTAL,
        Unit::Count,
        "HTTP requests answered, by route, method and status class."
    );
    describe_histogram!(
        HTTP_REQUEST_DURATION_SECONDS,
        Unit::Seconds,
        "Time to answer an HTTP request, by route and method."
    );
    describe_gauge!(PROCESS_UP, "1 while the process serves, by process role.");
    describe_counter!(
        REGISTRY_CHECKS_TOTAL,
        Unit::Count,
        "Registry checks answered, by context and outcome."
    );
    describe_counter!(
        DEPENDENCY_CHECKS_TOTAL,
        Unit::Count,
        "Health probes of Postgres and Redis, by dependency and outcome."
    );
    describe_counter!(
        QUEUE_DELIVERIES_TOTAL,
        Unit::Count,
        "Queue deliveries finished by a worker, by modality and outcome."
    );
    describe_counter!(
        QUEUE_TAKEOVERS_TOTAL,
        Unit::Count,
        "Queue entries taken over from a lost worker, by modality."
    );
    describe_counter!(
        QUEUE_READ_ERRORS_TOTAL,
        Unit::Count,
        "Failed queue reads that the consumer retried, by modality."
    );
    describe_counter!(
        QUEUE_RELAYED_TOTAL,
        Unit::Count,
        "Jobs the relay put on the queue again, by modality."
    );
    describe_counter!(
        QUEUE_RESCUED_TOTAL,
        Unit::Count,
        "Processing jobs whose lease ran out, put back on the queue or failed, by modality."
    );
    describe_gauge!(QUEUE_DEPTH, "Queue entries by modality and state.");
    describe_gauge!(
        WEBHOOK_ENDPOINTS,
        "Accounts' webhook URLs by state (active, failing, disabled, paused)."
    );
    describe_counter!(
        WEBHOOK_ENDPOINT_TRANSITIONS_TOTAL,
        Unit::Count,
        "Changes of accounts' webhook URL states, by the state entered."
    );
    describe_gauge!(
        REVIEW_ITEMS,
        "Open review items across accounts, by state (pending, claimed)."
    );
    describe_gauge!(
        REVIEW_OLDEST_PENDING_SECONDS,
        Unit::Seconds,
        "How long the oldest pending review item has waited."
    );
    describe_gauge!(
        REVIEW_SLA_SECONDS,
        Unit::Seconds,
        "How long a review item may wait pending (APP_REVIEW_SLA_S)."
    );
    describe_counter!(
        REVIEW_DECISIONS_TOTAL,
        Unit::Count,
        "Human decisions of review items, by outcome (upheld, overturned)."
    );
    describe_gauge!(
        CLASSIFIER_MODEL_LOADED,
        "1 when the worker loaded the built-in model, 0 when it is missing, by model."
    );
    describe_gauge!(
        DB_POOL_CONNECTIONS,
        "Postgres pool connections in use and idle, and callers waiting for one."
    );
    describe_gauge!(
        WEBHOOK_OLDEST_DUE_SECONDS,
        Unit::Seconds,
        "How long the oldest due webhook delivery has waited past its due time."
    );
    describe_counter!(
        WORKER_RESTARTS_TOTAL,
        Unit::Count,
        "Queue workers that stopped with an error and were restarted."
    );
    describe_counter!(
        WORKER_JOBS_TOTAL,
        Unit::Count,
        "Jobs a worker finished or gave back, by modality and outcome."
    );
    describe_histogram!(
        JOB_TURNAROUND_SECONDS,
        Unit::Seconds,
        "Time from submission to result, by modality."
    );
    describe_histogram!(
        CLASSIFY_DURATION_SECONDS,
        Unit::Seconds,
        "Time to classify one job, fetching included, by modality and provider."
    );
    describe_counter!(
        WEBHOOK_ATTEMPTS_TOTAL,
        Unit::Count,
        "Webhook attempts by outcome."
    );
    describe_histogram!(
        WEBHOOK_LATENESS_SECONDS,
        Unit::Seconds,
        "How late webhook attempts start against their schedule."
    );
    describe_counter!(
        REQUESTS_LIMITED_TOTAL,
        Unit::Count,
        "Requests refused with 429, by reason (rate, lockout, concurrency)."
    );
    describe_counter!(
        RATE_LIMIT_UNAVAILABLE_TOTAL,
        Unit::Count,
        "Requests admitted unlimited because Redis did not answer."
    );
}

/// Serves `GET /metrics` in Prometheus text on `listener` until the future is dropped.
/// Used by the worker and the dispatcher; the api serves it on its own port.
pub async fn serve_metrics(listener: TcpListener, handle: PrometheusHandle) {
    loop {
        let (stream, _peer): (_, SocketAddr) = match listener.accept().await {
            Ok(conn) => conn,
            Err(err) => {
                tracing::warn!(error = %err, "Metrics listener failed to accept");
                continue;
            }
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let handle = handle.clone();
                async move { Ok::<_, Infallible>(metrics_response(&req, &handle)) }
            });
            if let Err(err) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %err, "Metrics connection ended with an error");
            }
        });
    }
}

fn metrics_response<B>(req: &Request<B>, handle: &PrometheusHandle) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (req.method().as_str(), req.uri().path()) {
        ("GET", "/metrics") => (200, "text/plain; version=0.0.4", handle.render()),
        (_, "/metrics") => (405, "text/plain", "method not allowed\n".to_owned()),
        _ => (404, "text/plain", "not found\n".to_owned()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
    if let Ok(value) = content_type.parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_labels_are_the_numbers_of_the_schedule_and_other_outside_it() {
        assert_eq!(webhook_attempt_label(1, 12), "1");
        assert_eq!(webhook_attempt_label(12, 12), "12");
        assert_eq!(webhook_attempt_label(13, 12), "other");
        assert_eq!(webhook_attempt_label(0, 12), "other");
    }
}
