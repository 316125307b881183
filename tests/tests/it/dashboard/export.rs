//! The CSV export download: the api's bytes for the same days.

use moderation_tests::{fixtures::JobRow, spawn_app};
use time::macros::datetime;

#[tokio::test]
async fn the_download_is_the_apis_export_of_the_same_days() {
    let app = spawn_app().await;
    let (account, visitor) = app.signed_in_dashboard(false).await;
    let key = app.create_key(account, None).await;
    for (content, at) in [
        ("=formula", datetime!(2026-03-01 10:00 UTC)),
        ("plain", datetime!(2026-03-02 23:59 UTC)),
        ("outside", datetime!(2026-03-03 00:00 UTC)),
    ] {
        JobRow::new(account, "text", content, at)
            .insert(&app.db.pool)
            .await;
    }

    let page = visitor.page("/export").await;
    let download = visitor
        .get("/export/jobs.csv?from=2026-03-01&to=2026-03-02")
        .await;
    let bad = visitor
        .get("/export/jobs.csv?from=2026-03-02&to=2026-03-01")
        .await;

    assert!(page.contains(r#"action="/export/jobs.csv""#));
    assert_eq!(download.status(), 200);
    assert!(download.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .contains("jobs.csv"));
    let csv = download.bytes().await.unwrap();
    let api = app
        .get("/api/v1/jobs/export?from=2026-03-01&to=2026-03-03", &key)
        .await
        .bytes()
        .await
        .unwrap();
    assert_eq!(csv, api);
    let text = String::from_utf8_lossy(&csv);
    assert!(text.contains("'=formula") && text.contains("plain") && !text.contains("outside"));
    assert_eq!(bad.status(), 400);
}
