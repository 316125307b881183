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

mod policy;
mod review;

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

/// The value of a JavaScript expression on the page.
async fn evaluate(browser: &Browser, expression: &str) -> serde_json::Value {
    browser
        .client
        .execute(&format!("return {expression};"), Vec::new())
        .await
        .unwrap_or_else(|e| panic!("{expression}: {e}"))
}

#[tokio::test]
#[ignore = "browser tier: scripts/test runs it with chromedriver"]
async fn members_report_and_check_edit_a_category_page_the_log_and_submit_a_chat() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let reporter = app.registry_member().await;
    let checker = app.registry_member().await;
    let reporting = app.create_user(reporter.account, false).await;
    let checking = app.create_user(checker.account, false).await;
    let client = app.db.pool.get().await.unwrap();
    moderation_tests::fixtures::ensure_partitions(
        &app.db.pool,
        time::macros::datetime!(2026-05-01 0:00 UTC),
    )
    .await;
    // 55 delivered webhooks of completed jobs, a minute apart.
    client
        .execute(
            "WITH j AS (INSERT INTO jobs (id, account_id, type, status, stage, content, \
                                         is_prohibited, created_at, updated_at, completed_at) \
                        SELECT uuid_v7(t), $1, 'text', 'completed', 'done', 'x', false, \
                               t, t, t \
                        FROM generate_series(timestamptz '2026-05-01', \
                                             timestamptz '2026-05-01 00:54', \
                                             interval '1 minute') AS t \
                        RETURNING id, created_at) \
             INSERT INTO deliveries (id, job_id, account_id, target_url, body, state, \
                                     attempts, schedule_attempts, created_at, finished_at, \
                                     last_status_code) \
             SELECT uuid_v7(created_at), id, $1, 'https://hooks.example.com/x', '\\x7b7d', \
                    'delivered', 1, 1, created_at, created_at, 200 FROM j",
            &[&reporter.account.0],
        )
        .await
        .unwrap();
    let browser = open_browser().await;
    sign_in(&browser, &dashboard, &reporting).await;

    // Report a banned user by email address.
    browser.goto(&dashboard.url("/registry")).await;
    browser.screenshot("registry-empty").await;
    browser
        .css("#report-identifier")
        .await
        .send_keys("Jane.Saoirse@gmail.com")
        .await
        .unwrap();
    browser
        .css("#report-category option[value=payment_fraud]")
        .await
        .click()
        .await
        .unwrap();
    browser
        .css("#report-case")
        .await
        .send_keys("case 42")
        .await
        .unwrap();
    browser
        .css("input[name=attest_human_review]")
        .await
        .click()
        .await
        .unwrap();
    browser.click_button("Report").await;
    assert!(browser.source().await.contains("a new entry was made"));
    assert_eq!(browser.all(r#"[data-testid="entry-row"]"#).await.len(), 1);
    browser.screenshot("registry-reported").await;

    // Timestamps: the script shows local time; the title keeps UTC.
    let stamp = browser.css("time[datetime]").await;
    assert_eq!(
        stamp.attr("data-local").await.unwrap().as_deref(),
        Some("true")
    );
    let title = stamp.attr("title").await.unwrap().unwrap_or_default();
    assert!(title.ends_with(" UTC"), "{title}");
    assert_ne!(
        stamp.text().await.unwrap(),
        title,
        "the text is the local time"
    );

    // Keyboard: Tab reaches the check form's input, with a visible focus ring.
    browser.css("body").await.send_keys("").await.unwrap();
    let mut reached = false;
    for _ in 0..40 {
        browser
            .client
            .active_element()
            .await
            .unwrap()
            .send_keys("\u{e004}")
            .await
            .unwrap();
        if evaluate(&browser, "document.activeElement.id").await == "check-identifier" {
            reached = true;
            break;
        }
    }
    assert!(reached, "the check form is reachable by Tab");
    let outline = evaluate(
        &browser,
        "getComputedStyle(document.activeElement).outlineStyle",
    )
    .await;
    assert_ne!(outline, "none", "focus is visible");
    browser.screenshot("registry-keyboard-focus").await;

    // Category: add, then edit its description and keywords; a blank description is explained.
    browser.goto(&dashboard.url("/policy")).await;
    browser
        .input_labelled("Name (a-z, 0-9 and _)")
        .await
        .send_keys("gambling")
        .await
        .unwrap();
    browser
        .input_labelled("Description")
        .await
        .send_keys("Betting")
        .await
        .unwrap();
    browser.click_button("Add category").await;
    browser
        .css("details.edit summary")
        .await
        .click()
        .await
        .unwrap();
    let description = browser.css("details.edit textarea[name=description]").await;
    description.clear().await.unwrap();
    description.send_keys("   ").await.unwrap();
    browser.click_button("Save changes").await;
    assert!(browser
        .source()
        .await
        .contains("Description must be 1 to 2000 characters"));
    browser.screenshot("policy-edit-error").await;
    let description = browser.css("details.edit textarea[name=description]").await;
    description.clear().await.unwrap();
    description.send_keys("Betting and casinos").await.unwrap();
    browser.click_button("Save changes").await;
    assert!(browser.source().await.contains("Betting and casinos"));
    browser.screenshot("policy-edited").await;

    // The delivery log: a filter, then the next page by its cursor.
    browser
        .goto(&dashboard.url("/deliveries?status=delivered"))
        .await;
    assert_eq!(
        browser.all(r#"[data-testid="delivery-row"]"#).await.len(),
        50
    );
    browser.screenshot("deliveries").await;
    browser
        .css(r#"[data-testid="next-page"]"#)
        .await
        .click()
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "the next page", || async {
        (browser.all(r#"[data-testid="delivery-row"]"#).await.len() == 5).then_some(())
    })
    .await;
    browser.screenshot("deliveries-next-page").await;
    browser.resize(390, 844).await;
    browser.screenshot("deliveries-phone").await;
    browser.resize(1280, 900).await;

    // A chat.
    browser.goto(&dashboard.url("/submit")).await;
    browser
        .css("#messages")
        .await
        .send_keys("system: Be brief.\nuser: Hello there")
        .await
        .unwrap();
    browser.click_button("Submit chat").await;
    assert!(browser.path().await.starts_with("/jobs/"));
    browser.screenshot("job-chat").await;

    // Another member checks the address: one signal.
    browser.click_button("Sign out").await;
    sign_in(&browser, &dashboard, &checking).await;
    browser.goto(&dashboard.url("/registry")).await;
    browser
        .css("#check-identifier")
        .await
        .send_keys("janesaoirse@gmail.com")
        .await
        .unwrap();
    browser.click_button("Check").await;
    let answer = browser.css(r#"[data-testid="check-answer"]"#).await;
    assert_eq!(
        answer.attr("data-match").await.unwrap().as_deref(),
        Some("true")
    );
    assert_eq!(browser.all(r#"[data-testid="signal-row"]"#).await.len(), 1);
    browser.screenshot("registry-check-match").await;
    browser.resize(390, 844).await;
    browser.screenshot("registry-phone").await;
}

#[tokio::test]
#[ignore = "browser tier: scripts/test runs it with chromedriver"]
async fn a_person_sees_the_webhook_state_with_a_banner_everywhere_pauses_resumes_and_tests() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let account = app.create_account().await;
    let user = app.create_user(account, false).await;
    app.set_webhook_url(account, "https://93.184.215.14/hook")
        .await;
    let browser = open_browser().await;
    sign_in(&browser, &dashboard, &user).await;
    assert!(browser.all("[data-testid=webhook-banner]").await.is_empty());

    browser.goto(&dashboard.url("/webhooks")).await;
    let active = browser
        .css("[data-testid=webhook-state]")
        .await
        .text()
        .await
        .unwrap();
    browser.click_button("Pause deliveries").await;
    let paused = browser
        .css("[data-testid=webhook-state]")
        .await
        .text()
        .await
        .unwrap();
    browser.screenshot("webhooks-paused").await;
    browser.goto(&dashboard.url("/jobs")).await;
    let banner = browser
        .css("[data-testid=webhook-banner]")
        .await
        .text()
        .await
        .unwrap();
    browser.goto(&dashboard.url("/webhooks")).await;
    browser.click_button("Resume deliveries").await;
    let resumed = browser
        .css("[data-testid=webhook-state]")
        .await
        .text()
        .await
        .unwrap();
    let banners_after = browser.all("[data-testid=webhook-banner]").await.len();
    browser.click_button("Disable").await;
    let disabled = browser
        .css("[data-testid=webhook-state]")
        .await
        .text()
        .await
        .unwrap();
    browser.click_button("Enable and send held").await;
    let enabled = browser
        .css("[data-testid=webhook-state]")
        .await
        .text()
        .await
        .unwrap();
    browser.click_button("Send a test event").await;
    let log_path = browser.path().await;
    let log = browser.source().await;

    assert_eq!(active, "active");
    assert_eq!(paused, "paused");
    assert!(banner.contains("paused"), "{banner}");
    assert_eq!(resumed, "active");
    assert_eq!(banners_after, 0, "no banner once active");
    assert_eq!(disabled, "disabled (manual)");
    assert_eq!(enabled, "active");
    assert_eq!(log_path, "/deliveries");
    assert!(log.contains("ping"), "the test send is in the log");
}
