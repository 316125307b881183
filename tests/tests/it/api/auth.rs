use std::time::Duration;

use moderation_api::auth::{Access, ENDPOINTS};
use moderation_shared::{
    clock,
    db::{accounts, api_keys, audit_events::Actor},
    domain::{ApiKeyId, Scope},
    keys,
};
use moderation_tests::{assert_error, eventually, spawn_app, TestApp, TestKey};

/// Sends `method path` as `key` would, with a body where the endpoint may want one.
async fn call(
    app: &TestApp,
    method: &actix_web::http::Method,
    path: &str,
    key: Option<&str>,
) -> reqwest::Response {
    let path = path.replace("{id}", &uuid::Uuid::new_v4().to_string());
    let method = reqwest::Method::from_bytes(method.as_str().as_bytes()).unwrap();
    let mut request = app.client.request(method, app.url(&path));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    request.send().await.unwrap()
}

async fn me(app: &TestApp, authorization: Option<&str>) -> reqwest::Response {
    let mut request = app.client.get(app.url("/api/v1/me"));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn a_valid_key_resolves_to_its_account_and_scopes() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::JobRead])).await;

    let response = app.get("/api/v1/me", &key).await;

    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["account_id"], key.account.to_string());
    assert_eq!(body["key_id"], key.key_id.to_string());
    assert_eq!(body["scopes"], serde_json::json!(["job:read"]));
}

#[tokio::test]
async fn a_missing_authorization_header_is_401() {
    let app = spawn_app().await;
    assert_error(me(&app, None).await, 401, "UNAUTHORIZED").await;
}

#[tokio::test]
async fn a_scheme_other_than_bearer_is_401() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    assert_error(
        me(&app, Some(&format!("Basic {}", key.key))).await,
        401,
        "UNAUTHORIZED",
    )
    .await;
    assert_error(me(&app, Some(&key.key)).await, 401, "UNAUTHORIZED").await;
}

#[tokio::test]
async fn a_malformed_key_is_401() {
    let app = spawn_app().await;
    for bad in [
        "Bearer ",
        "Bearer nonsense",
        "Bearer msk_ABCDEFGH_0123456789abcdef0123456789abcdef",
    ] {
        assert_error(me(&app, Some(bad)).await, 401, "UNAUTHORIZED").await;
    }
}

#[tokio::test]
async fn an_unknown_well_formed_key_is_401() {
    let app = spawn_app().await;
    let unknown = keys::generate().unwrap().key;
    assert_error(
        me(&app, Some(&format!("Bearer {unknown}"))).await,
        401,
        "UNAUTHORIZED",
    )
    .await;
}

#[tokio::test]
async fn a_disabled_key_is_401() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let client = app.db.pool.get().await.unwrap();
    api_keys::set_enabled(&client, Actor::Operator, ApiKeyId(key.key_id), false)
        .await
        .unwrap()
        .unwrap();

    assert_error(app.get("/api/v1/me", &key).await, 401, "UNAUTHORIZED").await;
}

#[tokio::test]
async fn a_deleted_key_is_401() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let client = app.db.pool.get().await.unwrap();
    api_keys::delete(&client, Actor::Operator, ApiKeyId(key.key_id))
        .await
        .unwrap()
        .unwrap();

    assert_error(app.get("/api/v1/me", &key).await, 401, "UNAUTHORIZED").await;
}

#[tokio::test]
async fn an_expired_key_is_401_and_an_unexpired_one_works() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    let expired = app
        .create_key_expiring(account, None, Some(clock::now() - Duration::from_secs(1)))
        .await;
    let valid = app
        .create_key_expiring(
            account,
            None,
            Some(clock::now() + Duration::from_secs(3600)),
        )
        .await;

    assert_error(app.get("/api/v1/me", &expired).await, 401, "UNAUTHORIZED").await;
    assert_eq!(app.get("/api/v1/me", &valid).await.status(), 200);
}

async fn refused_within_five_seconds(app: &TestApp, key: &TestKey, status: u16, code: &str) {
    let response = eventually(
        Duration::from_secs(5),
        "the change to take effect",
        || async {
            let response = app.get("/api/v1/me", key).await;
            (response.status().as_u16() == status).then_some(response)
        },
    )
    .await;
    assert_error(response, status, code).await;
}

#[tokio::test]
async fn disabling_a_key_in_use_takes_effect_within_five_seconds() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    assert_eq!(app.get("/api/v1/me", &key).await.status(), 200);

    let client = app.db.pool.get().await.unwrap();
    api_keys::set_enabled(&client, Actor::Operator, ApiKeyId(key.key_id), false)
        .await
        .unwrap();

    refused_within_five_seconds(&app, &key, 401, "UNAUTHORIZED").await;
}

#[tokio::test]
async fn deleting_a_key_in_use_takes_effect_within_five_seconds() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    assert_eq!(app.get("/api/v1/me", &key).await.status(), 200);

    let client = app.db.pool.get().await.unwrap();
    api_keys::delete(&client, Actor::Operator, ApiKeyId(key.key_id))
        .await
        .unwrap();

    refused_within_five_seconds(&app, &key, 401, "UNAUTHORIZED").await;
}

#[tokio::test]
async fn terminating_an_account_in_use_takes_effect_within_five_seconds() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    assert_eq!(app.get("/api/v1/me", &key).await.status(), 200);

    let client = app.db.pool.get().await.unwrap();
    accounts::terminate(&client, Actor::Operator, key.account)
        .await
        .unwrap();

    refused_within_five_seconds(&app, &key, 403, "ACCOUNT_TERMINATED").await;
}

#[tokio::test]
async fn a_terminated_account_gets_403_account_terminated_on_every_endpoint_whatever_the_key() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    let all: Vec<Scope> = Scope::ALL
        .into_iter()
        .filter(|s| s.issuable_to_keys() && !s.needs_registry_membership())
        .collect();
    let full = app.create_key(account, Some(&all)).await;
    let narrow = app.create_key(account, Some(&[Scope::JobRead])).await;
    let disabled = app.create_key(account, None).await;
    let client = app.db.pool.get().await.unwrap();
    api_keys::set_enabled(&client, Actor::Operator, ApiKeyId(disabled.key_id), false)
        .await
        .unwrap();
    accounts::terminate(&client, Actor::Operator, account)
        .await
        .unwrap();

    let guarded: Vec<_> = ENDPOINTS
        .iter()
        .filter(|e| e.access != Access::Public)
        .collect();
    assert!(!guarded.is_empty());
    for endpoint in guarded {
        for key in [&full, &narrow, &disabled] {
            let response = call(&app, &endpoint.method, endpoint.path, Some(&key.key)).await;
            let body = assert_error(response, 403, "ACCOUNT_TERMINATED").await;
            assert!(
                body["message"].as_str().unwrap().contains("terminated"),
                "{} {}: {body}",
                endpoint.method,
                endpoint.path
            );
        }
    }
}

#[tokio::test]
async fn every_guarded_endpoint_refuses_a_request_without_a_key() {
    // More endpoints than the lockout's 50 failures a window: the lockout is another test's.
    let app = moderation_tests::spawn_app_with(|s| s.limits.auth_failure_limit = 1000).await;

    for endpoint in ENDPOINTS.iter().filter(|e| e.access != Access::Public) {
        let response = call(&app, &endpoint.method, endpoint.path, None).await;
        assert_error(response, 401, "UNAUTHORIZED").await;
    }
}

#[tokio::test]
async fn admin_config_can_never_be_given_to_a_key() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    let client = app.db.pool.get().await.unwrap();

    let refused = moderation_shared::provisioning::issue_key(
        &client,
        Actor::Operator,
        account,
        None,
        Some(&[Scope::JobRead, Scope::AdminConfig]),
        None,
    )
    .await;
    let generated = keys::generate().unwrap();
    let bypass = api_keys::insert(
        &client,
        &api_keys::NewApiKey {
            account_id: account,
            name: None,
            prefix: &generated.prefix,
            hash: &generated.hash,
            scopes: &[Scope::AdminConfig],
            expires_at: None,
        },
    )
    .await;

    assert!(refused.is_err());
    assert!(bypass.is_err(), "the table itself refuses admin:config");
}

#[tokio::test]
async fn every_row_of_the_access_table_is_a_served_route() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;

    for endpoint in ENDPOINTS {
        let response = call(&app, &endpoint.method, endpoint.path, Some(&key.key)).await;
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        assert_ne!(status, 405, "{} {}: {body}", endpoint.method, endpoint.path);
        assert!(
            !(status == 404 && body.contains("no such resource")),
            "{} {} is not routed: {body}",
            endpoint.method,
            endpoint.path
        );
    }
}
