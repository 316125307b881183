//! The policy versions page: drafts made by its form with the api's checks, their diff and
//! impact, activate, shadow and rollback through its forms, each recorded in the audit log with
//! the signed-in user as actor.

use moderation_shared::{
    db::{
        audit_events::{self, AuditEvent, AuditFilter},
        policy_versions,
    },
    domain::{AccountId, ActorType, AuditAction, Scope},
};
use moderation_tests::{
    dashboard::{location, Visitor},
    spawn_app, TestApp,
};
use serde_json::json;

/// A signed-in visitor of a new account, with the account and the user's id.
async fn signed_in(app: &TestApp) -> (AccountId, uuid::Uuid, Visitor) {
    let dashboard = app.spawn_dashboard().await;
    let account = app.create_account().await;
    let user = app.create_user(account, false).await;
    (account, user.user_id, dashboard.signed_in(&user).await)
}

/// Every version of `account` as (number, status), newest first.
async fn versions(app: &TestApp, account: AccountId) -> Vec<(i32, &'static str)> {
    let client = app.db.pool.get().await.unwrap();
    policy_versions::list(&client, account)
        .await
        .unwrap()
        .iter()
        .map(|v| (v.version, v.status.as_str()))
        .collect()
}

/// The policy events of `account`, newest first.
async fn policy_events(app: &TestApp, account: AccountId) -> Vec<AuditEvent> {
    let client = app.db.pool.get().await.unwrap();
    audit_events::page(&client, account, &AuditFilter::default(), 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action.as_str().starts_with("policy."))
        .collect()
}

/// Posts the draft form of the policy page with `fields` (rows left out keep the active
/// version's rule, as an untouched row of the form does), against version 1 with a sample
/// rate of 0 unless `fields` say otherwise.
async fn post_draft(visitor: &Visitor, fields: &[(&str, &str)]) -> reqwest::Response {
    let mut all = fields.to_vec();
    for default in [("against", "1"), ("sample_rate", "0")] {
        if !fields.iter().any(|(name, _)| *name == default.0) {
            all.push(default);
        }
    }
    visitor
        .post("/policy/versions", "/policy/versions", &all)
        .await
}

/// A row of the violence category: enforce at `block_at`, no review band.
fn violence(block_at: &str) -> [(&'static str, &str); 3] {
    [
        ("mode.violence", "enforce"),
        ("block_at.violence", block_at),
        ("review_at.violence", ""),
    ]
}

#[tokio::test]
async fn a_draft_made_by_the_form_is_listed_with_its_diff_and_recorded_with_the_user() {
    let app = spawn_app().await;
    let (account, user_id, visitor) = signed_in(&app).await;

    let before = visitor.page("/policy/versions").await;
    let mut fields = violence("0.7").to_vec();
    fields.push(("note", "stricter on violence"));
    let created = post_draft(&visitor, &fields).await;
    let list = visitor.page("/policy/versions").await;
    let detail = visitor.page("/policy/versions/2").await;

    assert!(
        before.contains(r#"data-testid="version-row" data-version="1" data-status="active""#),
        "{before}"
    );
    assert!(
        before.contains(r#"name="block_at.violence""#) && before.contains(r#"value="0.5""#),
        "the form is filled from the active version"
    );
    assert_eq!(created.status(), 303);
    assert_eq!(location(&created), "/policy/versions/2");
    assert_eq!(versions(&app, account).await, [(2, "draft"), (1, "active")]);
    assert!(
        list.contains(r#"data-testid="version-row" data-version="2" data-status="draft""#)
            && list.contains("stricter on violence"),
        "{list}"
    );
    assert!(
        list.contains(r#"data-testid="diff-row" data-category="violence""#)
            && list.contains("enforce, block at 0.5 → enforce, block at 0.7"),
        "{list}"
    );
    assert_eq!(list.matches(r#"data-testid="diff-row""#).count(), 1);
    assert!(
        detail.contains(r#"data-testid="version-status">draft<"#)
            && detail.contains("<button type=\"submit\">Activate</button>")
            && detail.contains("Run as shadow"),
        "{detail}"
    );
    assert!(
        detail.contains(r#"data-testid="impact-jobs">0<"#),
        "{detail}"
    );
    let events = policy_events(&app, account).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].action, AuditAction::PolicyVersionCreated);
    assert_eq!(
        (events[0].actor_type, events[0].actor_id),
        (ActorType::User, Some(user_id))
    );
    assert_eq!(events[0].target_id.as_deref(), Some("2"));
    assert_eq!(
        events[0].detail["diff"]["categories"]["violence"]["to"]["block_at"],
        json!(0.7)
    );
}

#[tokio::test]
async fn a_bad_draft_is_explained_in_its_form_and_nothing_changes() {
    let app = spawn_app().await;
    let (account, _, visitor) = signed_in(&app).await;
    let long_note = "n".repeat(501);

    let out_of_range = post_draft(&visitor, &violence("1.5")).await;
    let band = post_draft(
        &visitor,
        &[
            ("mode.violence", "enforce"),
            ("block_at.violence", "0.5"),
            ("review_at.violence", "0.6"),
        ],
    )
    .await;
    let word = post_draft(&visitor, &violence("high")).await;
    let mode = post_draft(
        &visitor,
        &[("mode.hate", "block"), ("block_at.hate", "0.5")],
    )
    .await;
    let rate = post_draft(&visitor, &[("sample_rate", "1.5")]).await;
    let note = post_draft(&visitor, &[("note", &long_note)]).await;
    let stale = visitor
        .post(
            "/policy/versions",
            "/policy/versions",
            &[("against", "7"), ("sample_rate", "0")],
        )
        .await;

    for (response, message) in [
        (
            out_of_range,
            "categories.violence.block_at must be above 0 and at most 1, got 1.5",
        ),
        (
            band,
            "categories.violence.review_at (0.6) must be below block_at (0.5)",
        ),
        (
            word,
            "categories.violence.block_at must be a number, got &#34;high&#34;",
        ),
        (mode, "categories.hate.mode must be enforce, observe or off"),
        (rate, "review.sample_rate must be from 0 to 1"),
        (note, "note must be 1 to 500 characters"),
        (stale, "Version 1 was activated after this form was shown."),
    ] {
        assert_eq!(response.status(), 400, "{message}");
        let page = response.text().await.unwrap();
        assert!(
            page.contains(r#"id="draft-error""#) && page.contains(message),
            "{message}: {page}"
        );
    }
    assert_eq!(versions(&app, account).await, [(1, "active")]);
    assert!(policy_events(&app, account).await.is_empty());
}

#[tokio::test]
async fn a_refused_draft_keeps_what_was_typed() {
    let app = spawn_app().await;
    let (_, _, visitor) = signed_in(&app).await;

    let mut fields = violence("1.5").to_vec();
    fields.push(("note", "my note"));
    let refused = post_draft(&visitor, &fields).await.text().await.unwrap();

    assert!(
        refused.contains(r#"name="block_at.violence" aria-label="Block at, violence" type="number" min="0" max="1" step="any" required value="1.5""#),
        "{refused}"
    );
    assert!(refused.contains(r#"value="my note""#), "{refused}");
}

#[tokio::test]
async fn forms_without_the_csrf_token_are_refused_and_change_nothing() {
    let app = spawn_app().await;
    let (account, _, visitor) = signed_in(&app).await;
    post_draft(&visitor, &violence("0.7")).await;

    for path in [
        "/policy/versions",
        "/policy/versions/2/activate",
        "/policy/versions/2/shadow",
        "/policy/shadow/stop",
    ] {
        let res = visitor
            .post_raw(
                path,
                &[("csrf", "0000"), ("against", "1"), ("sample_rate", "0")],
            )
            .await;
        assert_eq!(res.status(), 403, "{path}");
    }

    assert_eq!(versions(&app, account).await, [(2, "draft"), (1, "active")]);
    assert_eq!(policy_events(&app, account).await.len(), 1);
}

#[tokio::test]
async fn shadow_activate_and_rollback_through_the_forms_are_recorded_with_the_user_as_actor() {
    let app = spawn_app().await;
    let (account, user_id, visitor) = signed_in(&app).await;
    post_draft(&visitor, &violence("0.7")).await;
    let act = |path: &'static str| {
        let visitor = &visitor;
        async move {
            let res = visitor.post("/policy/versions", path, &[]).await;
            assert_eq!(res.status(), 303, "{path}");
            location(&res)
        }
    };

    let shadowed = act("/policy/versions/2/shadow").await;
    let while_shadow = versions(&app, account).await;
    let list = visitor.page("/policy/versions").await;
    let stopped = act("/policy/shadow/stop").await;
    let after_stop = versions(&app, account).await;
    act("/policy/versions/2/shadow").await;
    let activated = act("/policy/versions/2/activate").await;
    let after_activate = versions(&app, account).await;
    let retired = visitor.page("/policy/versions/1").await;
    let rolled_back = act("/policy/versions/1/activate").await;
    let again = act("/policy/versions/1/activate").await;
    let on_the_active = visitor
        .post("/policy/versions", "/policy/versions/1/shadow", &[])
        .await;

    assert_eq!(shadowed, "/policy/versions/2");
    assert_eq!(while_shadow, [(2, "shadow"), (1, "active")]);
    assert!(
        list.contains(r#"data-testid="shadow-version">"#) && list.contains("Stop shadow"),
        "{list}"
    );
    assert_eq!(stopped, "/policy/versions");
    assert_eq!(after_stop, [(2, "draft"), (1, "active")]);
    assert_eq!(activated, "/policy/versions/2");
    assert_eq!(
        after_activate,
        [(2, "active"), (1, "retired")],
        "the shadow slot empties"
    );
    assert!(retired.contains("Roll back"), "{retired}");
    assert_eq!(rolled_back, "/policy/versions/1");
    assert_eq!(again, "/policy/versions/1", "activating the active one");
    assert_eq!(
        versions(&app, account).await,
        [(2, "retired"), (1, "active")]
    );
    assert_eq!(on_the_active.status(), 400);
    let events = policy_events(&app, account).await;
    let seen: Vec<(&str, Option<&str>)> = events
        .iter()
        .map(|e| (e.action.as_str(), e.target_id.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            ("policy.activated", Some("1")),
            ("policy.activated", Some("2")),
            ("policy.shadow_started", Some("2")),
            ("policy.shadow_stopped", Some("2")),
            ("policy.shadow_started", Some("2")),
            ("policy.version_created", Some("2")),
        ],
        "activating the active version records nothing"
    );
    assert!(events
        .iter()
        .all(|e| e.actor_type == ActorType::User && e.actor_id == Some(user_id)));
    assert_eq!(events[0].detail["previous"], json!(2));
    assert_eq!(
        events[0].detail["diff"]["categories"]["violence"]["to"]["block_at"],
        json!(0.5),
        "the rollback's diff"
    );
    assert_eq!(events[1].detail["previous"], json!(1));
    assert_eq!(events[2].detail["against_active"], json!(1));
}

#[tokio::test]
async fn another_accounts_version_is_not_found() {
    let app = spawn_app().await;
    let (_, _, owner) = signed_in(&app).await;
    let (other, _, visitor) = signed_in(&app).await;
    post_draft(&owner, &violence("0.7")).await;

    let page = visitor.get("/policy/versions/2").await;
    let garbage = visitor.get("/policy/versions/two").await;
    let activate = visitor
        .post("/policy/versions", "/policy/versions/2/activate", &[])
        .await;
    let shadow = visitor
        .post("/policy/versions", "/policy/versions/2/shadow", &[])
        .await;

    assert_eq!(page.status(), 404);
    assert_eq!(garbage.status(), 404);
    assert_eq!(activate.status(), 404);
    assert_eq!(shadow.status(), 404);
    assert_eq!(versions(&app, other).await, [(1, "active")]);
    assert!(policy_events(&app, other).await.is_empty());
}

#[tokio::test]
async fn the_impact_of_a_draft_is_counted_over_stored_jobs_as_the_api_counts_it() {
    let app = spawn_app().await;
    let (account, _, visitor) = signed_in(&app).await;
    let scoring = app
        .create_key(account, Some(&[Scope::ModeratePrompt]))
        .await;
    let stricter = app
        .finished_with_scores(&scoring, false, false, &[("violence", 400), ("hate", 10)])
        .await;
    let laxer = app
        .finished_with_scores(&scoring, true, false, &[("hate", 600), ("violence", 10)])
        .await;
    app.finished_with_scores(&scoring, true, true, &[("hate", 100)])
        .await;
    app.finished_with_scores(&scoring, false, false, &[]).await;
    app.finished_with_scores(&scoring, false, false, &[("sexual", 450)])
        .await;
    let key = app
        .create_key(account, Some(&[Scope::SettingsManage]))
        .await;

    post_draft(
        &visitor,
        &[
            ("mode.violence", "enforce"),
            ("block_at.violence", "0.3"),
            ("mode.hate", "enforce"),
            ("block_at.hate", "0.9"),
            ("mode.sexual", "enforce"),
            ("block_at.sexual", "0.5"),
            ("review_at.sexual", "0.4"),
        ],
    )
    .await;
    let page = visitor.page("/policy/versions/2").await;
    let api: serde_json::Value = app
        .get("/api/v1/policy/versions/2/impact", &key)
        .await
        .json()
        .await
        .unwrap();

    for (testid, value) in [
        ("impact-jobs", 5),
        ("impact-rescored", 4),
        ("impact-pass-to-reject", 1),
        ("impact-reject-to-pass", 1),
        ("impact-to-review", 1),
    ] {
        assert!(
            page.contains(&format!(r#"data-testid="{testid}">{value}<"#)),
            "{testid}: {page}"
        );
    }
    assert_eq!(
        (api["jobs"].clone(), api["pass_to_reject"].clone()),
        (json!(5), json!(1))
    );
    assert!(page.contains(r#"data-testid="impact-category" data-category="violence""#));
    assert!(page.contains(r#"data-testid="impact-category" data-category="hate""#));
    assert!(
        page.contains(&format!(
            r#"<a href="/jobs/{stricter}" data-testid="example-job""#
        )),
        "{page}"
    );
    assert!(page.contains(&format!(
        r#"<a href="/jobs/{laxer}" data-testid="example-job""#
    )));
}
