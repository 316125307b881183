//! The webhook URL's health through the api (contract 17): its state on `GET
//! /api/v1/webhook/register`, and pause, resume, disable, enable and test refused with the
//! contract's error body, nothing changed.

use moderation_shared::domain::Scope;
use moderation_tests::{assert_error, spawn_app, TestApp, TestKey};
use serde_json::{json, Value};

async fn post(app: &TestApp, key: &TestKey, path: &str, body: Option<Value>) -> reqwest::Response {
    let request = app.client.post(app.url(path)).bearer_auth(&key.key);
    match body {
        Some(body) => request.json(&body),
        None => request,
    }
    .send()
    .await
    .unwrap()
}

async fn state(app: &TestApp, key: &TestKey) -> Value {
    let response = app.get("/api/v1/webhook/register", key).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// An account with a manager's key and a URL registered.
async fn registered() -> (TestApp, TestKey) {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::WebhookManage])).await;
    app.lift_rate_limit(key.account).await;
    let response = post(
        &app,
        &key,
        "/api/v1/webhook/register",
        Some(json!({"url": "https://93.184.215.14/hook"})),
    )
    .await;
    assert_eq!(response.status(), 200);
    (app, key)
}

/// The account's `webhook.endpoint_state` audit events.
async fn audited(app: &TestApp, key: &TestKey) -> i64 {
    let client = app.db.pool.get().await.unwrap();
    client
        .query_one(
            "SELECT count(*) FROM audit_events WHERE account_id = $1 \
             AND action = 'webhook.endpoint_state'",
            &[&key.account.0],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_new_url_is_active_with_no_history() {
    let (app, key) = registered().await;

    let read = state(&app, &key).await;

    assert_eq!(
        read,
        json!({
            "url": "https://93.184.215.14/hook", "state": "active", "disabled_reason": null,
            "failing_since": null, "last_success_at": null, "last_failure": null,
            "disable_at": null, "held": 0
        })
    );
}

#[tokio::test]
async fn pause_resume_disable_and_enable_answer_the_state_and_are_audited() {
    let (app, key) = registered().await;

    let paused = post(&app, &key, "/api/v1/webhook/pause", None).await;
    assert_eq!(paused.status(), 200);
    let paused: Value = paused.json().await.unwrap();
    let resumed: Value = post(&app, &key, "/api/v1/webhook/resume", None)
        .await
        .json()
        .await
        .unwrap();
    let disabled: Value = post(&app, &key, "/api/v1/webhook/disable", None)
        .await
        .json()
        .await
        .unwrap();
    let enabled = post(
        &app,
        &key,
        "/api/v1/webhook/enable",
        Some(json!({"replay": "none"})),
    )
    .await;
    assert_eq!(enabled.status(), 200);
    let enabled: Value = enabled.json().await.unwrap();

    assert_eq!(paused["state"], "paused");
    assert_eq!(paused["disabled_reason"], Value::Null);
    assert_eq!(resumed["state"], "active");
    assert_eq!(disabled["state"], "disabled");
    assert_eq!(disabled["disabled_reason"], "manual");
    assert_eq!(enabled["state"], "active");
    assert_eq!(enabled["disabled_reason"], Value::Null);
    assert_eq!(audited(&app, &key).await, 4);
}

#[tokio::test]
async fn every_state_request_without_a_registered_url_is_404() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::WebhookManage])).await;
    app.lift_rate_limit(key.account).await;

    for (path, body) in [
        ("/api/v1/webhook/pause", None),
        ("/api/v1/webhook/resume", None),
        ("/api/v1/webhook/disable", None),
        ("/api/v1/webhook/enable", Some(json!({"replay": "held"}))),
        ("/api/v1/webhook/test", None),
    ] {
        assert_error(post(&app, &key, path, body).await, 404, "NOT_FOUND").await;
    }
    let read = state(&app, &key).await;
    assert_eq!(read["url"], Value::Null);
    assert_eq!(read["state"], "active");
    assert_eq!(read["held"], 0);
    let client = app.db.pool.get().await.unwrap();
    let deliveries: i64 = client
        .query_one("SELECT count(*) FROM deliveries", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(deliveries, 0, "no test send was stored");
}

#[tokio::test]
async fn requests_the_state_does_not_allow_are_409_and_change_nothing() {
    let (app, key) = registered().await;
    let enable = Some(json!({"replay": "held"}));

    // Active: enable and resume are refused.
    assert_error(
        post(&app, &key, "/api/v1/webhook/enable", enable.clone()).await,
        409,
        "CONFLICT",
    )
    .await;
    assert_error(
        post(&app, &key, "/api/v1/webhook/resume", None).await,
        409,
        "CONFLICT",
    )
    .await;
    assert_eq!(state(&app, &key).await["state"], "active");
    // Paused: pause again and enable are refused.
    post(&app, &key, "/api/v1/webhook/pause", None).await;
    assert_error(
        post(&app, &key, "/api/v1/webhook/pause", None).await,
        409,
        "CONFLICT",
    )
    .await;
    assert_error(
        post(&app, &key, "/api/v1/webhook/enable", enable.clone()).await,
        409,
        "CONFLICT",
    )
    .await;
    assert_eq!(state(&app, &key).await["state"], "paused");
    // Disabled: disable again, pause and resume are refused.
    post(&app, &key, "/api/v1/webhook/disable", None).await;
    assert_error(
        post(&app, &key, "/api/v1/webhook/disable", None).await,
        409,
        "CONFLICT",
    )
    .await;
    assert_error(
        post(&app, &key, "/api/v1/webhook/pause", None).await,
        409,
        "CONFLICT",
    )
    .await;
    assert_error(
        post(&app, &key, "/api/v1/webhook/resume", None).await,
        409,
        "CONFLICT",
    )
    .await;

    let read = state(&app, &key).await;
    assert_eq!(read["state"], "disabled");
    assert_eq!(read["disabled_reason"], "manual");
    assert_eq!(audited(&app, &key).await, 2, "only the two allowed changes");
}

#[tokio::test]
async fn enable_with_a_replay_other_than_held_or_none_is_400_and_changes_nothing() {
    let (app, key) = registered().await;
    post(&app, &key, "/api/v1/webhook/disable", None).await;

    for body in [
        Some(json!({"replay": "all"})),
        Some(json!({"replay": "HELD"})),
        Some(json!({"replay": ""})),
        Some(json!({"replay": 1})),
        Some(json!({"replay": null})),
        Some(json!({})),
        Some(json!({"replay": "held", "extra": true})),
    ] {
        let response = post(&app, &key, "/api/v1/webhook/enable", body.clone()).await;
        assert_error(response, 400, "INVALID_REQUEST").await;
    }
    let bare = post(&app, &key, "/api/v1/webhook/enable", None).await;
    assert_error(bare, 415, "UNSUPPORTED_MEDIA_TYPE").await;

    let read = state(&app, &key).await;
    assert_eq!(read["state"], "disabled");
    assert_eq!(audited(&app, &key).await, 1);
}

#[tokio::test]
async fn the_state_requests_need_webhook_manage() {
    let (app, _) = registered().await;
    let reader = app.account_with_key(Some(&[Scope::JobRead])).await;

    for path in [
        "/api/v1/webhook/pause",
        "/api/v1/webhook/resume",
        "/api/v1/webhook/disable",
        "/api/v1/webhook/enable",
        "/api/v1/webhook/test",
    ] {
        let body = Some(json!({"replay": "held"}));
        assert_error(post(&app, &reader, path, body).await, 403, "FORBIDDEN").await;
    }
}

#[tokio::test]
async fn registering_another_url_starts_it_active_and_the_same_url_keeps_its_state() {
    let (app, key) = registered().await;
    post(&app, &key, "/api/v1/webhook/disable", None).await;

    let again = post(
        &app,
        &key,
        "/api/v1/webhook/register",
        Some(json!({"url": "https://93.184.215.14/hook"})),
    )
    .await;
    assert_eq!(again.status(), 200);
    let kept = state(&app, &key).await;
    post(
        &app,
        &key,
        "/api/v1/webhook/register",
        Some(json!({"url": "https://93.184.215.14/other"})),
    )
    .await;
    let fresh = state(&app, &key).await;

    assert_eq!(kept["state"], "disabled");
    assert_eq!(fresh["state"], "active");
    assert_eq!(fresh["disabled_reason"], Value::Null);
}
