use std::time::Duration as StdDuration;

use moderation_shared::domain::Scope;
use moderation_tests::{assert_error, eventually, fixtures::JobRow, spawn_app, TestApp, TestKey};
use serde_json::Value;
use time::{format_description::well_known::Rfc3339, Duration, OffsetDateTime};

async fn volume(app: &TestApp, key: &TestKey, query: &str) -> reqwest::Response {
    app.get(&format!("/api/v1/usage/volume{query}"), key).await
}

async fn series(app: &TestApp, key: &TestKey, period: &str) -> Value {
    let response = volume(app, key, &format!("?period={period}")).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

fn ts(point: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(point["ts"].as_str().unwrap(), &Rfc3339).unwrap()
}

/// Jobs at the edges of the series and just outside it; `None` when a bucket boundary passed
/// between reading the series and checking it (the caller tries again).
async fn edges_are_counted(
    app: &TestApp,
    period: &str,
    buckets: usize,
    length: Duration,
) -> Option<()> {
    let key = app.account_with_key(Some(&[Scope::UsageRead])).await;
    let before = series(app, &key, period).await;
    let data = before["data"].as_array().unwrap();
    let (first, last) = (ts(&data[0]), ts(&data[buckets - 1]));
    for (at, kind) in [
        (first - Duration::milliseconds(1), "text"),
        (first, "text"),
        (first, "chat"),
        (last + length - Duration::milliseconds(1), "image"),
        (last + length, "image"),
    ] {
        JobRow::new(key.account, kind, "x", at)
            .insert(&app.db.pool)
            .await;
    }

    let after = series(app, &key, period).await;

    let data = after["data"].as_array().unwrap();
    if ts(&data[0]) != first {
        return None;
    }
    assert_eq!(after["period"], period);
    assert_eq!(data.len(), buckets, "{after}");
    for pair in data.windows(2) {
        assert_eq!(ts(&pair[1]) - ts(&pair[0]), length, "{after}");
    }
    assert_eq!(data[0]["prompt"], 2, "{after}");
    assert_eq!(data[buckets - 1]["image"], 1, "{after}");
    let total: i64 = data
        .iter()
        .flat_map(|p| {
            ["pre", "post", "prompt", "image", "video", "audio"].map(|s| p[s].as_i64().unwrap())
        })
        .sum();
    assert_eq!(total, 3, "only the jobs inside the window count: {after}");
    Some(())
}

async fn check_period(period: &str, bucket: &str, buckets: usize, length: Duration) {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::UsageRead])).await;
    assert_eq!(series(&app, &key, period).await["bucket"], bucket);
    eventually(
        StdDuration::from_secs(60),
        "a run within one bucket",
        || edges_are_counted(&app, period, buckets, length),
    )
    .await;
}

#[tokio::test]
async fn the_hour_series_has_60_minute_buckets_counting_its_edges() {
    check_period("hour", "minute", 60, Duration::MINUTE).await;
}

#[tokio::test]
async fn the_day_series_has_24_hour_buckets_counting_its_edges() {
    check_period("day", "hour", 24, Duration::HOUR).await;
}

#[tokio::test]
async fn the_week_series_has_7_day_buckets_counting_its_edges() {
    check_period("week", "day", 7, Duration::DAY).await;
}

#[tokio::test]
async fn the_month_series_has_30_day_buckets_counting_its_edges() {
    check_period("month", "day", 30, Duration::DAY).await;
}

#[tokio::test]
async fn each_type_counts_in_its_series_and_other_accounts_do_not_count() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::UsageRead])).await;
    let other = app.create_account().await;
    let at = moderation_shared::clock::now() - Duration::days(2);
    for kind in [
        "text",
        "chat",
        "image",
        "video",
        "video",
        "audio",
        "pre",
        "post",
        "post",
        "generate",
        "companion_chat",
    ] {
        JobRow::new(key.account, kind, "x", at)
            .insert(&app.db.pool)
            .await;
    }
    JobRow::new(other, "image", "x", at)
        .insert(&app.db.pool)
        .await;

    let response = volume(&app, &key, "").await;

    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["period"], "week", "week is the default");
    assert_eq!(body["bucket"], "day");
    let sum = |series: &str| -> i64 {
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[series].as_i64().unwrap())
            .sum()
    };
    assert_eq!(
        ["prompt", "image", "video", "audio", "pre", "post"].map(sum),
        [2, 1, 2, 1, 1, 2],
        "{body}"
    );
}

#[tokio::test]
async fn an_unknown_period_is_400() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::UsageRead])).await;

    for query in ["?period=year", "?period=", "?period=HOUR"] {
        assert_error(volume(&app, &key, query).await, 400, "INVALID_REQUEST").await;
    }
}

#[tokio::test]
async fn usage_needs_the_usage_read_scope() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::JobRead])).await;

    assert_error(volume(&app, &key, "").await, 403, "FORBIDDEN").await;
}
