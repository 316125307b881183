//! The dashboard in a real browser (headless Chromium over WebDriver): the journey of a
//! signed-in person, and the pages a person may not see. Screenshots of every page go to
//! `target/screenshots/`. `scripts/test` runs this tier with one chromedriver for all of it.

use std::time::Duration;

use moderation_tests::{
    browser::{open_browser, Browser},
    dashboard::{TestDashboard, TestUser},
    eventually,
    receiver::TestReceiver,
    spawn_app,
    worker::spawn_worker,
};

async fn sign_in(browser: &Browser, dashboard: &TestDashboard, user: &TestUser) {
    browser.goto(&dashboard.url("/login")).await;
    browser
        .input_labelled("Email")
        .await
        .send_keys(&user.email)
        .await
        .unwrap();
    browser
        .input_labelled("Password")
        .await
        .send_keys(&user.password)
        .await
        .unwrap();
    browser.click_button("Sign in").await;
    assert_eq!(browser.path().await, "/", "signed in");
}

/// The text of the first element matching `selector`, after reloading until `wanted` is true
/// of it.
async fn reload_until(
    browser: &Browser,
    selector: &str,
    what: &str,
    wanted: impl Fn(&str) -> bool,
) -> String {
    eventually(Duration::from_secs(30), what, || async {
        browser.client.refresh().await.ok()?;
        let text = browser
            .client
            .find(fantoccini::Locator::Css(selector))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        wanted(&text).then_some(text)
    })
    .await
}

#[tokio::test]
#[ignore = "browser tier: scripts/test runs it with chromedriver"]
async fn a_person_signs_in_makes_a_key_submits_a_prompt_and_resends_its_webhook() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let receiver = TestReceiver::start().await;
    let _worker = spawn_worker(&app, |_| {}).await;
    let _dispatcher = app
        .start_dispatcher(app.dispatcher_settings(&receiver, 0.001))
        .await;
    let user = app.create_user(app.create_account().await, false).await;
    let browser = open_browser().await;

    browser.goto(&dashboard.url("/login")).await;
    browser.screenshot("sign-in").await;
    sign_in(&browser, &dashboard, &user).await;
    browser.css(r#"svg[data-testid="usage-chart"]"#).await;
    browser.screenshot("overview-empty").await;

    // The global webhook URL, at the HTTPS test receiver.
    browser.goto(&dashboard.url("/webhooks")).await;
    browser
        .input_labelled("Webhook URL")
        .await
        .send_keys(&receiver.url("/hook"))
        .await
        .unwrap();
    browser.click_button("Save URL").await;
    assert!(browser.source().await.contains(&receiver.url("/hook")));

    // A key, shown once.
    browser.goto(&dashboard.url("/keys")).await;
    browser.screenshot("keys-empty").await;
    browser
        .css("#key-name")
        .await
        .send_keys("browser")
        .await
        .unwrap();
    browser.click_button("Create key").await;
    let key = browser
        .css(r#"[data-testid="new-key"]"#)
        .await
        .text()
        .await
        .unwrap();
    assert!(key.starts_with("msk_"), "{key}");
    browser.screenshot("keys-new").await;
    browser.client.refresh().await.unwrap();
    assert!(browser.all(r#"[data-testid="new-key"]"#).await.is_empty());
    assert!(
        !browser.source().await.contains(&key),
        "shown once, then never again"
    );
    browser.screenshot("keys").await;

    // A prompt, decided by the worker, delivered by the dispatcher.
    browser.goto(&dashboard.url("/submit")).await;
    browser.screenshot("submit").await;
    browser
        .input_labelled("Prompt")
        .await
        .send_keys("a friendly note about gardening")
        .await
        .unwrap();
    browser.click_button("Submit prompt").await;
    let job_path = browser.path().await;
    assert!(job_path.starts_with("/jobs/"), "{job_path}");
    reload_until(
        &browser,
        r#"[data-testid="delivery-state"]"#,
        "the delivery",
        |s| s == "delivered",
    )
    .await;
    assert_eq!(browser.all(r#"[data-testid="attempt-row"]"#).await.len(), 1);
    browser.screenshot("job").await;

    // Resend: one more attempt, logged like the first.
    browser.click_button("Resend now").await;
    eventually(Duration::from_secs(30), "the resent attempt", || async {
        browser.client.refresh().await.ok()?;
        let rows = browser.all(r#"[data-testid="attempt-row"]"#).await;
        (rows.len() == 2).then_some(())
    })
    .await;
    assert_eq!(receiver.received().len(), 2);
    browser.screenshot("job-resent").await;

    browser.goto(&dashboard.url("/jobs")).await;
    let job_id = job_path.trim_start_matches("/jobs/");
    let row = browser
        .css(&format!(
            r#"[data-testid="job-row"][data-job-id="{job_id}"]"#
        ))
        .await;
    assert!(row.text().await.unwrap().contains("completed"));
    browser.screenshot("jobs").await;
    browser.goto(&dashboard.url("/?period=hour")).await;
    let bars = browser
        .all(r#"svg[data-testid="usage-chart"] rect.text"#)
        .await;
    assert_eq!(bars.len(), 1, "the prompt is on the chart");
    browser.screenshot("overview").await;
    browser.resize(390, 844).await;
    browser.screenshot("jobs-phone").await;
    browser.resize(1280, 900).await;

    // Rotate the signing secret: the old one keeps signing beside the new.
    browser.goto(&dashboard.url("/webhooks")).await;
    browser.click_button("Rotate secret").await;
    assert_eq!(browser.all(r#"[data-testid="secret-row"]"#).await.len(), 2);
    browser.click_button("Reveal secrets").await;
    assert_eq!(
        browser.all(r#"[data-testid="secret-value"]"#).await.len(),
        2
    );
    browser.screenshot("webhooks").await;

    browser.click_button("Sign out").await;
    assert_eq!(browser.path().await, "/login");
    browser.goto(&dashboard.url("/keys")).await;
    assert_eq!(browser.path().await, "/login", "signed out");
}

#[tokio::test]
#[ignore = "browser tier: scripts/test runs it with chromedriver"]
async fn a_person_sees_neither_staff_pages_nor_another_accounts_job() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let account = app.create_account().await;
    let user = app.create_user(account, false).await;
    let staff = app.create_user(account, true).await;
    let other = app.create_account().await;
    let theirs = moderation_tests::fixtures::JobRow::new(
        other,
        "text",
        "theirs",
        time::macros::datetime!(2026-03-01 00:00 UTC),
    );
    theirs.insert(&app.db.pool).await;
    let browser = open_browser().await;

    sign_in(&browser, &dashboard, &user).await;
    browser.goto(&dashboard.url("/staff/accounts")).await;
    let forbidden = browser.source().await;
    browser.screenshot("staff-forbidden").await;
    browser
        .goto(&dashboard.url(&format!("/jobs/{}", theirs.id)))
        .await;
    let missing = browser.source().await;
    browser.screenshot("job-not-found").await;
    browser.goto(&dashboard.url("/jobs")).await;
    browser.screenshot("jobs-empty").await;

    assert!(
        forbidden.contains("This page is for staff only."),
        "{forbidden}"
    );
    assert!(missing.contains("belongs to another account"), "{missing}");
    assert!(!missing.contains("theirs"));

    browser.click_button("Sign out").await;
    sign_in(&browser, &dashboard, &staff).await;
    browser.goto(&dashboard.url("/staff/accounts")).await;
    assert!(browser.source().await.contains(&other.to_string()));
    browser.screenshot("staff-accounts").await;
}
