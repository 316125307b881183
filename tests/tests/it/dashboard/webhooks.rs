//! Webhook settings: the global URL, secrets revealed only on request and rotated, and the
//! delivery log's resend and recover.

use moderation_tests::{dashboard::location, receiver::TestReceiver, spawn_app};

#[tokio::test]
async fn secrets_are_hidden_until_revealed_and_a_rotation_keeps_the_old_one_signing() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let user = app.create_user(app.create_account().await, false).await;
    let visitor = dashboard.signed_in(&user).await;

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
            "/webhooks",
            "/webhooks/recover",
            &[("since", "2026-01-01T00:00")],
        )
        .await;

    assert_eq!(plain.status(), 400);
    assert_eq!(https.status(), 303);
    assert!(visitor
        .page("/webhooks")
        .await
        .contains(&receiver.url("/hook")));
    assert_eq!(location(&recovered), "/webhooks?recovered=0");
    assert!(visitor
        .page("/webhooks?recovered=0")
        .await
        .contains("0 abandoned deliveries will be tried again."));
}
