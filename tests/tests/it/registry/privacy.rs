//! Nothing that names a member, an entry or a case, and no client hash, ever leaves in a check
//! response or a log line. The api runs as its own process with `RUST_LOG=debug`, and its whole
//! output is scanned.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use base64::Engine;
use moderation_tests::{
    eventually, redis_url,
    registry::{check_body, email_hash, report_body},
    spawn_app, TestApp, TestKey,
};
use serde_json::{json, Value};

struct Api {
    child: Child,
    log: std::path::PathBuf,
    base: String,
}

impl Drop for Api {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

fn start_api(app: &TestApp) -> Api {
    let port = moderation_tests::unused_port();
    let log = std::env::temp_dir().join(format!("registry-log-{}.txt", uuid::Uuid::new_v4()));
    let file = std::fs::File::create(&log).unwrap();
    let key = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
    let child = Command::new(moderation_tests::binary("api"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DATABASE_URL", app.db.settings.url.expose())
        .env("REDIS_URL", redis_url())
        .env("APP_REDIS_NAMESPACE", &app.redis.namespace)
        .env("APP_REGISTRY_KEY", key)
        .env("APP_ENCRYPTION_KEY", app.encryption_key.to_base64())
        .env("APP_HOST", "127.0.0.1")
        .env("PORT", port.to_string())
        .env("APP_HTTP_WORKERS", "1")
        .env("RUST_LOG", "debug")
        .stdout(Stdio::from(file.try_clone().unwrap()))
        .stderr(Stdio::from(file))
        .spawn()
        .unwrap();
    Api {
        child,
        log,
        base: format!("http://127.0.0.1:{port}"),
    }
}

async fn post(app: &TestApp, api: &Api, path: &str, key: &TestKey, body: &Value) -> (u16, String) {
    let response = app
        .client
        .post(format!("{}{path}", api.base))
        .bearer_auth(&key.key)
        .json(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn no_check_response_or_log_line_names_a_member_an_entry_a_case_or_a_hash() {
    let app = spawn_app().await;
    let api = start_api(&app);
    let client = app.client.clone();
    eventually(
        Duration::from_secs(30),
        "the api process to serve",
        || async {
            client
                .get(format!("{}/health", api.base))
                .send()
                .await
                .ok()
                .filter(|r| r.status() == 200)
        },
    )
    .await;
    let (a, b, checker) = (
        app.registry_member().await,
        app.registry_member().await,
        app.registry_member().await,
    );
    let hash = email_hash("jane@example.com");
    let other = email_hash("john@example.com");
    let mut entry_ids = Vec::new();
    let mut case_refs = Vec::new();
    let mut responses = Vec::new();

    for (member, case_ref, category) in [
        (&a, "CASE-ALPHA-7731", "payment_fraud"),
        (&b, "CASE-BRAVO-9912", "payment_fraud"),
        (&a, "CASE-CHARLIE-4410", "ban_evasion"),
    ] {
        let body = report_body(&hash, category, case_ref);
        let (status, text) = post(&app, &api, "/api/v1/registry/entries", &member.key, &body).await;
        assert_eq!(status, 201, "{text}");
        let entry: Value = serde_json::from_str(&text).unwrap();
        entry_ids.push(entry["entry_id"].as_str().unwrap().to_owned());
        case_refs.push(case_ref.to_owned());
    }
    let refresh = report_body(&hash, "payment_fraud", "CASE-DELTA-5521");
    post(&app, &api, "/api/v1/registry/entries", &a.key, &refresh).await;
    case_refs.push("CASE-DELTA-5521".to_owned());
    let bad_hash = report_body(&hash.to_uppercase(), "payment_fraud", "CASE-ECHO-1");
    post(&app, &api, "/api/v1/registry/entries", &a.key, &bad_hash).await;
    let extra =
        json!({"identifiers": [{"type": "email", "sha256": hash, "x": 1}], "context": "login"});
    post(&app, &api, "/api/v1/registry/check", &checker.key, &extra).await;
    let revoke = format!("/api/v1/registry/entries/{}/revoke", entry_ids[2]);
    post(
        &app,
        &api,
        &revoke,
        &a.key,
        &json!({"reason": "REASON-FOXTROT"}),
    )
    .await;
    let foreign = format!("/api/v1/registry/entries/{}", entry_ids[0]);
    let response = app
        .client
        .get(format!("{}{foreign}", api.base))
        .bearer_auth(&b.key.key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    for hashes in [
        vec![hash.as_str()],
        vec![hash.as_str(), other.as_str()],
        vec![other.as_str()],
    ] {
        let (status, text) = post(
            &app,
            &api,
            "/api/v1/registry/check",
            &checker.key,
            &check_body(&hashes),
        )
        .await;
        assert_eq!(status, 200, "{text}");
        responses.push(text);
    }
    let (_, own_view) = post(
        &app,
        &api,
        "/api/v1/registry/check",
        &a.key,
        &check_body(&[&hash]),
    )
    .await;
    responses.push(own_view);
    assert!(responses[0].contains("\"match\":true"), "{}", responses[0]);

    let log = std::fs::read_to_string(&api.log).unwrap();
    assert!(
        log.contains("Request answered"),
        "the api's log was not captured: {log}"
    );
    assert!(
        log.contains("Logging started"),
        "debug lines were not captured: {log}"
    );
    let mut forbidden: Vec<String> = vec![hash.clone(), other.clone(), hash.to_uppercase()];
    forbidden.extend(entry_ids);
    forbidden.extend(case_refs);
    for member in [&a, &b, &checker] {
        forbidden.push(member.account.to_string());
        forbidden.push(member.account.0.simple().to_string());
    }
    for secret in &forbidden {
        assert!(!log.contains(secret.as_str()), "the log contains {secret}");
    }
    for response in &responses {
        for secret in &forbidden {
            assert!(
                !response.contains(secret.as_str()),
                "a check response contains {secret}: {response}"
            );
        }
    }
}

#[tokio::test]
async fn the_api_refuses_to_start_without_a_valid_registry_key() {
    let short = base64::engine::general_purpose::STANDARD.encode([1u8; 16]);

    for key in [None, Some("not base64!"), Some(short.as_str())] {
        let mut command = Command::new(moderation_tests::binary("api"));
        command
            .env_clear()
            .env("DATABASE_URL", "postgres://127.0.0.1:1/none")
            .env("APP_ENCRYPTION_KEY", app_encryption_key())
            .env("PORT", "0");
        if let Some(key) = key {
            command.env("APP_REGISTRY_KEY", key);
        }
        let output = command.output().unwrap();

        assert!(!output.status.success(), "{key:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("APP_REGISTRY_KEY"), "{key:?}: {stderr}");
    }
}

/// A valid encryption key, so only the registry key is at fault.
fn app_encryption_key() -> String {
    base64::engine::general_purpose::STANDARD.encode([7u8; 32])
}
