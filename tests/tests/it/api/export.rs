use moderation_shared::domain::Scope;
use moderation_tests::{
    assert_error,
    fixtures::{insert_key, JobRow},
    spawn_app, TestApp, TestKey,
};
use serde_json::json;
use time::macros::datetime;

const K_NAMED: &str = "00000000-0000-0000-0000-00000000000a";
const K_UNNAMED: &str = "00000000-0000-0000-0000-00000000000b";
const K_DELETED: &str = "00000000-0000-0000-0000-00000000000c";
const K_FORMULA: &str = "00000000-0000-0000-0000-00000000000d";

fn job(n: u32) -> String {
    format!("10000000-0000-0000-0000-0000000000{n:02}")
}

/// The jobs behind tests/fixtures/export.csv: one per cell rule, plus rows just outside the
/// window and another account's job inside it.
async fn insert_fixtures(app: &TestApp, key: &TestKey) {
    let pool = &app.db.pool;
    let account = key.account;
    insert_key(pool, K_NAMED, account, Some("Production key"), false).await;
    insert_key(pool, K_UNNAMED, account, None, false).await;
    insert_key(pool, K_DELETED, account, Some("Old key"), true).await;
    insert_key(pool, K_FORMULA, account, Some("=cmd|' /C calc'!A0"), false).await;
    let nsfw = |v: bool| json!({"ai_adult_general": false, "underage": false, "nsfw": v});
    let rows = [
        JobRow::new(
            account,
            "text",
            "before the window",
            datetime!(2026-02-28 23:59:59.999 UTC),
        )
        .id(&job(1)),
        JobRow::new(
            account,
            "text",
            "hello world",
            datetime!(2026-03-01 0:00 UTC),
        )
        .id(&job(2))
        .key(K_NAMED)
        .completed(datetime!(2026-03-01 0:00:01.234 UTC), false, None),
        JobRow::new(
            account,
            "text",
            "line one\nline two, with comma and \"quotes\"",
            datetime!(2026-03-01 0:10 UTC),
        )
        .id(&job(3))
        .key(K_UNNAMED)
        .completed(
            datetime!(2026-03-01 0:10:02 UTC),
            true,
            Some("Contains, \"quoted\" words"),
        ),
        JobRow::new(
            account,
            "image",
            "https://example.com/a.png",
            datetime!(2026-03-01 0:20 UTC),
        )
        .id(&job(4))
        .key(K_DELETED)
        .completed(datetime!(2026-03-01 0:20:05 UTC), false, None)
        .categories(nsfw(false), true),
        JobRow::new(
            account,
            "video",
            "https://example.com/b.mp4",
            datetime!(2026-03-01 0:30 UTC),
        )
        .id(&job(5))
        .completed(datetime!(2026-03-01 0:31 UTC), true, Some("nudity"))
        .categories(nsfw(true), true),
        JobRow::new(
            account,
            "image",
            "https://example.com/c.png",
            datetime!(2026-03-01 0:40 UTC),
        )
        .id(&job(6))
        .key(K_NAMED)
        .completed(datetime!(2026-03-01 0:40:03 UTC), false, None)
        .categories(json!({"ai_adult_general": false, "underage": false}), false),
        JobRow::new(
            account,
            "image",
            "https://example.com/d.png",
            datetime!(2026-03-01 0:50 UTC),
        )
        .id(&job(7))
        .key(K_NAMED),
        JobRow::new(
            account,
            "text",
            "=HYPERLINK(\"http://evil\")",
            datetime!(2026-03-01 1:00 UTC),
        )
        .id(&job(8))
        .key(K_FORMULA)
        .completed(datetime!(2026-03-01 1:00:01 UTC), true, Some("-1+1")),
        JobRow::new(
            account,
            "audio",
            "+44 20 7946 0000",
            datetime!(2026-03-01 1:10 UTC),
        )
        .id(&job(9))
        .key(K_NAMED)
        .failed(datetime!(2026-03-01 1:12 UTC)),
        JobRow::new(
            account,
            "chat",
            "user: hi\nassistant: hello",
            datetime!(2026-03-01 1:20 UTC),
        )
        .id(&job(10))
        .completed(datetime!(2026-03-01 1:20:01 UTC), false, None),
        JobRow::new(
            account,
            "generate",
            "@admin please",
            datetime!(2026-03-01 1:30 UTC),
        )
        .id(&job(11))
        .status("processing"),
        JobRow::new(
            account,
            "pre",
            "\ttab first",
            datetime!(2026-03-01 1:40 UTC),
        )
        .id(&job(12))
        .completed(datetime!(2026-03-01 1:40:01 UTC), false, None),
        JobRow::new(
            account,
            "post",
            "\rcarriage",
            datetime!(2026-03-01 1:50 UTC),
        )
        .id(&job(13))
        .completed(datetime!(2026-03-01 1:50:01 UTC), false, None),
        JobRow::new(
            account,
            "text",
            "at the exclusive end",
            datetime!(2026-03-02 0:00 UTC),
        )
        .id(&job(14)),
        JobRow::new(
            account,
            "image",
            "https://example.com/e.png",
            datetime!(2026-03-01 23:59:59.999 UTC),
        )
        .id(&job(15))
        .key(K_NAMED)
        .completed(datetime!(2026-03-02 0:00:03 UTC), true, Some("explicit"))
        .categories(nsfw(true), true),
        // Same instant: ordered by id, whatever the insertion order.
        JobRow::new(
            account,
            "text",
            "tie second",
            datetime!(2026-03-01 2:00 UTC),
        )
        .id(&job(17))
        .completed(datetime!(2026-03-01 2:00:01 UTC), false, None),
        JobRow::new(account, "text", "tie first", datetime!(2026-03-01 2:00 UTC))
            .id(&job(16))
            .completed(datetime!(2026-03-01 2:00:01 UTC), false, None),
    ];
    for row in &rows {
        row.insert(pool).await;
    }
    let other = app.create_account().await;
    JobRow::new(
        other,
        "text",
        "another account's job",
        datetime!(2026-03-01 12:00 UTC),
    )
    .insert(pool)
    .await;
}

async fn export(app: &TestApp, key: &TestKey, query: &str) -> reqwest::Response {
    app.get(&format!("/api/v1/jobs/export?{query}"), key).await
}

#[tokio::test]
async fn the_export_matches_the_expected_file_byte_for_byte() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::JobRead])).await;
    insert_fixtures(&app, &key).await;

    let response = export(
        &app,
        &key,
        "from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00Z",
    )
    .await;

    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/csv; charset=utf-8"
    );
    let body = response.bytes().await.unwrap();
    let expected = include_bytes!("../../../fixtures/export.csv");
    assert_eq!(
        String::from_utf8_lossy(&body),
        String::from_utf8_lossy(expected)
    );
    assert_eq!(&body[..], &expected[..]);
}

#[tokio::test]
async fn an_empty_window_gives_the_bom_and_the_header_only() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::JobRead])).await;

    let response = export(
        &app,
        &key,
        "from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z",
    )
    .await;

    assert_eq!(response.status(), 200);
    let body = response.bytes().await.unwrap();
    assert_eq!(
        &body[..],
        "\u{feff}job_id,type,status,is_prohibited,created_at,completed_at,api_key_id,api_key_name,prompt,reason,category_nsfw\n"
            .as_bytes()
    );
}

#[tokio::test]
async fn a_window_of_exactly_366_days_passes_and_one_second_more_is_400() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::JobRead])).await;

    let exact = export(
        &app,
        &key,
        "from=2025-01-01T00:00:00Z&to=2026-01-02T00:00:00Z",
    )
    .await;
    let over = export(
        &app,
        &key,
        "from=2025-01-01T00:00:00Z&to=2026-01-02T00:00:01Z",
    )
    .await;

    assert_eq!(exact.status(), 200);
    assert_error(over, 400, "INVALID_REQUEST").await;
}

#[tokio::test]
async fn missing_unparsable_or_reversed_bounds_are_400() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::JobRead])).await;

    for query in [
        "",
        "from=2026-03-01T00:00:00Z",
        "to=2026-03-01T00:00:00Z",
        "from=yesterday&to=2026-03-01T00:00:00Z",
        "from=2026-03-01T00:00:00Z&to=2026-03-01T00:00:00Z",
        "from=2026-03-02T00:00:00Z&to=2026-03-01T00:00:00Z",
    ] {
        assert_error(export(&app, &key, query).await, 400, "INVALID_REQUEST").await;
    }
}

#[tokio::test]
async fn the_export_needs_the_job_read_scope() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::UsageRead])).await;

    let response = export(
        &app,
        &key,
        "from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00Z",
    )
    .await;

    assert_error(response, 403, "FORBIDDEN").await;
}
