//! Helpers for Shared Registry tests: members with registry keys, hashed emails, and the
//! registry requests.

use moderation_shared::{
    db::{
        accounts::{self, PlanUpdate},
        audit_events::Actor,
    },
    domain::{AccountId, Scope},
    registry::normalise::normalise,
};
use serde_json::{json, Value};

use crate::{TestApp, TestKey};

/// A vetted registry member with a key carrying both registry scopes.
#[derive(Debug, Clone)]
pub struct Member {
    /// Its account.
    pub account: AccountId,
    /// A key with `registry:check` and `registry:submit`.
    pub key: TestKey,
}

/// Changes an account's plan.
pub async fn update_plan(app: &TestApp, account: AccountId, update: PlanUpdate) {
    let client = app.db.pool.get().await.expect("connect");
    accounts::update_plan(&client, Actor::Operator, account, &update)
        .await
        .expect("update plan")
        .expect("account exists");
}

impl TestApp {
    /// A new account vetted as a registry member, with a key holding both registry scopes.
    pub async fn registry_member(&self) -> Member {
        let account = self.create_account().await;
        update_plan(
            self,
            account,
            PlanUpdate {
                registry_member: Some(true),
                // Registry tests are not about rate limits; they send bursts.
                rate_per_minute: Some(1_000_000),
                ..PlanUpdate::default()
            },
        )
        .await;
        let key = self
            .create_key(
                account,
                Some(&[Scope::RegistryCheck, Scope::RegistrySubmit]),
            )
            .await;
        Member { account, key }
    }

    /// `POST path` with a JSON body as `key`.
    pub async fn registry_post_json(
        &self,
        path: &str,
        key: &TestKey,
        body: &Value,
    ) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .bearer_auth(&key.key)
            .json(body)
            .send()
            .await
            .expect("request")
    }

    /// Reports `sha256` in `category` as `key`.
    pub async fn registry_report(
        &self,
        key: &TestKey,
        sha256: &str,
        category: &str,
        case_ref: &str,
    ) -> reqwest::Response {
        self.registry_post_json(
            "/api/v1/registry/entries",
            key,
            &report_body(sha256, category, case_ref),
        )
        .await
    }

    /// Reports and returns the entry, asserting success.
    pub async fn registry_reported(&self, key: &TestKey, sha256: &str, category: &str) -> Value {
        let response = self.registry_report(key, sha256, category, "CASE-1").await;
        assert!(
            response.status().is_success(),
            "report failed: {}",
            response.status()
        );
        response.json().await.expect("entry JSON")
    }

    /// Checks `hashes` as `key` with context `signup`.
    pub async fn registry_check(&self, key: &TestKey, hashes: &[&str]) -> reqwest::Response {
        self.registry_post_json("/api/v1/registry/check", key, &check_body(hashes))
            .await
    }

    /// Checks and returns the body, asserting 200.
    pub async fn registry_checked(&self, key: &TestKey, hashes: &[&str]) -> Value {
        let response = self.registry_check(key, hashes).await;
        assert_eq!(response.status(), 200);
        response.json().await.expect("check JSON")
    }
}

/// The published hash of `email`.
pub fn email_hash(email: &str) -> String {
    normalise(email).expect("valid email").sha256
}

/// A valid report body.
pub fn report_body(sha256: &str, category: &str, case_ref: &str) -> Value {
    json!({
        "identifier": {"type": "email", "sha256": sha256},
        "category": category,
        "member_case_ref": case_ref,
        "attest_human_review": true,
    })
}

/// A valid check body.
pub fn check_body(hashes: &[&str]) -> Value {
    json!({
        "identifiers": hashes
            .iter()
            .map(|h| json!({"type": "email", "sha256": h}))
            .collect::<Vec<_>>(),
        "context": "signup",
    })
}
