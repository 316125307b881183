//! Policy versions (contract 13): drafts, activation, rollback, the shadow, and the refusals.

use moderation_tests::{assert_error, spawn_app};
use reqwest::Method;
use serde_json::{json, Value};

use super::{create_category, send, settings_key};

async fn create(
    app: &moderation_tests::TestApp,
    key: &moderation_tests::TestKey,
    body: Value,
) -> Value {
    let response = send(
        app,
        Method::POST,
        "/api/v1/policy/versions",
        key,
        Some(&body),
    )
    .await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    response.json().await.unwrap()
}

async fn post(
    app: &moderation_tests::TestApp,
    key: &moderation_tests::TestKey,
    path: &str,
) -> reqwest::Response {
    send(app, Method::POST, path, key, None).await
}

async fn overview(app: &moderation_tests::TestApp, key: &moderation_tests::TestKey) -> Value {
    let response = send(app, Method::GET, "/api/v1/policy", key, None).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test]
async fn every_account_starts_with_version_1_active_holding_the_service_defaults() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;

    let policy = overview(&app, &key).await;
    let version = send(&app, Method::GET, "/api/v1/policy/versions/1", &key, None).await;
    let version: Value = version.json().await.unwrap();

    assert_eq!(policy["active"], 1);
    assert_eq!(policy["shadow"], Value::Null);
    assert_eq!(policy["versions"].as_array().unwrap().len(), 1);
    assert_eq!(version["status"], "active");
    for category in ["harassment", "hate", "violence", "self_harm", "sexual"] {
        assert_eq!(
            version["categories"][category],
            json!({"mode": "enforce", "block_at": 0.5, "review_at": null}),
            "{category}"
        );
    }
    assert_eq!(version["categories"]["nsfw"]["block_at"], 0.8);
    assert_eq!(version["review"], json!({"sample_rate": 0.0}));
}

#[tokio::test]
async fn a_draft_takes_the_categories_given_whole_and_copies_the_rest_from_the_active_one() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    create_category(&app, &key, "gambling").await;

    let draft = create(
        &app,
        &key,
        json!({
            "categories": {
                "violence": {"mode": "enforce", "block_at": 0.7, "review_at": 0.4},
                "sexual": {"mode": "observe", "block_at": 0.9},
                "custom.gambling": {"mode": "enforce", "block_at": 0.6}
            },
            "review": {"sample_rate": 0.1},
            "note": "Stricter on violence"
        }),
    )
    .await;

    assert_eq!(draft["version"], 2);
    assert_eq!(draft["status"], "draft");
    assert_eq!(draft["note"], "Stricter on violence");
    assert_eq!(draft["activated_at"], Value::Null);
    assert_eq!(
        draft["categories"]["violence"],
        json!({"mode": "enforce", "block_at": 0.7, "review_at": 0.4})
    );
    assert_eq!(draft["categories"]["sexual"]["mode"], "observe");
    assert_eq!(draft["categories"]["hate"]["block_at"], 0.5, "copied");
    assert_eq!(draft["categories"]["custom.gambling"]["block_at"], 0.6);
    assert_eq!(draft["review"]["sample_rate"], 0.1);
    assert_eq!(
        overview(&app, &key).await["active"],
        1,
        "a draft does not act"
    );
}

#[tokio::test]
async fn bad_versions_are_refused_with_400_and_nothing_is_made() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let rule = |block_at: Value, review_at: Value| json!({"categories": {"hate": {"mode": "enforce", "block_at": block_at, "review_at": review_at}}});
    let bad = [
        rule(json!(0), Value::Null),
        rule(json!(1.0001), Value::Null),
        rule(json!(-0.5), Value::Null),
        rule(json!(0.5), json!(0.5)),
        rule(json!(0.5), json!(0.6)),
        rule(json!(0.5), json!(0)),
        rule(json!("high"), Value::Null),
        json!({"categories": {"underage": {"mode": "enforce", "block_at": 0.5}}}),
        json!({"categories": {"custom.nothing": {"mode": "enforce", "block_at": 0.5}}}),
        json!({"categories": {"hate": {"mode": "maybe", "block_at": 0.5}}}),
        json!({"categories": {"hate": {"mode": "enforce"}}}),
        json!({"categories": {"hate": {"mode": "enforce", "block_at": 0.5, "colour": "red"}}}),
        json!({"categories": {"hate": null}}),
        json!({"review": {"sample_rate": 1.01}}),
        json!({"review": {"sample_rate": -0.01}}),
        json!({"note": ""}),
        json!({"note": "x".repeat(501)}),
        json!({"threshold": 0.5}),
    ];
    for body in bad {
        let response = send(
            &app,
            Method::POST,
            "/api/v1/policy/versions",
            &key,
            Some(&body),
        )
        .await;
        assert_error(response, 400, "INVALID_REQUEST").await;
    }

    // At the edges: block_at 1, review_at just below it, a note of 500, a rate of 0 and 1.
    for body in [
        rule(json!(1.0), json!(0.999)),
        json!({"note": "x".repeat(500), "review": {"sample_rate": 1.0}}),
        json!({"review": {"sample_rate": 0.0}}),
    ] {
        create(&app, &key, body).await;
    }
    assert_eq!(
        overview(&app, &key).await["versions"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
}

#[tokio::test]
async fn activating_retires_the_active_version_and_activating_a_retired_one_rolls_back() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    create(&app, &key, json!({"note": "two"})).await;

    let activated = post(&app, &key, "/api/v1/policy/versions/2/activate").await;
    assert_eq!(activated.status(), 200);
    let activated: Value = activated.json().await.unwrap();
    assert_eq!(activated["status"], "active");
    assert!(activated["activated_at"].is_string());
    let first: Value = send(&app, Method::GET, "/api/v1/policy/versions/1", &key, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first["status"], "retired");

    let again = post(&app, &key, "/api/v1/policy/versions/2/activate").await;
    assert_eq!(
        again.status(),
        200,
        "activating the active version changes nothing"
    );
    assert_eq!(overview(&app, &key).await["active"], 2);

    let rollback = post(&app, &key, "/api/v1/policy/versions/1/activate").await;
    assert_eq!(rollback.status(), 200);
    let policy = overview(&app, &key).await;
    assert_eq!(policy["active"], 1);
    let statuses: Vec<(i64, &str)> = policy["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["version"].as_i64().unwrap(),
                v["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(statuses, [(2, "retired"), (1, "active")]);
}

#[tokio::test]
async fn one_shadow_at_a_time_and_activating_it_empties_the_slot() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    create(&app, &key, json!({"note": "two"})).await;
    create(&app, &key, json!({"note": "three"})).await;

    assert_eq!(
        post(&app, &key, "/api/v1/policy/versions/2/shadow")
            .await
            .status(),
        200
    );
    assert_eq!(overview(&app, &key).await["shadow"], 2);
    assert_eq!(
        post(&app, &key, "/api/v1/policy/versions/3/shadow")
            .await
            .status(),
        200
    );
    let policy = overview(&app, &key).await;
    assert_eq!(policy["shadow"], 3);
    let two: Value = send(&app, Method::GET, "/api/v1/policy/versions/2", &key, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        two["status"], "draft",
        "the earlier shadow went back to draft"
    );

    let active_as_shadow = post(&app, &key, "/api/v1/policy/versions/1/shadow").await;
    assert_error(active_as_shadow, 409, "CONFLICT").await;

    assert_eq!(
        post(&app, &key, "/api/v1/policy/versions/3/activate")
            .await
            .status(),
        200
    );
    let policy = overview(&app, &key).await;
    assert_eq!(
        (policy["active"].clone(), policy["shadow"].clone()),
        (json!(3), Value::Null)
    );

    assert_eq!(
        post(&app, &key, "/api/v1/policy/versions/2/shadow")
            .await
            .status(),
        200
    );
    let stopped = send(&app, Method::DELETE, "/api/v1/policy/shadow", &key, None).await;
    assert_eq!(stopped.status(), 204);
    assert_eq!(overview(&app, &key).await["shadow"], Value::Null);
    let stopped_again = send(&app, Method::DELETE, "/api/v1/policy/shadow", &key, None).await;
    assert_eq!(stopped_again.status(), 204);
}

#[tokio::test]
async fn another_accounts_version_or_an_unknown_one_is_404_and_a_bad_number_400() {
    let app = spawn_app().await;
    let owner = settings_key(&app).await;
    let stranger = settings_key(&app).await;
    create(&app, &owner, json!({"note": "mine"})).await;

    for path in [
        "/api/v1/policy/versions/2",
        "/api/v1/policy/versions/2/impact",
        "/api/v1/policy/versions/0",
    ] {
        let response = send(&app, Method::GET, path, &stranger, None).await;
        assert_error(response, 404, "NOT_FOUND").await;
    }
    for path in [
        "/api/v1/policy/versions/2/activate",
        "/api/v1/policy/versions/2/shadow",
    ] {
        assert_error(post(&app, &stranger, path).await, 404, "NOT_FOUND").await;
    }
    let bad = send(
        &app,
        Method::GET,
        "/api/v1/policy/versions/two",
        &owner,
        None,
    )
    .await;
    assert_error(bad, 400, "INVALID_REQUEST").await;
    assert_eq!(overview(&app, &stranger).await["active"], 1);
    assert_eq!(overview(&app, &owner).await["active"], 1);
}

#[tokio::test]
async fn concurrent_activations_run_one_after_the_other_and_leave_one_active_version() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    for n in 2..=6 {
        create(&app, &key, json!({"note": format!("v{n}")})).await;
    }

    let activations = (2..=6).map(|n| {
        let (app, key) = (&app, &key);
        async move { post(app, key, &format!("/api/v1/policy/versions/{n}/activate")).await }
    });
    let answers = futures_util::future::join_all(activations).await;

    assert!(answers.iter().all(|a| a.status() == 200));
    let policy = overview(&app, &key).await;
    let active: Vec<&Value> = policy["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["status"] == "active")
        .collect();
    assert_eq!(active.len(), 1, "{policy}");
    assert_eq!(active[0]["version"], policy["active"]);
    let client = app.db.pool.get().await.unwrap();
    let activations: i64 = client
        .query_one(
            "SELECT count(*) FROM audit_events WHERE account_id = $1 AND action = 'policy.activated'",
            &[&key.account.0],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        activations, 5,
        "each switch saw the one before it and was recorded"
    );
}
