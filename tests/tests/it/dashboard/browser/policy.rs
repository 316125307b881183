//! Policy versions and the audit log in a real browser: a draft, its refusal, its diff and
//! its impact over stored jobs, the shadow, activation and rollback, then the audit log.

use std::time::Duration;

use moderation_tests::{
    browser::{open_browser, Browser},
    eventually, spawn_app,
};

use super::sign_in;

/// The text of the element with `data-testid` `id`.
async fn testid_text(browser: &Browser, id: &str) -> String {
    browser
        .css(&format!(r#"[data-testid="{id}"]"#))
        .await
        .text()
        .await
        .unwrap()
}

/// Types `value` into the input named `name`, replacing what it held.
async fn retype(browser: &Browser, name: &str, value: &str) {
    let input = browser.css(&format!(r#"input[name="{name}"]"#)).await;
    input.clear().await.unwrap();
    input.send_keys(value).await.unwrap();
}

#[tokio::test]
#[ignore = "browser tier: scripts/test runs it with chromedriver"]
async fn a_person_drafts_a_policy_sees_its_impact_shadows_activates_rolls_back_and_audits_it() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let account = app.create_account().await;
    let user = app.create_user(account, false).await;
    let scoring = app
        .create_key(
            account,
            Some(&[moderation_shared::domain::Scope::ModeratePrompt]),
        )
        .await;
    // Passed under violence 0.5, rejected under 0.3; rejected for hate under 0.5, passes
    // under 0.9; and one that stays passed.
    let stricter = app
        .finished_with_scores(&scoring, false, false, &[("violence", 400)])
        .await;
    let laxer = app
        .finished_with_scores(&scoring, true, false, &[("hate", 600)])
        .await;
    app.finished_with_scores(&scoring, false, false, &[("violence", 100)])
        .await;
    let browser = open_browser().await;
    sign_in(&browser, &dashboard, &user).await;

    // A draft: a band at or above its block score is explained, what was typed stays.
    browser.goto(&dashboard.url("/policy/versions")).await;
    browser.screenshot("policy-versions-first").await;
    retype(&browser, "block_at.violence", "0.3").await;
    retype(&browser, "block_at.hate", "0.9").await;
    retype(&browser, "review_at.sexual", "0.6").await;
    browser
        .input_labelled("Note (optional)")
        .await
        .send_keys("Stricter on violence")
        .await
        .unwrap();
    browser.click_button("Create draft").await;
    assert!(
        browser
            .css("#draft-error")
            .await
            .text()
            .await
            .unwrap()
            .contains("categories.sexual.review_at (0.6) must be below block_at (0.5)"),
        "the refusal is shown in the form"
    );
    browser.screenshot("policy-draft-error").await;
    let kept = browser.css(r#"input[name="block_at.violence"]"#).await;
    assert_eq!(kept.prop("value").await.unwrap().as_deref(), Some("0.3"));
    retype(&browser, "review_at.sexual", "").await;
    browser.click_button("Create draft").await;
    assert_eq!(browser.path().await, "/policy/versions/2");

    // Its diff against version 1 and its impact over the stored jobs.
    assert_eq!(testid_text(&browser, "version-status").await, "draft");
    let diff: Vec<String> = {
        let mut names = Vec::new();
        for row in browser.all(r#"[data-testid="diff-row"]"#).await {
            names.push(row.attr("data-category").await.unwrap().unwrap());
        }
        names
    };
    assert_eq!(diff, ["hate", "violence"]);
    assert_eq!(testid_text(&browser, "impact-jobs").await, "3");
    assert_eq!(testid_text(&browser, "impact-rescored").await, "3");
    assert_eq!(testid_text(&browser, "impact-pass-to-reject").await, "1");
    assert_eq!(testid_text(&browser, "impact-reject-to-pass").await, "1");
    browser.css(&format!(r#"a[data-job-id="{laxer}"]"#)).await;
    browser.screenshot("policy-version-draft").await;
    browser.resize(390, 844).await;
    browser.screenshot("policy-version-phone").await;
    browser.resize(1280, 900).await;
    let before = browser.css("html").await;
    browser
        .css(&format!(r#"a[data-job-id="{stricter}"]"#))
        .await
        .click()
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "the example job", || async {
        before.tag_name().await.is_err().then_some(())
    })
    .await;
    assert_eq!(browser.path().await, format!("/jobs/{stricter}"));

    // Shadow, stop, shadow again, then activate.
    browser.goto(&dashboard.url("/policy/versions/2")).await;
    browser.click_button("Run as shadow").await;
    assert_eq!(testid_text(&browser, "version-status").await, "shadow");
    browser.goto(&dashboard.url("/policy/versions")).await;
    assert!(testid_text(&browser, "shadow-version")
        .await
        .contains("Version 2"));
    browser.screenshot("policy-versions-shadow").await;
    browser.click_button("Stop shadow").await;
    assert!(testid_text(&browser, "shadow-version")
        .await
        .contains("none"));
    browser.goto(&dashboard.url("/policy/versions/2")).await;
    browser.click_button("Run as shadow").await;
    browser.click_button("Activate").await;
    assert_eq!(testid_text(&browser, "version-status").await, "active");

    // Roll back to version 1.
    browser.goto(&dashboard.url("/policy/versions/1")).await;
    assert_eq!(testid_text(&browser, "version-status").await, "retired");
    browser.click_button("Roll back").await;
    assert_eq!(testid_text(&browser, "version-status").await, "active");
    browser.goto(&dashboard.url("/policy/versions")).await;
    let mut statuses = Vec::new();
    for row in browser.all(r#"[data-testid="version-row"]"#).await {
        statuses.push(row.attr("data-status").await.unwrap().unwrap());
    }
    assert_eq!(statuses, ["retired", "active"]);
    browser.screenshot("policy-versions").await;

    // Every change is in the audit log, by this person.
    browser.goto(&dashboard.url("/audit")).await;
    let mut mine = Vec::new();
    for row in browser
        .all(r#"[data-testid="audit-row"][data-actor-type="user"]"#)
        .await
    {
        assert!(row.text().await.unwrap().contains(&user.email));
        mine.push(row.attr("data-action").await.unwrap().unwrap());
    }
    assert_eq!(
        mine,
        [
            "policy.activated",
            "policy.activated",
            "policy.shadow_started",
            "policy.shadow_stopped",
            "policy.shadow_started",
            "policy.version_created",
        ]
    );
    browser.screenshot("audit").await;
    browser
        .css("select[name=action] option[value='policy.activated']")
        .await
        .click()
        .await
        .unwrap();
    browser.click_button("Filter").await;
    assert_eq!(browser.all(r#"[data-testid="audit-row"]"#).await.len(), 2);
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.query(), Some("action=policy.activated&from=&until="));
    browser.resize(390, 844).await;
    browser.screenshot("audit-phone").await;
}
