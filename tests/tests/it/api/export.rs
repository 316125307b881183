use std::time::{Duration, Instant};

use moderation_api::limits::exports::ExportSettings;
use moderation_shared::domain::Scope;
use moderation_tests::{
    assert_error, eventually,
    fixtures::{ensure_partitions, insert_key, JobRow},
    spawn_app, spawn_app_with, TestApp, TestKey,
};
use serde_json::json;
use time::macros::datetime;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
};

const K_NAMED: &str = "00000000-0000-0000-0000-00000000000a";
const K_UNNAMED: &str = "00000000-0000-0000-0000-00000000000b";
const K_DELETED: &str = "00000000-0000-0000-0000-00000000000c";
const K_FORMULA: &str = "00000000-0000-0000-0000-00000000000d";

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
        .seq(1),
        JobRow::new(
            account,
            "text",
            "hello world",
            datetime!(2026-03-01 0:00 UTC),
        )
        .seq(2)
        .key(K_NAMED)
        .completed(datetime!(2026-03-01 0:00:01.234 UTC), false, None),
        JobRow::new(
            account,
            "text",
            "line one\nline two, with comma and \"quotes\"",
            datetime!(2026-03-01 0:10 UTC),
        )
        .seq(3)
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
        .seq(4)
        .key(K_DELETED)
        .completed(datetime!(2026-03-01 0:20:05 UTC), false, None)
        .categories(nsfw(false), true),
        JobRow::new(
            account,
            "video",
            "https://example.com/b.mp4",
            datetime!(2026-03-01 0:30 UTC),
        )
        .seq(5)
        .completed(datetime!(2026-03-01 0:31 UTC), true, Some("nudity"))
        .categories(nsfw(true), true),
        JobRow::new(
            account,
            "image",
            "https://example.com/c.png",
            datetime!(2026-03-01 0:40 UTC),
        )
        .seq(6)
        .key(K_NAMED)
        .completed(datetime!(2026-03-01 0:40:03 UTC), false, None)
        .categories(json!({"ai_adult_general": false, "underage": false}), false),
        JobRow::new(
            account,
            "image",
            "https://example.com/d.png",
            datetime!(2026-03-01 0:50 UTC),
        )
        .seq(7)
        .key(K_NAMED),
        JobRow::new(
            account,
            "text",
            "=HYPERLINK(\"http://evil\")",
            datetime!(2026-03-01 1:00 UTC),
        )
        .seq(8)
        .key(K_FORMULA)
        .completed(datetime!(2026-03-01 1:00:01 UTC), true, Some("-1+1")),
        JobRow::new(
            account,
            "audio",
            "+44 20 7946 0000",
            datetime!(2026-03-01 1:10 UTC),
        )
        .seq(9)
        .key(K_NAMED)
        .failed(datetime!(2026-03-01 1:12 UTC)),
        JobRow::new(
            account,
            "chat",
            "user: hi\nassistant: hello",
            datetime!(2026-03-01 1:20 UTC),
        )
        .seq(10)
        .completed(datetime!(2026-03-01 1:20:01 UTC), false, None),
        JobRow::new(
            account,
            "generate",
            "@admin please",
            datetime!(2026-03-01 1:30 UTC),
        )
        .seq(11)
        .status("processing"),
        JobRow::new(
            account,
            "pre",
            "\ttab first",
            datetime!(2026-03-01 1:40 UTC),
        )
        .seq(12)
        .completed(datetime!(2026-03-01 1:40:01 UTC), false, None),
        JobRow::new(
            account,
            "post",
            "\rcarriage",
            datetime!(2026-03-01 1:50 UTC),
        )
        .seq(13)
        .completed(datetime!(2026-03-01 1:50:01 UTC), false, None),
        JobRow::new(
            account,
            "text",
            "at the exclusive end",
            datetime!(2026-03-02 0:00 UTC),
        )
        .seq(14),
        JobRow::new(
            account,
            "image",
            "https://example.com/e.png",
            datetime!(2026-03-01 23:59:59.999 UTC),
        )
        .seq(15)
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
        .seq(17)
        .completed(datetime!(2026-03-01 2:00:01 UTC), false, None),
        JobRow::new(account, "text", "tie first", datetime!(2026-03-01 2:00 UTC))
            .seq(16)
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

/// The window every export below asks for.
const WINDOW: &str = "from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00Z";

/// Gives the account 2,000 jobs of about 10 KB each in [`WINDOW`]: about 20 MB of CSV, far
/// more than the socket buffers (up to 4 MB on the sending side), the body's buffer and the
/// one-chunk channel hold together, so an export whose client stops reading cannot finish.
async fn insert_many_jobs(app: &TestApp, key: &TestKey) {
    ensure_partitions(&app.db.pool, datetime!(2026-03-01 0:00 UTC)).await;
    let client = app.db.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO jobs (id, account_id, type, status, content, created_at, updated_at,
                               stage)
             SELECT uuid_v7(t), $1, 'text', 'queued', repeat('x', 10000), t,
                    '2026-03-01T00:00:00Z'::timestamptz, 'queued'
             FROM generate_series(1, 2000) AS n,
                  LATERAL (SELECT '2026-03-01T00:00:00Z'::timestamptz + n * interval '1 ms') AS at(t)",
            &[&key.account.0],
        )
        .await
        .unwrap();
}

/// A key with the job scopes whose account has [`insert_many_jobs`] and no rate limit.
async fn exporter(app: &TestApp) -> TestKey {
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    insert_many_jobs(app, &key).await;
    key
}

/// Asks for [`WINDOW`] over a socket with a small receive buffer, reads the status line and
/// headers, and returns the status and the socket, which then stops reading.
async fn open_stalled(app: &TestApp, key: &TestKey) -> (u16, TcpStream) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket
        .connect(([127, 0, 0, 1], app.port).into())
        .await
        .unwrap();
    let request = format!(
        "GET /api/v1/jobs/export?{WINDOW} HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Authorization: Bearer {}\r\n\r\n",
        key.key
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let read = stream.read(&mut byte).await.unwrap();
        assert_eq!(read, 1, "the connection closed before the headers");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
    (status, stream)
}

fn exports(concurrency: usize, per_account: usize, write_timeout: Duration) -> ExportSettings {
    ExportSettings {
        concurrency,
        per_account,
        write_timeout,
    }
}

/// Asserts a refused export: 429 `RATE_LIMITED` with a `retry-after`.
async fn assert_refused(response: reqwest::Response) {
    assert!(
        response.headers().contains_key("retry-after"),
        "retry-after"
    );
    assert_error(response, 429, "RATE_LIMITED").await;
}

#[tokio::test]
async fn exports_that_stop_reading_cannot_make_another_accounts_reads_or_submissions_wait() {
    // Bounds high enough to admit all sixteen: this is about the pool, not the bounds.
    let app = spawn_app_with(|s| s.exports = exports(16, 2, Duration::from_secs(60))).await;
    let mut exporters = Vec::new();
    for _ in 0..8 {
        exporters.push(exporter(&app).await);
    }
    let other = app.account_with_key(None).await;

    // Sixteen clients, twice the api's 8 pooled connections, open exports and stop reading.
    let mut stalled = Vec::new();
    for key in exporters.iter().chain(exporters.iter()) {
        stalled.push(open_stalled(&app, key).await);
    }
    let started = Instant::now();
    let job = app.submit_prompt(&other, "hello").await;
    let read = app.get(&format!("/api/v1/job/{job}"), &other).await;
    let took = started.elapsed();

    assert!(stalled.iter().all(|(status, _)| *status == 200));
    assert_eq!(read.status(), 200);
    // A request that waited for a pooled connection would take 5 s and fail.
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn an_account_may_run_exactly_its_bound_of_exports_and_one_more_is_429() {
    let app = spawn_app_with(|s| s.exports = exports(4, 2, Duration::from_secs(60))).await;
    let key = exporter(&app).await;
    let other = app.account_with_key(Some(&[Scope::JobRead])).await;

    let first = open_stalled(&app, &key).await;
    let second = open_stalled(&app, &key).await;
    let over = export(&app, &key, WINDOW).await;
    let another_account = export(&app, &other, WINDOW).await;

    assert_eq!((first.0, second.0), (200, 200));
    assert_refused(over).await;
    assert_eq!(another_account.status(), 200);
}

#[tokio::test]
async fn the_service_runs_exactly_its_total_of_exports_and_one_more_is_429() {
    let app = spawn_app_with(|s| s.exports = exports(3, 2, Duration::from_secs(60))).await;
    let a = exporter(&app).await;
    let b = exporter(&app).await;
    let c = app.account_with_key(Some(&[Scope::JobRead])).await;

    let mut statuses = Vec::new();
    let mut held = Vec::new();
    for key in [&a, &a, &b] {
        let (status, stream) = open_stalled(&app, key).await;
        statuses.push(status);
        held.push(stream);
    }
    let b_under_its_own_bound = export(&app, &b, WINDOW).await;
    let c_first = export(&app, &c, WINDOW).await;

    assert_eq!(statuses, [200, 200, 200]);
    assert_refused(b_under_its_own_bound).await;
    assert_refused(c_first).await;
}

#[tokio::test]
async fn a_reader_that_stalls_past_the_write_deadline_is_cut_and_its_slot_freed() {
    let app = spawn_app_with(|s| s.exports = exports(1, 1, Duration::from_secs(2))).await;
    let stalled_key = exporter(&app).await;
    let other = app.account_with_key(Some(&[Scope::JobRead])).await;

    let (status, mut stalled) = open_stalled(&app, &stalled_key).await;
    let while_held = export(&app, &other, WINDOW).await;
    let after = eventually(
        Duration::from_secs(10),
        "the stalled export's slot",
        || async {
            let response = export(&app, &other, WINDOW).await;
            (response.status() == 200).then_some(response)
        },
    )
    .await;
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stalled.read_to_end(&mut rest)).await;

    assert_eq!(status, 200);
    assert_refused(while_held).await;
    assert!(after.bytes().await.unwrap().starts_with(b"\xEF\xBB\xBF"));
    assert!(read.is_ok(), "the cut stream was not closed");
    assert!(
        !rest.ends_with(b"\r\n0\r\n\r\n"),
        "a cut export must not end like a whole one"
    );
}
