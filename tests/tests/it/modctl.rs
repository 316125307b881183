//! `modctl` run as the operator runs it: the real binary, JSON on stdout.

use std::process::Command;

use moderation_tests::{spawn_app, TestApp};
use serde_json::Value;

/// Runs the real `modctl` against the app's database: (success, stdout as JSON or null, stderr).
pub(crate) fn modctl(app: &TestApp, args: &[&str]) -> (bool, Value, String) {
    let output = Command::new(moderation_tests::binary("modctl"))
        .args(args)
        .env("DATABASE_URL", app.db.settings.url.expose())
        .output()
        .expect("run modctl");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (output.status.success(), json, stderr)
}

#[tokio::test]
async fn modctl_creates_an_org_and_a_key_that_authenticates() {
    let app = spawn_app().await;

    let (ok, org, _) = modctl(&app, &["org", "create", "--name", "Acme"]);
    assert!(ok);
    let org_id = org["org_id"].as_str().unwrap().to_owned();
    let (ok, key, _) = modctl(&app, &["key", "create", "--org", &org_id, "--name", "ci"]);
    assert!(ok);

    assert_eq!(
        key["scopes"],
        serde_json::json!([
            "moderate:prompt",
            "moderate:chat",
            "moderate:image",
            "moderate:video",
            "job:read"
        ])
    );
    assert!(key["key"]
        .as_str()
        .unwrap()
        .starts_with(&format!("msk_{}_", key["prefix"].as_str().unwrap())));
    let response = app
        .client
        .get(app.url("/api/v1/me"))
        .bearer_auth(key["key"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn modctl_manages_keys_and_plans() {
    let app = spawn_app().await;
    let (_, org, _) = modctl(&app, &["org", "create", "--name", "Acme"]);
    let org_id = org["org_id"].as_str().unwrap().to_owned();
    let (_, key, _) = modctl(
        &app,
        &["key", "create", "--org", &org_id, "--scopes", "job:read"],
    );
    let key_id = key["key_id"].as_str().unwrap().to_owned();

    let (ok, renamed, _) = modctl(&app, &["key", "rename", &key_id, "nightly"]);
    assert!(ok);
    assert_eq!(renamed["name"], "nightly");
    let (ok, disabled, _) = modctl(&app, &["key", "disable", &key_id]);
    assert!(ok);
    assert_eq!(disabled["enabled"], false);
    let (ok, deleted, _) = modctl(&app, &["key", "delete", &key_id]);
    assert!(ok);
    assert!(deleted["deleted_at"].is_string());
    let (ok, plan, _) = modctl(
        &app,
        &[
            "org",
            "set",
            &org_id,
            "--rate-per-minute",
            "600",
            "--nsfw-check",
            "off",
            "--check-quota",
            "5",
            "--registry-member",
            "on",
        ],
    );
    assert!(ok);
    assert_eq!(plan["rate_per_minute"], 600);
    assert_eq!(plan["nsfw_check"], false);
    assert_eq!(plan["check_quota_daily"], 5);
    assert_eq!(plan["registry_member"], true);
    let (ok, terminated, _) = modctl(&app, &["org", "terminate", &org_id]);
    assert!(ok);
    assert_eq!(terminated["terminated"], true);
}

#[tokio::test]
async fn modctl_fails_clearly_on_bad_input() {
    let app = spawn_app().await;
    let (_, org, _) = modctl(&app, &["org", "create", "--name", "Acme"]);
    let org_id = org["org_id"].as_str().unwrap().to_owned();

    let cases: [&[&str]; 7] = [
        &[
            "key",
            "create",
            "--org",
            &org_id,
            "--scopes",
            "admin:config",
        ],
        &[
            "key",
            "create",
            "--org",
            &org_id,
            "--scopes",
            "registry:check",
        ],
        &["key", "create", "--org", &org_id, "--scopes", "no:such"],
        &["key", "disable", "00000000-0000-0000-0000-000000000000"],
        &["org", "terminate", "not-a-uuid"],
        &[
            "job",
            "--org",
            &org_id,
            "0193a5b2-0000-7000-8000-000000000000",
        ],
        &["job", "--org", &org_id, "not-a-uuid"],
    ];
    for args in cases {
        let (ok, json, stderr) = modctl(&app, args);
        assert!(!ok, "{args:?} should fail");
        assert_eq!(json, Value::Null, "{args:?} printed JSON on failure");
        assert!(!stderr.trim().is_empty(), "{args:?} printed no message");
    }
}

#[tokio::test]
async fn modctl_migrate_is_idempotent() {
    let app = spawn_app().await;

    let (ok, out, stderr) = modctl(&app, &["migrate"]);

    assert!(ok, "{stderr}");
    assert_eq!(out["applied"], serde_json::json!([]));
}
