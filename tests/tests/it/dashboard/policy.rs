//! The policy page: custom categories and blocklist terms, checked by the api's rules.

use moderation_tests::spawn_app;

#[tokio::test]
async fn categories_and_terms_are_added_toggled_and_removed() {
    let app = spawn_app().await;
    let (account, visitor) = app.signed_in_dashboard(false).await;
    let key = app
        .create_key(
            account,
            Some(&[moderation_shared::domain::Scope::SettingsManage]),
        )
        .await;

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

#[tokio::test]
async fn a_categorys_description_and_keywords_are_edited_and_errors_stay_in_the_form() {
    let app = spawn_app().await;
    let (account, visitor) = app.signed_in_dashboard(false).await;
    let key = app
        .create_key(
            account,
            Some(&[moderation_shared::domain::Scope::SettingsManage]),
        )
        .await;
    visitor
        .post(
            "/policy",
            "/policy/categories",
            &[
                ("name", "gambling"),
                ("description", "Betting"),
                ("keywords", "bet"),
            ],
        )
        .await;
    let categories = |key| {
        let app = &app;
        async move {
            let body: serde_json::Value = app
                .get("/api/v1/custom-categories", key)
                .await
                .json()
                .await
                .unwrap();
            body["categories"][0].clone()
        }
    };
    let id = categories(&key).await["id"].as_str().unwrap().to_owned();
    let edit = format!("/policy/categories/{id}/edit");
    let too_many = (0..=moderation_shared::policy_input::MAX_KEYWORDS)
        .map(|i| format!("kw{i}"))
        .collect::<Vec<_>>()
        .join("\n");

    let edited = visitor
        .post(
            "/policy",
            &edit,
            &[
                ("description", "Betting, casinos and lotteries"),
                ("keywords", "casino\nlottery, casino"),
            ],
        )
        .await;
    let blank = visitor
        .post(
            "/policy",
            &edit,
            &[("description", "   "), ("keywords", "keep me")],
        )
        .await;
    let over = visitor
        .post(
            "/policy",
            &edit,
            &[("description", "ok"), ("keywords", &too_many)],
        )
        .await;
    let unknown = visitor
        .post(
            "/policy",
            &format!("/policy/categories/{}/edit", uuid::Uuid::new_v4()),
            &[("description", "x")],
        )
        .await;

    assert_eq!(edited.status(), 303);
    let stored = categories(&key).await;
    assert_eq!(stored["description"], "Betting, casinos and lotteries");
    assert_eq!(stored["keywords"], serde_json::json!(["casino", "lottery"]));
    assert_eq!(stored["enabled"], true, "an edit leaves the state alone");
    assert_eq!(blank.status(), 400);
    let blank = blank.text().await.unwrap();
    assert!(
        blank.contains(&format!(r#"id="edit-error-{id}""#)),
        "{blank}"
    );
    assert!(
        blank.contains("Description must be 1 to 2000 characters"),
        "{blank}"
    );
    assert!(
        blank.contains(">keep me</textarea>"),
        "the form keeps what was typed"
    );
    assert!(
        blank.contains("<details class=\"edit\" open>"),
        "the refused form is open"
    );
    assert_eq!(over.status(), 400);
    assert!(over.text().await.unwrap().contains("keywords"));
    assert_eq!(unknown.status(), 404);
    assert_eq!(
        categories(&key).await["description"],
        "Betting, casinos and lotteries",
        "refused edits change nothing"
    );
}
