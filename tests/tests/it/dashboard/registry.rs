//! The Shared Registry page of members: reporting and checking an identifier through the
//! shared functions (never the api), with errors shown in the page.

use moderation_tests::{dashboard::location, registry::email_hash, spawn_app};

/// The fields of a report of `identifier` (an email address or its hash).
fn report(identifier: &str) -> [(&str, &str); 5] {
    [
        ("identifier_type", "email"),
        ("identifier", identifier),
        ("category", "payment_fraud"),
        ("member_case_ref", "case 42"),
        ("attest_human_review", "true"),
    ]
}

#[tokio::test]
async fn a_member_reports_in_the_dashboard_and_another_member_checks_it() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let reporter = app.registry_member().await;
    let checker = app.registry_member().await;
    let reporting = dashboard
        .signed_in(&app.create_user(reporter.account, false).await)
        .await;
    let checking = dashboard
        .signed_in(&app.create_user(checker.account, false).await)
        .await;

    let created = reporting
        .post(
            "/registry",
            "/registry/report",
            &report("Jane.Saoirse+x@GoogleMail.com"),
        )
        .await;
    let hash = email_hash("janesaoirse@gmail.com");
    let refreshed = reporting
        .post("/registry", "/registry/report", &report(&hash))
        .await;
    let matched = checking
        .post(
            "/registry",
            "/registry/check",
            &[("identifier", "JANE.SAOIRSE@gmail.com")],
        )
        .await;
    let unmatched = checking
        .post(
            "/registry",
            "/registry/check",
            &[("identifier", "someone.else@example.com")],
        )
        .await;
    let own = reporting
        .post(
            "/registry",
            "/registry/check",
            &[("identifier", "janesaoirse@gmail.com")],
        )
        .await;

    assert_eq!(created.status(), 303);
    assert_eq!(location(&created), "/registry?reported=created");
    assert_eq!(location(&refreshed), "/registry?reported=refreshed");
    assert!(reporting
        .page("/registry?reported=refreshed")
        .await
        .contains("your entry was refreshed"));
    let listed: serde_json::Value = app
        .get("/api/v1/registry/entries", &reporter.key)
        .await
        .json()
        .await
        .unwrap();
    let entries = listed["entries"].as_array().unwrap();
    assert_eq!(
        entries.len(),
        1,
        "one entry, reported then refreshed: {listed}"
    );
    assert_eq!(entries[0]["member_case_ref"], "case 42");
    assert_eq!(matched.status(), 200);
    let matched = matched.text().await.unwrap();
    assert!(matched.contains(r#"data-match="true""#), "{matched}");
    assert_eq!(matched.matches(r#"data-testid="signal-row""#).count(), 1);
    assert!(matched.contains("<code>payment_fraud</code>"));
    assert!(
        !matched.contains("case 42"),
        "a check never shows another member's case"
    );
    let unmatched = unmatched.text().await.unwrap();
    assert!(unmatched.contains(r#"data-match="false""#), "{unmatched}");
    let own = own.text().await.unwrap();
    assert!(
        own.contains(r#"data-match="false""#),
        "own entries never count: {own}"
    );
}

#[tokio::test]
async fn bad_reports_and_checks_are_explained_in_the_page_and_outsiders_get_403() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let member = app.registry_member().await;
    let visitor = dashboard
        .signed_in(&app.create_user(member.account, false).await)
        .await;
    let outsider = dashboard
        .signed_in(&app.create_user(app.create_account().await, false).await)
        .await;
    let upper_hash = email_hash("a@example.com").to_uppercase();

    let bad_hash = visitor
        .post(
            "/registry",
            "/registry/check",
            &[("identifier", upper_hash.as_str())],
        )
        .await;
    let bad_email = visitor
        .post(
            "/registry",
            "/registry/report",
            &[
                ("identifier", "two@at@signs"),
                ("category", "ban_evasion"),
                ("member_case_ref", "case 7"),
                ("attest_human_review", "true"),
            ],
        )
        .await;
    let no_attest = visitor
        .post(
            "/registry",
            "/registry/report",
            &[
                ("identifier", "a@example.com"),
                ("category", "ban_evasion"),
                ("member_case_ref", "case 7"),
            ],
        )
        .await;
    let email_in_case = visitor
        .post(
            "/registry",
            "/registry/report",
            &[
                ("identifier", "a@example.com"),
                ("category", "ban_evasion"),
                ("member_case_ref", "see a@example.com"),
                ("attest_human_review", "true"),
            ],
        )
        .await;
    let outsider_check = outsider
        .post("/", "/registry/check", &[("identifier", "a@example.com")])
        .await;
    let outsider_report = outsider
        .post(
            "/",
            "/registry/report",
            &[
                ("identifier", "a@example.com"),
                ("category", "ban_evasion"),
                ("member_case_ref", "case 7"),
                ("attest_human_review", "true"),
            ],
        )
        .await;

    assert_eq!(bad_hash.status(), 400);
    let bad_hash = bad_hash.text().await.unwrap();
    assert!(bad_hash.contains(r#"id="check-error""#), "{bad_hash}");
    assert!(bad_hash.contains("64 lowercase hexadecimal"), "{bad_hash}");
    assert!(!bad_hash.contains(&upper_hash), "the value is never echoed");
    assert_eq!(bad_email.status(), 400);
    let bad_email = bad_email.text().await.unwrap();
    assert!(
        bad_email.contains("cannot be normalised: an email address needs exactly one"),
        "{bad_email}"
    );
    assert!(
        bad_email.contains(r#"value="case 7""#),
        "the form keeps its values"
    );
    assert_eq!(no_attest.status(), 400);
    assert!(no_attest
        .text()
        .await
        .unwrap()
        .contains("reviewed and upheld"));
    assert_eq!(email_in_case.status(), 400);
    assert_eq!(outsider_check.status(), 403);
    assert_eq!(outsider_report.status(), 403);
    assert!(outsider_check
        .text()
        .await
        .unwrap()
        .contains("vetted Shared Registry members only"));
    let listed: serde_json::Value = app
        .get("/api/v1/registry/entries", &member.key)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        listed["entries"],
        serde_json::json!([]),
        "nothing was reported"
    );
}
