//! The audit log (contract 13): an event per change, in the change's transaction, newest
//! first by cursor; Postgres refuses to change or remove one.

use moderation_shared::domain::Scope;
use moderation_tests::{assert_error, spawn_app, spawn_app_with, TestApp, TestKey};
use reqwest::Method;
use serde_json::{json, Value};

use super::{create_category, send};

/// A key with every scope the audited endpoints need.
async fn owner(app: &TestApp) -> TestKey {
    let key = app
        .account_with_key(Some(&[Scope::SettingsManage, Scope::WebhookManage]))
        .await;
    app.lift_rate_limit(key.account).await;
    key
}

async fn events(app: &TestApp, key: &TestKey, query: &str) -> Value {
    let response = send(
        app,
        Method::GET,
        &format!("/api/v1/audit{query}"),
        key,
        None,
    )
    .await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// The actions of a page, without those of the harness's own set-up (the key it issued and
/// the rate limit it lifted, recorded as an operator's).
fn actions(page: &Value) -> Vec<String> {
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["actor"]["type"] != "operator")
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn every_change_through_the_api_is_recorded_newest_first_with_the_key_as_actor() {
    let app =
        spawn_app_with(|s| s.url_guard = moderation_shared::url_guard::UrlGuard::system(true))
            .await;
    let key = owner(&app).await;
    let category = create_category(&app, &key, "gambling").await;
    let id = category["id"].as_str().unwrap();
    send(
        &app,
        Method::PATCH,
        &format!("/api/v1/custom-categories/{id}"),
        &key,
        Some(&json!({"enabled": false})),
    )
    .await;
    send(
        &app,
        Method::POST,
        "/api/v1/blocklist",
        &key,
        Some(&json!({"terms": ["zorp"]})),
    )
    .await;
    send(
        &app,
        Method::DELETE,
        "/api/v1/blocklist",
        &key,
        Some(&json!({"terms": ["zorp"]})),
    )
    .await;
    let created = send(
        &app,
        Method::POST,
        "/api/v1/policy/versions",
        &key,
        Some(&json!({"categories": {"violence": {"mode": "enforce", "block_at": 0.7}}})),
    )
    .await;
    assert_eq!(created.status(), 201);
    send(
        &app,
        Method::POST,
        "/api/v1/policy/versions/2/shadow",
        &key,
        None,
    )
    .await;
    send(&app, Method::DELETE, "/api/v1/policy/shadow", &key, None).await;
    send(
        &app,
        Method::POST,
        "/api/v1/policy/versions/2/activate",
        &key,
        None,
    )
    .await;
    let set = send(
        &app,
        Method::POST,
        "/api/v1/webhook/register",
        &key,
        Some(&json!({"url": "https://127.0.0.1:9/hook"})),
    )
    .await;
    assert_eq!(set.status(), 200);
    send(&app, Method::DELETE, "/api/v1/webhook/register", &key, None).await;
    send(
        &app,
        Method::POST,
        "/api/v1/me/webhook-secrets/rotate",
        &key,
        None,
    )
    .await;
    send(
        &app,
        Method::DELETE,
        &format!("/api/v1/custom-categories/{id}"),
        &key,
        None,
    )
    .await;

    let page = events(&app, &key, "?limit=12").await;

    assert_eq!(
        actions(&page),
        [
            "custom_category.changed",
            "webhook.secret_rotated",
            "webhook.url_cleared",
            "webhook.url_set",
            "policy.activated",
            "policy.shadow_stopped",
            "policy.shadow_started",
            "policy.version_created",
            "blocklist.changed",
            "blocklist.changed",
            "custom_category.changed",
            "custom_category.changed",
        ]
    );
    for event in page["events"].as_array().unwrap() {
        assert_eq!(event["actor"], json!({"type": "key", "id": key.key_id}));
        assert!(event["event_id"].is_string() && event["at"].is_string());
    }
    let activated = &page["events"][4];
    assert_eq!(
        activated["target"],
        json!({"type": "policy_version", "id": "2"})
    );
    assert_eq!(
        activated["detail"]["diff"]["categories"]["violence"]["to"]["block_at"], 0.7,
        "a policy change holds its diff: {activated}"
    );
    assert_eq!(activated["detail"]["previous"], 1);
    assert_eq!(page["events"][8]["detail"], json!({"removed": ["zorp"]}));
    let setup = events(
        &app,
        &key,
        &format!("?cursor={}", page["next_cursor"].as_str().unwrap()),
    )
    .await;
    let setup: Vec<&str> = setup["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        setup,
        ["account.changed", "key.created"],
        "the harness's set-up, by modctl's rules"
    );
}

#[tokio::test]
async fn the_log_pages_by_cursor_and_filters_by_action_and_time() {
    let app = spawn_app().await;
    let key = owner(&app).await;
    for n in 0..5 {
        send(
            &app,
            Method::POST,
            "/api/v1/blocklist",
            &key,
            Some(&json!({"terms": [format!("term{n}")]})),
        )
        .await;
    }
    create_category(&app, &key, "gambling").await;

    let baseline = events(&app, &key, "").await["events"]
        .as_array()
        .unwrap()
        .len();
    let first = events(&app, &key, "?limit=2").await;
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = events(&app, &key, &format!("?limit=2&cursor={cursor}")).await;
    let cursor = second["next_cursor"].as_str().unwrap();
    let third = events(&app, &key, &format!("?limit=2&cursor={cursor}")).await;

    let ids = |page: &Value| -> Vec<String> {
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["event_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all: Vec<String> = [ids(&first), ids(&second), ids(&third)].concat();
    assert_eq!(all.len(), 6);
    let mut unique = all.clone();
    unique.dedup();
    assert_eq!(unique, all, "no event twice");
    assert_eq!(baseline, 6 + 2, "six changes and the harness's two");
    assert_eq!(actions(&first)[0], "custom_category.changed");

    let filtered = events(&app, &key, "?action=blocklist.changed").await;
    assert_eq!(actions(&filtered).len(), 5);
    let future = events(&app, &key, "?since=2999-01-01T00:00:00Z").await;
    assert!(actions(&future).is_empty());
    let past = events(&app, &key, "?until=2000-01-01T00:00:00Z").await;
    assert!(actions(&past).is_empty());

    for query in [
        "?action=policy.nothing",
        "?since=yesterday",
        "?limit=0",
        "?limit=1001",
        "?cursor=zz",
    ] {
        let response = send(
            &app,
            Method::GET,
            &format!("/api/v1/audit{query}"),
            &key,
            None,
        )
        .await;
        assert_error(response, 400, "INVALID_REQUEST").await;
    }
    let at_limit = send(&app, Method::GET, "/api/v1/audit?limit=1000", &key, None).await;
    assert_eq!(at_limit.status(), 200);
}

#[tokio::test]
async fn an_account_sees_only_its_own_events() {
    let app = spawn_app().await;
    let mine = owner(&app).await;
    let stranger = owner(&app).await;
    create_category(&app, &mine, "gambling").await;

    assert_eq!(actions(&events(&app, &stranger, "").await).len(), 0);
    assert_eq!(actions(&events(&app, &mine, "").await).len(), 1);
}

#[tokio::test]
async fn postgres_refuses_to_update_delete_or_truncate_an_audit_event_whoever_connects() {
    let app = spawn_app().await;
    let key = owner(&app).await;
    create_category(&app, &key, "gambling").await;
    // The test connects as the database's owner, a superuser.
    let client = app.db.pool.get().await.unwrap();

    let update = client
        .execute("UPDATE audit_events SET action = 'key.deleted'", &[])
        .await;
    let delete = client.execute("DELETE FROM audit_events", &[]).await;
    let truncate = client.batch_execute("TRUNCATE audit_events").await;

    for refused in [update.map(drop), delete.map(drop), truncate] {
        let error = refused.unwrap_err();
        assert!(
            error.to_string().contains("append-only")
                || error
                    .as_db_error()
                    .is_some_and(|e| e.message().contains("append-only")),
            "{error:?}"
        );
    }
    let left: i64 = client
        .query_one(
            "SELECT count(*) FROM audit_events WHERE action = 'custom_category.changed'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 1);
}

#[tokio::test]
async fn a_refused_change_records_nothing() {
    let app = spawn_app().await;
    let key = owner(&app).await;
    create_category(&app, &key, "gambling").await;

    let duplicate = send(
        &app,
        Method::POST,
        "/api/v1/custom-categories",
        &key,
        Some(&json!({"name": "gambling", "description": "Again."})),
    )
    .await;
    assert_eq!(duplicate.status(), 409);
    let bad_version = send(
        &app,
        Method::POST,
        "/api/v1/policy/versions",
        &key,
        Some(&json!({"categories": {"hate": {"mode": "enforce", "block_at": 2}}})),
    )
    .await;
    assert_eq!(bad_version.status(), 400);
    let nothing_removed = send(
        &app,
        Method::DELETE,
        "/api/v1/blocklist",
        &key,
        Some(&json!({"terms": ["absent"]})),
    )
    .await;
    assert_eq!(nothing_removed.status(), 200);

    assert_eq!(
        actions(&events(&app, &key, "").await),
        ["custom_category.changed"]
    );
}
