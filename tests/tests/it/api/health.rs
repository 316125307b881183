use std::time::{Duration, Instant};

use moderation_shared::config::RedisSettings;
use moderation_tests::{eventually, spawn_app, spawn_app_with};
use serde_json::{json, Value};

async fn health(app: &moderation_tests::TestApp) -> (u16, Value, Duration) {
    let started = Instant::now();
    let response = app.client.get(app.url("/health")).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap(), started.elapsed())
}

#[tokio::test]
async fn health_is_ok_when_postgres_and_redis_answer() {
    let app = spawn_app().await;

    let (status, body, _) = health(&app).await;

    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"status": "ok", "checks": {"postgres": "ok", "redis": "ok"}})
    );
}

#[tokio::test]
async fn health_is_degraded_when_redis_refuses_connections() {
    // Bind a port and close it again, so nothing listens there.
    let app = spawn_app_with(|s| s.redis = moderation_tests::unreachable_redis()).await;

    let (status, body, elapsed) = health(&app).await;

    assert_eq!(status, 503);
    assert_eq!(
        body,
        json!({"status": "degraded", "checks": {"postgres": "ok", "redis": "error"}})
    );
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
}

/// An app whose Redis is a listener that accepts connections and never says anything; abort
/// the returned task to close them.
async fn app_with_blackholed_redis() -> (moderation_tests::TestApp, tokio::task::JoinHandle<()>) {
    let blackhole = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = blackhole.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = blackhole.accept().await {
            held.push(conn);
        }
    });
    let app = spawn_app_with(|s| {
        s.redis = RedisSettings::new(format!("redis://127.0.0.1:{port}"), "unused");
    })
    .await;
    (app, held)
}

#[tokio::test]
async fn health_answers_within_two_seconds_when_redis_never_replies() {
    let (app, held) = app_with_blackholed_redis().await;

    let (status, body, elapsed) = health(&app).await;

    assert_eq!(status, 503);
    assert_eq!(body["checks"]["redis"], "error");
    assert_eq!(body["checks"]["postgres"], "ok");
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
    held.abort();
}

#[tokio::test]
async fn thirty_concurrent_requests_all_answer_within_two_seconds_when_redis_never_replies() {
    let (app, held) = app_with_blackholed_redis().await;
    let key = app.account_with_key(None).await;

    let started = Instant::now();
    let answers = futures_util::future::join_all((0..30).map(|_| async {
        let response = app.get("/api/v1/me", &key).await;
        (response.status().as_u16(), started.elapsed())
    }))
    .await;

    // Rate limits fail open: every request is served, none waits for another's connect.
    assert!(
        answers.iter().all(|(status, _)| *status == 200),
        "{answers:?}"
    );
    let slowest = answers.iter().map(|(_, took)| *took).max().unwrap();
    assert!(slowest < Duration::from_secs(2), "slowest took {slowest:?}");
    held.abort();
}

#[tokio::test]
async fn health_turns_degraded_when_a_real_redis_stops_and_recovers_when_it_returns() {
    // A Redis server of this test's own, so stopping it disturbs no other test.
    let port = moderation_tests::unused_port();
    let start_redis = || {
        std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server is installed (scripts/test installs it)")
    };
    let mut redis = start_redis();
    let app = spawn_app_with(|s| {
        s.redis = RedisSettings::new(format!("redis://127.0.0.1:{port}"), "own");
    })
    .await;
    eventually(Duration::from_secs(10), "health ok", || async {
        (health(&app).await.0 == 200).then_some(())
    })
    .await;

    redis.kill().unwrap();
    redis.wait().unwrap();
    let (status, body, elapsed) = health(&app).await;
    assert_eq!(status, 503);
    assert_eq!(body["checks"]["redis"], "error");
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");

    let mut redis = start_redis();
    eventually(Duration::from_secs(10), "health ok again", || async {
        (health(&app).await.0 == 200).then_some(())
    })
    .await;
    redis.kill().unwrap();
    redis.wait().unwrap();
}

#[tokio::test]
async fn metrics_expose_request_counts_and_latency_in_prometheus_text() {
    let app = spawn_app().await;
    app.client.get(app.url("/health")).send().await.unwrap();

    let response = app.client.get(app.url("/metrics")).send().await.unwrap();

    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = response.text().await.unwrap();
    assert!(
        text.lines().any(|l| l.starts_with("http_requests_total{")
            && l.contains("route=\"/health\"")
            && l.contains("status=\"2xx\"")),
        "{text}"
    );
    assert!(
        text.contains("# TYPE http_request_duration_seconds histogram"),
        "{text}"
    );
    assert!(
        text.contains("http_request_duration_seconds_bucket{"),
        "{text}"
    );
}

#[tokio::test]
async fn a_request_id_is_echoed_or_generated() {
    let app = spawn_app().await;

    let echoed = app
        .client
        .get(app.url("/health"))
        .header("x-request-id", "abc-123")
        .send()
        .await
        .unwrap();
    let generated = app.client.get(app.url("/health")).send().await.unwrap();
    let rejected = app
        .client
        .get(app.url("/health"))
        .header("x-request-id", "has spaces and \"quotes\"")
        .send()
        .await
        .unwrap();

    assert_eq!(echoed.headers()["x-request-id"], "abc-123");
    let id = generated.headers()["x-request-id"].to_str().unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
    let replaced = rejected.headers()["x-request-id"].to_str().unwrap();
    assert!(uuid::Uuid::parse_str(replaced).is_ok(), "{replaced}");
}
