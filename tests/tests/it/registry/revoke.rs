//! Members revoking their own entries.

use moderation_tests::{assert_error, registry::email_hash, spawn_app};
use serde_json::Value;
use time::{format_description::well_known::Rfc3339, OffsetDateTime};

#[tokio::test]
async fn revoking_an_own_entry_gives_200_and_revoking_again_changes_nothing() {
    let app = spawn_app().await;
    let (owner, other) = (app.registry_member().await, app.registry_member().await);
    let entry = app
        .registry_reported(&owner.key, &email_hash("a@example.com"), "payment_fraud")
        .await;
    let path = format!(
        "/api/v1/registry/entries/{}/revoke",
        entry["entry_id"].as_str().unwrap()
    );
    let reason = serde_json::json!({"reason": "ban overturned on appeal"});

    let foreign = app.registry_post_json(&path, &other.key, &reason).await;
    let revoked = app.registry_post_json(&path, &owner.key, &reason).await;
    assert_eq!(revoked.status(), 200);
    let revoked: Value = revoked.json().await.unwrap();
    let again = app
        .registry_post_json(&path, &owner.key, &serde_json::json!({"reason": "other"}))
        .await;

    assert_error(foreign, 404, "NOT_FOUND").await;
    assert_eq!(revoked["status"], "revoked");
    assert_eq!(revoked["revoke_reason"], "ban overturned on appeal");
    assert_eq!(revoked["has_open_dispute"], false);
    OffsetDateTime::parse(revoked["revoked_at"].as_str().unwrap(), &Rfc3339).unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.json::<Value>().await.unwrap(), revoked);
}

#[tokio::test]
async fn a_revocation_needs_a_valid_reason_and_a_valid_id() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let entry = app
        .registry_reported(&member.key, &email_hash("a@example.com"), "payment_fraud")
        .await;
    let path = format!(
        "/api/v1/registry/entries/{}/revoke",
        entry["entry_id"].as_str().unwrap()
    );

    for body in [
        serde_json::json!({}),
        serde_json::json!({"reason": ""}),
        serde_json::json!({"reason": "x".repeat(201)}),
        serde_json::json!({"reason": "bad\u{7}"}),
        serde_json::json!({"reason": "mail jane@example.com"}),
        serde_json::json!({"reason": "ok", "extra": 1}),
    ] {
        let response = app.registry_post_json(&path, &member.key, &body).await;
        assert_error(response, 400, "INVALID_REQUEST").await;
    }
    let malformed = app
        .registry_post_json(
            "/api/v1/registry/entries/nope/revoke",
            &member.key,
            &serde_json::json!({"reason": "ok"}),
        )
        .await;
    assert_error(malformed, 400, "INVALID_REQUEST").await;
    let at_limit = app
        .registry_post_json(
            &path,
            &member.key,
            &serde_json::json!({"reason": "x".repeat(200)}),
        )
        .await;
    assert_eq!(at_limit.status(), 200);
}

#[tokio::test]
async fn re_reporting_an_entry_its_member_revoked_makes_it_active_again() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let hash = email_hash("a@example.com");
    let entry = app
        .registry_reported(&member.key, &hash, "payment_fraud")
        .await;
    let id = entry["entry_id"].as_str().unwrap();
    app.registry_post_json(
        &format!("/api/v1/registry/entries/{id}/revoke"),
        &member.key,
        &serde_json::json!({"reason": "mistake"}),
    )
    .await;

    let response = app
        .registry_report(&member.key, &hash, "payment_fraud", "CASE-9")
        .await;

    assert_eq!(response.status(), 200);
    let entry: Value = response.json().await.unwrap();
    assert_eq!(entry["entry_id"], id);
    assert_eq!(entry["status"], "active");
    assert_eq!(entry["revoked_at"], Value::Null);
    assert_eq!(entry["revoke_reason"], Value::Null);
}
