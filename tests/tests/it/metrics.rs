//! Every process serves Prometheus text at `GET /metrics`.

use moderation_dispatcher::Dispatcher;
use moderation_tests::{receiver::TestReceiver, spawn_app, worker::worker_settings};
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

async fn scrape(port: u16, path: &str) -> (u16, String, String) {
    let response = reqwest::get(format!("http://127.0.0.1:{port}{path}"))
        .await
        .unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, content_type, response.text().await.unwrap())
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
        let (status, content_type, text) = scrape(port, "/metrics").await;
        assert_eq!(status, 200);
        assert!(content_type.starts_with("text/plain"), "{content_type}");
        assert!(text.contains("# TYPE process_up gauge"), "{text}");
        assert_eq!(scrape(port, "/other").await.0, 404);
    }
    let (_, _, api_text) = scrape(app.port, "/metrics").await;
    for (process, port) in [
        ("api", app.port),
        ("worker", ports[0]),
        ("dispatcher", ports[1]),
    ] {
        promtool_accepts(process, &scrape(port, "/metrics").await.2);
    }
    assert!(
        api_text.contains("db_pool_connections{state=\"in_use\"}"),
        "{api_text}"
    );
    let (_, _, worker_text) = scrape(ports[0], "/metrics").await;
    for line in [
        "worker_jobs_total{modality=\"text\",outcome=\"passed\"}",
        "# TYPE job_turnaround_seconds histogram",
        "worker_classify_duration_seconds_bucket{modality=\"text\",provider=\"local\",le=",
        "# TYPE webhook_oldest_due_seconds gauge",
    ] {
        assert!(worker_text.contains(line), "{line} in {worker_text}");
    }

    let _ = stop_worker.send(());
    let _ = stop_dispatcher.send(());
    worker.await.unwrap();
    dispatcher.await.unwrap();
}
