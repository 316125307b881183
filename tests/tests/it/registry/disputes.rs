//! Disputes are decided by operators with the real `modctl` binary.

use std::process::Command;

use moderation_tests::{
    assert_error,
    registry::{email_hash, Member},
    spawn_app, TestApp,
};
use serde_json::{json, Value};

/// Runs `modctl registry ARGS`; returns success, stdout JSON and stderr.
fn modctl(app: &TestApp, args: &[&str]) -> (bool, Value, String) {
    let output = Command::new(moderation_tests::binary("modctl"))
        .arg("registry")
        .args(args)
        .env("DATABASE_URL", app.db.settings.url.expose())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        output.status.success(),
        json,
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

fn decide(app: &TestApp, action: &str, id: &str) -> Value {
    let (ok, json, stderr) = modctl(app, &["dispute", action, id]);
    assert!(ok, "dispute {action} failed: {stderr}");
    json
}

fn refused(app: &TestApp, action: &str, id: &str) -> String {
    let (ok, json, stderr) = modctl(app, &["dispute", action, id]);
    assert!(!ok, "dispute {action} should fail");
    assert_eq!(json, Value::Null);
    assert!(!stderr.trim().is_empty());
    stderr
}

#[tokio::test]
async fn opening_and_rejecting_a_dispute_moves_an_entry_to_disputed_and_back() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let entry = app
        .registry_reported(&member.key, &email_hash("a@example.com"), "payment_fraud")
        .await;
    let id = entry["entry_id"].as_str().unwrap();

    let opened = decide(&app, "open", id);
    let read: Value = app
        .get(&format!("/api/v1/registry/entries/{id}"), &member.key)
        .await
        .json()
        .await
        .unwrap();
    let rejected = decide(&app, "reject", id);

    assert_eq!(opened["status"], "disputed");
    assert_eq!(opened["has_open_dispute"], true);
    assert_eq!(read["status"], "disputed");
    assert_eq!(rejected["status"], "active");
    assert_eq!(rejected["has_open_dispute"], false);
}

#[tokio::test]
async fn upholding_a_dispute_revokes_the_entry_for_good() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let hash = email_hash("a@example.com");
    let entry = app
        .registry_reported(&member.key, &hash, "payment_fraud")
        .await;
    let id = entry["entry_id"].as_str().unwrap();
    decide(&app, "open", id);

    let upheld = decide(&app, "uphold", id);
    let again = app
        .registry_report(&member.key, &hash, "payment_fraud", "CASE-2")
        .await;

    assert_eq!(upheld["status"], "revoked");
    assert_eq!(upheld["revoke_reason"], "dispute_upheld");
    assert_eq!(upheld["has_open_dispute"], false);
    assert!(upheld["revoked_at"].is_string());
    assert_error(again, 409, "CONFLICT").await;
}

/// An app with a member whose entry for `a@example.com` is under an open dispute.
async fn disputed_entry() -> (TestApp, Member, String, String) {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let hash = email_hash("a@example.com");
    let entry = app
        .registry_reported(&member.key, &hash, "payment_fraud")
        .await;
    let id = entry["entry_id"].as_str().unwrap().to_owned();
    decide(&app, "open", &id);
    (app, member, hash, id)
}

#[tokio::test]
async fn re_reporting_a_disputed_entry_refreshes_it_but_keeps_the_dispute() {
    let (app, member, hash, _) = disputed_entry().await;

    let response = app
        .registry_report(&member.key, &hash, "payment_fraud", "CASE-2")
        .await;

    assert_eq!(response.status(), 200);
    let refreshed: Value = response.json().await.unwrap();
    assert_eq!(refreshed["status"], "disputed");
    assert_eq!(refreshed["has_open_dispute"], true);
    assert_eq!(refreshed["member_case_ref"], "CASE-2");
}

#[tokio::test]
async fn an_entry_under_dispute_cannot_be_revoked_by_its_member_so_the_decision_stands() {
    let (app, member, hash, id) = disputed_entry().await;

    let revoke = app
        .registry_post_json(
            &format!("/api/v1/registry/entries/{id}/revoke"),
            &member.key,
            &json!({"reason": "withdrawn"}),
        )
        .await;
    let reported_again = app
        .registry_report(&member.key, &hash, "payment_fraud", "CASE-2")
        .await;
    let upheld = decide(&app, "uphold", &id);

    assert_error(revoke, 409, "CONFLICT").await;
    let reported_again: Value = reported_again.json().await.unwrap();
    assert_eq!(reported_again["status"], "disputed");
    assert_eq!(reported_again["has_open_dispute"], true);
    assert_eq!(upheld["status"], "revoked");
    assert_eq!(upheld["revoke_reason"], "dispute_upheld");
}

#[tokio::test]
async fn invalid_dispute_transitions_fail_with_a_message() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let active = app
        .registry_reported(&member.key, &email_hash("a@example.com"), "payment_fraud")
        .await;
    let active = active["entry_id"].as_str().unwrap();
    let revoked = app
        .registry_reported(&member.key, &email_hash("b@example.com"), "payment_fraud")
        .await;
    let revoked = revoked["entry_id"].as_str().unwrap();
    app.registry_post_json(
        &format!("/api/v1/registry/entries/{revoked}/revoke"),
        &member.key,
        &json!({"reason": "appeal"}),
    )
    .await;
    let expired = app
        .registry_reported(&member.key, &email_hash("c@example.com"), "payment_fraud")
        .await;
    let expired = expired["entry_id"].as_str().unwrap();
    super::expire(&app, expired).await;

    let stderr = refused(&app, "uphold", active);
    assert!(stderr.contains("open dispute"), "{stderr}");
    refused(&app, "reject", active);
    for id in [revoked, expired] {
        let stderr = refused(&app, "open", id);
        assert!(stderr.contains("active"), "{stderr}");
    }
    decide(&app, "open", active);
    refused(&app, "open", active);
    decide(&app, "uphold", active);
    refused(&app, "uphold", active);
    refused(&app, "reject", active);
    let stderr = refused(&app, "open", &uuid::Uuid::new_v4().to_string());
    assert!(stderr.contains("not found"), "{stderr}");
    refused(&app, "open", "not-a-uuid");
}

#[tokio::test]
async fn modctl_prints_the_published_hash_of_an_email() {
    let app = spawn_app().await;

    let (ok, out, _) = modctl(&app, &["hash", " Jane.Saoirse+Work@GoogleMail.com "]);
    let (bad, _, stderr) = modctl(&app, &["hash", "no-at-sign"]);

    assert!(ok);
    assert_eq!(
        out,
        json!({
            "normalised": "janesaoirse@gmail.com",
            "sha256": "92ee26057ed9dea2535d6c8b141d48373932476599196e00352254896db5888f",
            "normalisation_version": 1,
        })
    );
    assert!(!bad);
    assert!(stderr.contains('@'), "{stderr}");
}
