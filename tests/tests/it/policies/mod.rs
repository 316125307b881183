//! An account's policy: custom categories, blocklist terms, the hash banks, the reads a worker
//! makes of them, `modctl hashbank add`, policy versions with their impact preview, and the
//! audit log.

mod audit;
mod blocklist;
mod categories;
mod hashbank;
mod impact;
mod store;
mod versions;

use moderation_shared::{
    db::accounts,
    domain::{AccountId, Scope},
};
use moderation_tests::{assert_error, spawn_app, TestApp, TestKey};
use reqwest::Method;
use serde_json::{json, Value};

/// A new account with a key holding `settings:manage` only, its rate limit lifted.
pub async fn settings_key(app: &TestApp) -> TestKey {
    let key = app.account_with_key(Some(&[Scope::SettingsManage])).await;
    app.lift_rate_limit(key.account).await;
    key
}

/// `method path` as `key`, with `body` as JSON when given.
pub async fn send(
    app: &TestApp,
    method: Method,
    path: &str,
    key: &TestKey,
    body: Option<&Value>,
) -> reqwest::Response {
    let mut request = app
        .client
        .request(method, app.url(path))
        .bearer_auth(&key.key);
    if let Some(body) = body {
        request = request.json(body);
    }
    request.send().await.unwrap()
}

/// Creates a category named `name` and returns it.
pub async fn create_category(app: &TestApp, key: &TestKey, name: &str) -> Value {
    let response = send(
        app,
        Method::POST,
        "/api/v1/custom-categories",
        key,
        Some(&json!({ "name": name, "description": format!("Content about {name}.") })),
    )
    .await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    response.json().await.unwrap()
}

/// The account's policy version.
pub async fn settings_stamp(app: &TestApp, account: AccountId) -> i64 {
    let client = app.db.pool.get().await.unwrap();
    accounts::settings_stamp(&client, account)
        .await
        .unwrap()
        .unwrap()
        .settings_stamp
}

#[tokio::test]
async fn every_policy_endpoint_refuses_a_key_without_settings_manage() {
    let app = spawn_app().await;
    let owner = settings_key(&app).await;
    let category = create_category(&app, &owner, "gambling").await;
    let id = category["id"].as_str().unwrap();
    let client_default = app.create_key(owner.account, None).await;
    let category_path = format!("/api/v1/custom-categories/{id}");
    let calls = [
        (Method::GET, "/api/v1/custom-categories", None),
        (
            Method::POST,
            "/api/v1/custom-categories",
            Some(json!({"name": "other", "description": "Other."})),
        ),
        (
            Method::PATCH,
            category_path.as_str(),
            Some(json!({"enabled": false})),
        ),
        (Method::DELETE, category_path.as_str(), None),
        (Method::GET, "/api/v1/blocklist", None),
        (
            Method::POST,
            "/api/v1/blocklist",
            Some(json!({"terms": ["x"]})),
        ),
        (
            Method::DELETE,
            "/api/v1/blocklist",
            Some(json!({"terms": ["x"]})),
        ),
    ];

    for (method, path, body) in calls {
        let response = send(&app, method.clone(), path, &client_default, body.as_ref()).await;
        let error = assert_error(response, 403, "FORBIDDEN").await;
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("settings:manage"),
            "{method} {path}: {error}"
        );
    }

    let listed = send(&app, Method::GET, "/api/v1/custom-categories", &owner, None).await;
    let listed: Value = listed.json().await.unwrap();
    assert_eq!(listed["categories"][0]["enabled"], true, "nothing changed");
    assert_eq!(settings_stamp(&app, owner.account).await, 1);
}
