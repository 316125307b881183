//! Every process serves Prometheus text at `GET /metrics`.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use moderation_dispatcher::Dispatcher;
use moderation_tests::{
    get_plain, receiver::TestReceiver, spawn_app, unused_port, worker::worker_settings, TestApp,
};
use moderation_worker::Worker;

/// Runs `promtool check metrics` (its path in `PROMTOOL`, which scripts/test sets) on `text`.
fn promtool_accepts(process: &str, text: &str) {
    use std::io::Write;
    let promtool = std::env::var("PROMTOOL")
        .expect("PROMTOOL names promtool (scripts/test unpacks it; or set it yourself)");
    let mut child = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool rejects the {process} exposition: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn the_worker_and_the_dispatcher_serve_prometheus_text_on_their_metrics_port() {
    let app = spawn_app().await;
    let receiver = TestReceiver::start().await;
    let mut settings = worker_settings(&app);
    settings.metrics_addr = ([127, 0, 0, 1], 0).into();
    let worker = Worker::build(settings).await.unwrap();
    let dispatcher = Dispatcher::build(app.dispatcher_settings(&receiver, 1.0))
        .await
        .unwrap();
    let ports = [worker.metrics_port(), dispatcher.metrics_port()];
    let (stop_worker, worker_stopped) = tokio::sync::oneshot::channel::<()>();
    let (stop_dispatcher, dispatcher_stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(worker.run_until_stopped(async {
        let _ = worker_stopped.await;
    }));
    let dispatcher = tokio::spawn(dispatcher.run_until_stopped(async {
        let _ = dispatcher_stopped.await;
    }));

    let key = app.account_with_key(None).await;
    let job = app.submit_prompt(&key, "a sentence to classify").await;
    app.finished_job(&key, job).await;

    for port in ports {
        let (status, content_type, text) = get_plain(port, "/metrics").await;
        assert_eq!(status, 200);
        assert!(content_type.starts_with("text/plain"), "{content_type}");
        assert!(text.contains("# TYPE process_up gauge"), "{text}");
        assert_eq!(get_plain(port, "/other").await.0, 404);
    }
    let _ = stop_worker.send(());
    let _ = stop_dispatcher.send(());
    worker.await.unwrap();
    dispatcher.await.unwrap();
}

/// Metric families of a Prometheus text exposition: name → the label names of each of its
/// samples (a histogram's `_bucket`, `_sum` and `_count` fold into it, `le` left out).
fn families(text: &str) -> BTreeMap<String, BTreeSet<Vec<String>>> {
    let mut histograms = BTreeSet::new();
    let mut out: BTreeMap<String, BTreeSet<Vec<String>>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            if let (Some(name), Some("histogram")) = (parts.next(), parts.next()) {
                histograms.insert(name.to_owned());
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let end = line.find(['{', ' ']).expect("a sample line has a value");
        let mut name = &line[..end];
        for suffix in ["_bucket", "_sum", "_count"] {
            if let Some(base) = name.strip_suffix(suffix) {
                if histograms.contains(base) {
                    name = base;
                }
            }
        }
        let labels = if line[end..].starts_with('{') {
            label_names(&line[end + 1..])
        } else {
            Vec::new()
        };
        out.entry(name.to_owned()).or_default().insert(labels);
    }
    out
}

/// The label names of `rest` (what follows a sample's `{`), sorted, `le` left out. Values are
/// quoted and may hold braces, commas and escaped quotes.
fn label_names(rest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut chars = rest.chars();
    let mut name = String::new();
    while let Some(c) = chars.next() {
        match c {
            '}' => break,
            ',' | ' ' => {}
            '=' => {
                assert_eq!(chars.next(), Some('"'), "a label value is quoted: {rest}");
                let mut escaped = false;
                for v in chars.by_ref() {
                    match (escaped, v) {
                        (false, '\\') => escaped = true,
                        (false, '"') => break,
                        _ => escaped = false,
                    }
                }
                if name != "le" {
                    names.push(std::mem::take(&mut name));
                }
                name.clear();
            }
            other => name.push(other),
        }
    }
    names.sort();
    names
}

/// What each process must expose: every family with exactly these label names.
const API_FAMILIES: &[(&str, &[&str])] = &[
    ("process_up", &["process"]),
    ("http_requests_total", &["method", "route", "status"]),
    ("http_request_duration_seconds", &["method", "route"]),
    ("dependency_checks_total", &["dependency", "outcome"]),
    ("db_pool_connections", &["state"]),
    ("requests_limited_total", &["reason"]),
    ("rate_limit_unavailable_total", &[]),
    ("registry_checks_total", &["context", "outcome"]),
    ("review_decisions_total", &["outcome"]),
    ("webhook_endpoint_transitions_total", &["state"]),
];
const WORKER_FAMILIES: &[(&str, &[&str])] = &[
    ("process_up", &["process"]),
    ("worker_jobs_total", &["modality", "outcome"]),
    (
        "worker_classify_duration_seconds",
        &["modality", "provider"],
    ),
    ("job_turnaround_seconds", &["modality"]),
    ("queue_deliveries_total", &["modality", "outcome"]),
    ("queue_takeovers_total", &["modality"]),
    ("queue_read_errors_total", &["modality"]),
    ("queue_relayed_total", &["modality"]),
    ("queue_rescued_total", &["modality"]),
    ("worker_restarts_total", &[]),
    ("classifier_model_loaded", &["model"]),
    ("dependency_checks_total", &["dependency", "outcome"]),
    ("db_pool_connections", &["state"]),
];
const DISPATCHER_FAMILIES: &[(&str, &[&str])] = &[
    ("process_up", &["process"]),
    ("webhook_attempts_total", &["attempt", "outcome"]),
    ("webhook_lateness_seconds", &[]),
    ("webhook_oldest_due_seconds", &[]),
    ("queue_depth", &["modality", "state"]),
    ("db_pool_connections", &["state"]),
    ("review_items", &["state"]),
    ("review_oldest_pending_seconds", &[]),
    ("review_sla_seconds", &[]),
    ("webhook_endpoints", &["state"]),
    ("webhook_endpoint_transitions_total", &["state"]),
];
const DASHBOARD_FAMILIES: &[(&str, &[&str])] = &[
    ("process_up", &["process"]),
    ("db_pool_connections", &["state"]),
    ("review_decisions_total", &["outcome"]),
    ("webhook_endpoint_transitions_total", &["state"]),
];

/// Checks that `text` holds exactly the families of `expected`, each with exactly its labels.
fn assert_families(process: &str, text: &str, expected: &[(&str, &[&str])]) {
    let found = families(text);
    let want: BTreeMap<String, BTreeSet<Vec<String>>> = expected
        .iter()
        .map(|(name, labels)| {
            let labels = labels.iter().map(|l| (*l).to_owned()).collect();
            ((*name).to_owned(), BTreeSet::from([labels]))
        })
        .collect();
    assert_eq!(found, want, "the {process} exposition:\n{text}");
}

/// Polls `port`'s exposition until `ready` holds for it (90 s at most: the worker first loads
/// every built-in model installed (the whole test took 27 s alone on a quiet 2-core machine),
/// and the job it waits for
/// crosses the whole fleet, which a loaded machine slows).
async fn exposition_when(port: u16, ready: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let text = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
            .await
            .and_then(|r| r.error_for_status());
        if let Ok(response) = text {
            let text = response.text().await.unwrap_or_default();
            if ready(&text) {
                return text;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "port {port} never became ready:\n{text}"
            );
        } else {
            assert!(
                std::time::Instant::now() < deadline,
                "port {port} never answered /metrics"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A child process killed when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run(name: &str, app: &TestApp, env: &[(&str, String)]) -> Child {
    let child = std::process::Command::new(moderation_tests::binary(name))
        .env("DATABASE_URL", app.db.settings.url.expose())
        .env("REDIS_URL", app.redis.url.expose())
        .env("APP_REDIS_NAMESPACE", &app.redis.namespace)
        .env("APP_ENCRYPTION_KEY", app.encryption_key.to_base64())
        .env("APP_ALLOW_PRIVATE_URLS", "true")
        .env("RUST_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start a fleet binary");
    Child(child)
}

#[tokio::test]
async fn each_process_exposes_exactly_its_metric_families_with_fixed_label_names() {
    let app = spawn_app().await;
    let receiver = TestReceiver::start().await;
    let ca = receiver.ca_file();
    let ca_path = ca.path().display().to_string();
    let (api_port, worker_port, dispatcher_port, dashboard_port) =
        (unused_port(), unused_port(), unused_port(), unused_port());
    let _api = run(
        "api",
        &app,
        &[
            ("PORT", api_port.to_string()),
            ("APP_REGISTRY_KEY", "A".repeat(43) + "="),
        ],
    );
    let _worker = run("worker", &app, &[("METRICS_PORT", worker_port.to_string())]);
    let _dashboard = run(
        "dashboard",
        &app,
        &[
            ("DASHBOARD_PORT", dashboard_port.to_string()),
            ("APP_REGISTRY_KEY", "A".repeat(43) + "="),
        ],
    );
    let _dispatcher = run(
        "dispatcher",
        &app,
        &[
            ("METRICS_PORT", dispatcher_port.to_string()),
            ("APP_EXTRA_CA_FILE", ca_path),
            ("APP_QUEUE_SAMPLE_MS", "50".to_owned()),
        ],
    );
    let key = app.account_with_key(None).await;
    let base = format!("http://127.0.0.1:{api_port}");
    exposition_when(api_port, |text| text.contains("process_up")).await;
    let client = reqwest::Client::new();
    let form = reqwest::multipart::Form::new()
        .text("text", "a sentence to classify")
        .text("webhook_url", receiver.url("/hook"));
    let submitted = client
        .post(format!("{base}/api/v1/moderate/prompt"))
        .bearer_auth(&key.key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(submitted.status(), 202);
    assert_eq!(
        client
            .get(format!("{base}/health"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );

    let api = exposition_when(api_port, |text| text.contains("dependency_checks_total")).await;
    let worker = exposition_when(worker_port, |text| {
        text.contains("worker_jobs_total{modality=\"text\",outcome=\"passed\"} 1")
            && text.contains("dependency_checks_total")
    })
    .await;
    let dispatcher = exposition_when(dispatcher_port, |text| {
        text.contains("webhook_attempts_total{outcome=\"delivered\",attempt=\"1\"} 1")
            && text.contains("queue_depth{modality=\"audio\",state=\"dead\"}")
    })
    .await;
    let dashboard = exposition_when(dashboard_port, |text| {
        text.contains("review_decisions_total{outcome=\"overturned\"} 0")
    })
    .await;

    assert_families("api", &api, API_FAMILIES);
    assert_families("dashboard", &dashboard, DASHBOARD_FAMILIES);
    assert_families("worker", &worker, WORKER_FAMILIES);
    assert_families("dispatcher", &dispatcher, DISPATCHER_FAMILIES);
    for modality in ["text", "image", "video", "audio"] {
        for state in ["waiting", "in_flight", "retrying", "dead"] {
            let series = format!("queue_depth{{modality=\"{modality}\",state=\"{state}\"}}");
            assert!(dispatcher.contains(&series), "{series} in {dispatcher}");
        }
    }
    for (process, text) in [
        ("api", &api),
        ("worker", &worker),
        ("dispatcher", &dispatcher),
        ("dashboard", &dashboard),
    ] {
        promtool_accepts(process, text);
    }
}
