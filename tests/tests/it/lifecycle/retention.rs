//! Rows past `APP_RETENTION_DAYS` are never returned, even while their partition holds younger
//! rows; the settings are checked at start.

use moderation_shared::lifecycle::Retention;
use moderation_tests::{fixtures::JobRow, spawn_app_with, TestApp, TestKey};
use serde_json::Value;
use time::{format_description::well_known::Rfc3339, Duration, OffsetDateTime};
use uuid::Uuid;

/// A completed job of `key`'s account made at `at`, with a delivered webhook made with it.
async fn job_with_delivery(app: &TestApp, key: &TestKey, at: OffsetDateTime) -> (Uuid, Uuid) {
    let job = JobRow::new(key.account, "text", "retained?", at).completed(at, false, None);
    job.insert(&app.db.pool).await;
    let client = app.db.pool.get().await.unwrap();
    let delivery: Uuid = client
        .query_one(
            "INSERT INTO deliveries (id, job_id, account_id, target_url, body, state, attempts, \
                                     schedule_attempts, created_at, finished_at) \
             VALUES (uuid_v7($3), $1, $2, 'https://hooks.example.com/x', '\\x7b7d', \
                     'delivered', 1, 1, $3, $3) RETURNING id",
            &[&job.id, &key.account.0, &at],
        )
        .await
        .unwrap()
        .get(0);
    (job.id, delivery)
}

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap()
}

#[tokio::test]
async fn a_job_past_retention_is_never_returned_while_its_partition_still_holds_younger_ones() {
    let app = spawn_app_with(|s| s.retention = Retention::new(31, 31).unwrap()).await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    let now = moderation_shared::clock::now();
    let kept_since = now - Duration::days(31);
    // Either side of the oldest kept instant: a second over, and a minute inside.
    let (old, old_delivery) =
        job_with_delivery(&app, &key, kept_since - Duration::seconds(1)).await;
    let (young, young_delivery) =
        job_with_delivery(&app, &key, kept_since + Duration::minutes(1)).await;

    let status = |path: String| {
        let app = &app;
        let key = &key;
        async move { app.get(&path, key).await.status().as_u16() }
    };
    assert_eq!(status(format!("/api/v1/job/{old}")).await, 404);
    assert_eq!(status(format!("/api/v1/job/{young}")).await, 200);
    assert_eq!(
        status(format!("/api/v1/deliveries/{old_delivery}")).await,
        404
    );
    assert_eq!(
        status(format!("/api/v1/deliveries/{young_delivery}")).await,
        200
    );

    let listed: Value = app
        .get("/api/v1/jobs?status=completed", &key)
        .await
        .json()
        .await
        .unwrap();
    let listed: Vec<&str> = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [young.to_string()]);

    let log: Value = app
        .get("/api/v1/deliveries", &key)
        .await
        .json()
        .await
        .unwrap();
    let logged: Vec<&str> = log["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["delivery_id"].as_str().unwrap())
        .collect();
    assert_eq!(logged, [young_delivery.to_string()]);

    let from = rfc3339(now - Duration::days(40));
    let to = rfc3339(now);
    let export = app
        .get(&format!("/api/v1/jobs/export?from={from}&to={to}"), &key)
        .await;
    assert_eq!(export.status(), 200);
    let since = export.headers()["x-retained-since"]
        .to_str()
        .unwrap()
        .to_owned();
    let since = OffsetDateTime::parse(&since, &Rfc3339).unwrap();
    assert!(
        (since - kept_since).abs() < Duration::seconds(30),
        "{since}"
    );
    let csv = export.text().await.unwrap();
    assert!(csv.contains(&young.to_string()), "{csv}");
    assert!(!csv.contains(&old.to_string()), "{csv}");

    // A window inside retention says nothing of it.
    let inside = app
        .get(
            &format!(
                "/api/v1/jobs/export?from={}&to={to}",
                rfc3339(now - Duration::days(30))
            ),
            &key,
        )
        .await;
    assert!(inside.headers().get("x-retained-since").is_none());
}

#[tokio::test]
async fn retention_settings_out_of_range_stop_the_start_naming_the_variable() {
    let app = spawn_app_with(|_| {}).await;

    let short = app
        .refused_start("api", &[], &[("APP_RETENTION_DAYS", "30")])
        .await;
    assert!(
        short.contains("APP_RETENTION_DAYS") && short.contains("31"),
        "{short}"
    );
    let over = app
        .refused_start(
            "worker",
            &["--modality", "text"],
            &[
                ("APP_RETENTION_DAYS", "31"),
                ("APP_CONTENT_RETENTION_DAYS", "32"),
            ],
        )
        .await;
    assert!(over.contains("APP_CONTENT_RETENTION_DAYS"), "{over}");
    let zero = app
        .refused_start("dashboard", &[], &[("APP_CONTENT_RETENTION_DAYS", "0")])
        .await;
    assert!(zero.contains("APP_CONTENT_RETENTION_DAYS"), "{zero}");
    let word = app
        .refused_start("api", &[], &[("APP_RETENTION_DAYS", "a year")])
        .await;
    assert!(word.contains("APP_RETENTION_DAYS"), "{word}");
}
