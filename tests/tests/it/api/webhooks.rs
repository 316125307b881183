use moderation_shared::{db::webhooks, domain::Scope};
use moderation_tests::{assert_error, spawn_app, TestApp, TestKey};
use serde_json::{json, Value};

async fn send(
    app: &TestApp,
    key: &TestKey,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut request = app
        .client
        .request(method, app.url(path))
        .bearer_auth(&key.key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap()
}

async fn send_json(app: &TestApp, key: &TestKey, method: reqwest::Method, path: &str) -> Value {
    send(app, key, method, path, None)
        .await
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_global_webhook_url_is_registered_replaced_read_and_cleared() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::WebhookManage])).await;
    let post = reqwest::Method::POST;

    let first = send(
        &app,
        &key,
        post.clone(),
        "/api/v1/webhook/register",
        Some(json!({"url": "https://93.184.215.14/a"})),
    )
    .await;
    assert_eq!(first.status(), 200);
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["url"], "https://93.184.215.14/a");
    assert!(first["updated_at"].as_str().unwrap().ends_with('Z'));
    let second = send(
        &app,
        &key,
        post.clone(),
        "/api/v1/webhook/register",
        Some(json!({"url": "https://93.184.215.14/b"})),
    )
    .await;
    assert_eq!(second.status(), 200);
    let read: Value = send_json(&app, &key, reqwest::Method::GET, "/api/v1/webhook/register").await;
    assert_eq!(read["url"], "https://93.184.215.14/b");
    assert_eq!(read["state"], "active");

    let deleted = send(
        &app,
        &key,
        reqwest::Method::DELETE,
        "/api/v1/webhook/register",
        None,
    )
    .await;
    let deleted_again = send(
        &app,
        &key,
        reqwest::Method::DELETE,
        "/api/v1/webhook/register",
        None,
    )
    .await;

    assert_eq!(deleted.status(), 204);
    assert_eq!(deleted_again.status(), 204);
    let read: Value = send_json(&app, &key, reqwest::Method::GET, "/api/v1/webhook/register").await;
    assert_eq!(read["url"], Value::Null);
}

#[tokio::test]
async fn registering_a_non_https_private_or_malformed_url_is_400() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::WebhookManage])).await;
    app.lift_rate_limit(key.account).await;

    for body in [
        json!({"url": "http://93.184.215.14/a"}),
        json!({"url": "https://127.0.0.1/a"}),
        json!({"url": "https://192.168.1.10/a"}),
        json!({"url": "not a url"}),
        json!({"url": 42}),
        json!({}),
        json!({"url": "https://93.184.215.14/a", "extra": true}),
    ] {
        let response = send(
            &app,
            &key,
            reqwest::Method::POST,
            "/api/v1/webhook/register",
            Some(body.clone()),
        )
        .await;
        assert_error(response, 400, "INVALID_REQUEST").await;
    }
    let bad_json = app
        .client
        .post(app.url("/api/v1/webhook/register"))
        .bearer_auth(&key.key)
        .header("content-type", "application/json")
        .body("{\"url\":")
        .send()
        .await
        .unwrap();
    assert_error(bad_json, 400, "INVALID_REQUEST").await;
}

#[tokio::test]
async fn every_account_has_an_active_secret_that_can_be_revealed_on_both_paths() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::WebhookManage])).await;

    let list: Value = send_json(
        &app,
        &key,
        reqwest::Method::GET,
        "/api/v1/me/webhook-secrets",
    )
    .await;
    let revealed: Value = send_json(
        &app,
        &key,
        reqwest::Method::POST,
        "/api/v1/me/webhook-secrets/reveal",
    )
    .await;
    let root: Value = send_json(
        &app,
        &key,
        reqwest::Method::POST,
        "/me/webhook-secrets/reveal",
    )
    .await;

    assert_eq!(list["tolerance_seconds"], 300);
    assert_eq!(list["grace_hours"], 24);
    let secrets = list["secrets"].as_array().unwrap();
    assert_eq!(secrets.len(), 1);
    assert_eq!(secrets[0]["status"], "active");
    assert!(
        secrets[0].get("secret").is_none(),
        "values are never listed"
    );
    assert_eq!(revealed["id"], secrets[0]["id"]);
    assert_eq!(root, revealed);
    let secret = revealed["secret"].as_str().unwrap();
    let raw = secret.strip_prefix("whsec_").unwrap();
    use base64::Engine;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(raw)
            .unwrap()
            .len(),
        24
    );
}

#[tokio::test]
async fn rotation_makes_a_new_active_secret_and_lists_the_old_one_as_expiring_for_24_hours() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::WebhookManage])).await;
    let old: Value = send_json(
        &app,
        &key,
        reqwest::Method::POST,
        "/api/v1/me/webhook-secrets/reveal",
    )
    .await;

    let rotated = send(
        &app,
        &key,
        reqwest::Method::POST,
        "/api/v1/me/webhook-secrets/rotate",
        None,
    )
    .await;

    assert_eq!(rotated.status(), 201);
    let new: Value = rotated.json().await.unwrap();
    assert_ne!(new["secret"], old["secret"]);
    let list: Value = send_json(
        &app,
        &key,
        reqwest::Method::GET,
        "/api/v1/me/webhook-secrets",
    )
    .await;
    let secrets = list["secrets"].as_array().unwrap();
    assert_eq!(secrets.len(), 2);
    assert_eq!(
        (secrets[0]["id"].clone(), secrets[0]["status"].clone()),
        (new["id"].clone(), json!("active"))
    );
    assert_eq!(
        (secrets[1]["id"].clone(), secrets[1]["status"].clone()),
        (old["id"].clone(), json!("expiring"))
    );
    let expires = time::OffsetDateTime::parse(
        secrets[1]["expires_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let hours = (expires - moderation_shared::clock::now()).as_seconds_f64() / 3600.0;
    assert!((23.9..=24.0).contains(&hours), "{hours}");
    let revealed: Value = send_json(
        &app,
        &key,
        reqwest::Method::POST,
        "/api/v1/me/webhook-secrets/reveal",
    )
    .await;
    assert_eq!(revealed["secret"], new["secret"]);
    // Once expired, the old secret is no longer listed.
    let client = app.db.pool.get().await.unwrap();
    client.execute("UPDATE webhook_secrets SET expires_at = now() - interval '1 second' WHERE expires_at IS NOT NULL", &[]).await.unwrap();
    let list: Value = send_json(
        &app,
        &key,
        reqwest::Method::GET,
        "/api/v1/me/webhook-secrets",
    )
    .await;
    assert_eq!(list["secrets"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn secrets_are_stored_sealed_never_in_clear() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::WebhookManage])).await;
    let revealed: Value = send_json(
        &app,
        &key,
        reqwest::Method::POST,
        "/api/v1/me/webhook-secrets/reveal",
    )
    .await;
    let secret = revealed["secret"].as_str().unwrap().as_bytes().to_vec();

    let client = app.db.pool.get().await.unwrap();
    let sealed: Vec<u8> = client
        .query_one("SELECT sealed FROM webhook_secrets", &[])
        .await
        .unwrap()
        .get(0);

    assert!(!sealed.windows(secret.len()).any(|w| w == secret.as_slice()));
}

#[tokio::test]
async fn webhook_endpoints_need_the_webhook_manage_scope() {
    let app = spawn_app().await;
    let key = app.create_key(app.create_account().await, None).await;

    for (method, path) in [
        (reqwest::Method::GET, "/api/v1/webhook/register"),
        (reqwest::Method::DELETE, "/api/v1/webhook/register"),
        (reqwest::Method::GET, "/api/v1/me/webhook-secrets"),
        (reqwest::Method::POST, "/api/v1/me/webhook-secrets/reveal"),
        (reqwest::Method::POST, "/me/webhook-secrets/reveal"),
        (reqwest::Method::POST, "/api/v1/me/webhook-secrets/rotate"),
    ] {
        assert_error(send(&app, &key, method, path, None).await, 403, "FORBIDDEN").await;
    }
}

#[tokio::test]
async fn at_most_ten_rotated_out_secrets_keep_signing_beside_the_active_one() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::WebhookManage])).await;
    app.lift_rate_limit(key.account).await;
    let rotate = || {
        send(
            &app,
            &key,
            reqwest::Method::POST,
            "/api/v1/me/webhook-secrets/rotate",
            None,
        )
    };
    let signing = || async {
        webhooks::signing_secrets(
            &app.db.pool.get().await.unwrap(),
            &app.encryption_key,
            key.account,
        )
        .await
        .unwrap()
    };
    // The first rotation makes the active secret too: eleven leave it and ten rotated out.
    for _ in 0..11 {
        assert_eq!(rotate().await.status(), 201);
    }
    let at_the_limit = signing().await;

    assert_eq!(rotate().await.status(), 201);
    assert_eq!(rotate().await.status(), 201);

    let signing = signing().await;
    let list: Value = send_json(
        &app,
        &key,
        reqwest::Method::GET,
        "/api/v1/me/webhook-secrets",
    )
    .await;
    let listed = list["secrets"].as_array().unwrap();
    assert_eq!(at_the_limit.len(), 11);
    assert_eq!(signing.len(), 11);
    assert_eq!(listed.len(), 11);
    assert_eq!(listed[0]["status"], "active");
    assert!(listed[1..].iter().all(|s| s["status"] == "expiring"));
    // The oldest rotated-out secrets stopped signing; the ten newest still sign.
    let still_signing: Vec<String> = signing.iter().map(|s| s.meta.id.to_string()).collect();
    let newest_first: Vec<String> = listed
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(still_signing, newest_first);
}
