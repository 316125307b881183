//! The policy page: custom categories and blocklist terms, checked by the api's rules.

use moderation_tests::spawn_app;

#[tokio::test]
async fn categories_and_terms_are_added_toggled_and_removed() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let account = app.create_account().await;
    let user = app.create_user(account, false).await;
    let key = app
        .create_key(
            account,
            Some(&[moderation_shared::domain::Scope::SettingsManage]),
        )
        .await;
    let visitor = dashboard.signed_in(&user).await;

    let empty = visitor.page("/policy").await;
    let created = visitor
        .post(
            "/policy",
            "/policy/categories",
            &[
                ("name", "gambling"),
                ("description", "Betting and casinos"),
                ("keywords", "casino\nbet, casino"),
            ],
        )
        .await;
    let bad_name = visitor
        .post(
            "/policy",
            "/policy/categories",
            &[("name", "Not A Slug"), ("description", "x")],
        )
        .await;
    let added = visitor
        .post("/policy", "/policy/blocklist", &[("terms", "foo\nbar")])
        .await;
    let page = visitor.page("/policy").await;

    assert!(empty.contains("No custom categories.") && empty.contains("No terms of your own."));
    assert_eq!(created.status(), 303);
    assert_eq!(bad_name.status(), 400);
    assert_eq!(added.status(), 303);
    assert!(
        page.contains("<code>gambling</code>") && page.contains("casino, bet"),
        "{page}"
    );
    assert_eq!(page.matches(r#"data-testid="term""#).count(), 2);
    let api: serde_json::Value = app
        .get("/api/v1/blocklist", &key)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(api["terms"], serde_json::json!(["bar", "foo"]));

    let removed = visitor
        .post("/policy", "/policy/blocklist/remove", &[("term", "foo")])
        .await;
    assert_eq!(removed.status(), 303);
    assert_eq!(
        visitor
            .page("/policy")
            .await
            .matches(r#"data-testid="term""#)
            .count(),
        1
    );
}

#[tokio::test]
async fn members_see_and_revoke_their_registry_entries_and_others_cannot() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let member = app.registry_member().await;
    let entry = app
        .registry_reported(
            &member.key,
            &moderation_tests::registry::email_hash("fraud@example.com"),
            "payment_fraud",
        )
        .await;
    let entry_id = entry["entry_id"].as_str().unwrap().to_owned();
    let visitor = dashboard
        .signed_in(&app.create_user(member.account, false).await)
        .await;
    let outsider = dashboard
        .signed_in(&app.create_user(app.create_account().await, false).await)
        .await;

    let listed = visitor.page("/registry").await;
    let refused = outsider.get("/registry").await;
    let revoked = visitor
        .post(
            "/registry",
            &format!("/registry/{entry_id}/revoke"),
            &[("reason", "reported by mistake")],
        )
        .await;

    assert!(
        listed.contains(&entry_id) && listed.contains("payment_fraud"),
        "{listed}"
    );
    assert_eq!(refused.status(), 403);
    assert!(!outsider.page("/").await.contains(r#"href="/registry""#));
    assert_eq!(revoked.status(), 303);
    let after = visitor.page("/registry").await;
    assert!(after.contains("revoked (reported by mistake)"), "{after}");
}
