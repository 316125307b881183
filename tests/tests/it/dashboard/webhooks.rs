//! Webhook settings: the global URL, secrets revealed only on request and rotated; and the
//! delivery log: its filters and cursor pages in the URL, resend and recover.

use moderation_shared::domain::AccountId;
use moderation_tests::{
    dashboard::{location, next_page},
    fixtures::{id_at, JobRow},
    receiver::TestReceiver,
    spawn_app, TestApp,
};
use time::{macros::datetime, Duration};

#[tokio::test]
async fn secrets_are_hidden_until_revealed_and_a_rotation_keeps_the_old_one_signing() {
    let app = spawn_app().await;
    let (_, visitor) = app.signed_in_dashboard(false).await;

    let listed = visitor.page("/webhooks").await;
    let revealed = visitor
        .post("/webhooks", "/webhooks/secrets/reveal", &[])
        .await;
    let revealed = revealed.text().await.unwrap();
    let rotated = visitor
        .post("/webhooks", "/webhooks/secrets/rotate", &[])
        .await;
    let after = visitor.page("/webhooks").await;

    assert_eq!(listed.matches(r#"data-testid="secret-row""#).count(), 1);
    assert!(!listed.contains("whsec_"), "hidden until revealed");
    assert!(
        revealed.contains(r#"data-testid="secret-value">whsec_"#),
        "{revealed}"
    );
    assert_eq!(rotated.status(), 303);
    assert_eq!(after.matches(r#"data-testid="secret-row""#).count(), 2);
    assert!(after.contains(">expiring<") && after.contains(">active<"));
}

#[tokio::test]
async fn the_global_url_must_be_https_and_recover_reports_its_count() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let receiver = TestReceiver::start().await;
    let user = app.create_user(app.create_account().await, false).await;
    let visitor = dashboard.signed_in(&user).await;

    let plain = visitor
        .post(
            "/webhooks",
            "/webhooks/url",
            &[("url", "http://127.0.0.1:9/hook")],
        )
        .await;
    let https = visitor
        .post(
            "/webhooks",
            "/webhooks/url",
            &[("url", &receiver.url("/hook"))],
        )
        .await;
    let recovered = visitor
        .post(
            "/deliveries",
            "/deliveries/recover",
            &[("since", "2026-01-01T00:00")],
        )
        .await;

    assert_eq!(plain.status(), 400);
    assert_eq!(https.status(), 303);
    assert!(visitor
        .page("/webhooks")
        .await
        .contains(&receiver.url("/hook")));
    assert_eq!(location(&recovered), "/deliveries?recovered=0");
    assert!(visitor
        .page("/deliveries?recovered=0")
        .await
        .contains("0 abandoned deliveries will be tried again."));
}

/// Inserts a completed job of `account` and its delivery in `state`, created at `at`; answers
/// the job's and the delivery's ids.
async fn delivered_job(
    app: &TestApp,
    account: AccountId,
    state: &str,
    at: time::OffsetDateTime,
) -> (uuid::Uuid, uuid::Uuid) {
    let job = JobRow::new(account, "text", "x", at).completed(at, false, None);
    job.insert(&app.db.pool).await;
    let delivery = id_at(at, uuid::Uuid::new_v4().as_u128());
    let client = app.db.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO deliveries (id, job_id, account_id, target_url, body, state, attempts, \
                                     schedule_attempts, next_attempt_at, created_at, finished_at) \
             VALUES ($1, $2, $3, 'https://hooks.example.com/x', '\\x7b7d'::bytea, $4, 1, 1, \
                     CASE WHEN $4 = 'pending' THEN $5::timestamptz END, $5, \
                     CASE WHEN $4 <> 'pending' THEN $5::timestamptz END)",
            &[&delivery, &job.id, &account.0, &state, &at],
        )
        .await
        .unwrap();
    (job.id, delivery)
}

#[tokio::test]
async fn the_delivery_log_keeps_its_filters_and_cursor_in_the_url() {
    let app = spawn_app().await;
    let (account, visitor) = app.signed_in_dashboard(false).await;
    let start = datetime!(2026-05-01 00:00 UTC);
    let mut delivered = Vec::new();
    for i in 0..55 {
        delivered
            .push(delivered_job(&app, account, "delivered", start + Duration::minutes(i)).await);
    }
    let (abandoned_job, abandoned) =
        delivered_job(&app, account, "abandoned", start - Duration::days(1)).await;
    let other = app.create_account().await;
    delivered_job(&app, other, "abandoned", start).await;
    let rows = |html: &str| html.matches(r#"data-testid="delivery-row""#).count();
    let unescaped = |html: &str| html.replace("&#38;", "&").replace("&amp;", "&");
    let first = visitor.page("/deliveries?status=delivered").await;
    let next = next_page(&first).expect("a next page link");
    let second = visitor.page(&next).await;
    let by_status = visitor.page("/deliveries?status=abandoned").await;
    let by_job = visitor
        .page(&format!("/deliveries?job_id={abandoned_job}"))
        .await;
    let since = visitor.page("/deliveries?since=2026-05-01T00:50").await;
    let bad = visitor.page("/deliveries?job_id=nope&status=lost").await;
    let broken = visitor.page("/deliveries?after=garbage").await;

    assert_eq!(rows(&first), 50);
    assert!(
        next.contains("status=delivered") && next.contains("after="),
        "{next}"
    );
    assert_eq!(rows(&second), 5);
    assert_eq!(next_page(&second), None);
    assert!(unescaped(&second).contains(r#"href="/deliveries?status=delivered">Newest"#));
    let newest_first = delivered.iter().rev().map(|(_, d)| d.to_string());
    let shown: Vec<String> = [&first, &second]
        .iter()
        .flat_map(|html| {
            html.split(r#"data-delivery-id=""#)
                .skip(1)
                .map(|s| s.split('"').next().unwrap_or_default().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        shown,
        newest_first.collect::<Vec<_>>(),
        "newest first, no repeats"
    );
    assert_eq!(rows(&by_status), 1);
    assert!(by_status.contains(&abandoned.to_string()));
    assert!(by_status.contains(r#"<option value="abandoned" selected>"#));
    assert_eq!(rows(&by_job), 1);
    assert_eq!(rows(&since), 5, "created at or after 00:50");
    assert!(
        bad.contains("Unknown status") || bad.contains("is not a job id"),
        "{bad}"
    );
    assert!(broken.contains("This page link is broken"), "{broken}");
}

#[tokio::test]
async fn a_resend_from_the_log_comes_back_to_the_same_log_page() {
    let app = spawn_app().await;
    let (account, visitor) = app.signed_in_dashboard(false).await;
    let (_, abandoned) =
        delivered_job(&app, account, "abandoned", datetime!(2026-05-01 00:00 UTC)).await;
    let (_, pending) =
        delivered_job(&app, account, "pending", datetime!(2026-05-01 00:00 UTC)).await;

    let resent = visitor
        .post(
            "/deliveries",
            &format!("/deliveries/{abandoned}/resend"),
            &[("back", "status=abandoned")],
        )
        .await;
    let refused = visitor
        .post(
            "/deliveries",
            &format!("/deliveries/{pending}/resend"),
            &[("back", "")],
        )
        .await;

    assert_eq!(resent.status(), 303);
    assert_eq!(location(&resent), "/deliveries?status=abandoned");
    let client = app.db.pool.get().await.unwrap();
    let asked: Option<time::OffsetDateTime> = client
        .query_one(
            "SELECT resend_at FROM deliveries WHERE id = $1",
            &[&abandoned],
        )
        .await
        .unwrap()
        .get(0);
    assert!(asked.is_some(), "the resend is recorded for the dispatcher");
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("still pending"));
}
