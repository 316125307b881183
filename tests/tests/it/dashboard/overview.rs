//! The overview: usage per modality as an SVG chart drawn on the server.

use moderation_shared::clock;
use moderation_tests::{fixtures::JobRow, spawn_app};
use time::Duration;

#[tokio::test]
async fn the_overview_draws_the_weeks_jobs_per_modality() {
    let app = spawn_app().await;
    let (account, visitor) = app.signed_in_dashboard(false).await;
    let now = clock::now();
    for (kind, age) in [("text", 1), ("text", 30), ("image", 2), ("audio", 50)] {
        JobRow::new(account, kind, "x", now - Duration::hours(age))
            .insert(&app.db.pool)
            .await;
    }

    let week = visitor.page("/").await;
    let hour = visitor.page("/?period=hour").await;
    let bad = visitor.get("/?period=year").await;

    assert!(week.contains(r#"<svg data-testid="usage-chart""#), "{week}");
    assert!(week.contains(r#"<rect class="text""#) && week.contains(r#"<rect class="image""#));
    assert!(week.contains("Text: 2") && week.contains("Image: 1") && week.contains("Audio: 1"));
    assert!(hour.contains(r#"<svg data-testid="usage-chart""#));
    assert!(!hour.contains("<rect"), "nothing in the last hour");
    assert!(hour.contains("No jobs in this period."));
    assert_eq!(bad.status(), 400);
}
