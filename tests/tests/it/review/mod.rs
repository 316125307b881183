//! Human review and appeals (contract 14): items made with results and appeals, claims,
//! decisions as revisions, their webhooks, and the refusals.

mod appeals;
mod decisions;
mod queue;

use moderation_shared::domain::{Modality, Scope};
use moderation_tests::{
    worker::{spawn_worker, TestWorker},
    TestApp, TestKey,
};
use reqwest::Method;
use serde_json::Value;

/// An account whose every completed job goes to review (its policy samples every job), a key
/// with every scope review needs, and a text worker.
pub struct ReviewFleet {
    /// The app.
    pub app: TestApp,
    /// A key with `review:decide`, `job:read`, `job:appeal`, `moderate:prompt`,
    /// `webhook:manage` and `settings:manage`.
    pub key: TestKey,
    _worker: TestWorker,
}

/// The scopes of [`ReviewFleet::key`].
pub const SCOPES: [Scope; 6] = [
    Scope::ReviewDecide,
    Scope::JobRead,
    Scope::JobAppeal,
    Scope::ModeratePrompt,
    Scope::WebhookManage,
    Scope::SettingsManage,
];

impl ReviewFleet {
    /// A fleet whose policy samples `sample_rate` of the jobs.
    pub async fn start(sample_rate: f64) -> Self {
        let app = moderation_tests::spawn_app_with(|s| {
            s.url_guard = moderation_shared::url_guard::UrlGuard::system(true)
        })
        .await;
        let key = app.account_with_key(Some(&SCOPES)).await;
        app.lift_rate_limit(key.account).await;
        app.activate_policy(key.account, |policy| {
            policy.review.sample_rate = sample_rate
        })
        .await;
        let worker = spawn_worker(&app, |s| s.modalities = vec![Modality::Text]).await;
        Self {
            app,
            key,
            _worker: worker,
        }
    }

    /// A second key of the same account, as another reviewer.
    pub async fn other_reviewer(&self) -> TestKey {
        self.app.create_key(self.key.account, Some(&SCOPES)).await
    }

    /// Submits `text` and waits for its job to complete; returns the job's id.
    pub async fn completed(&self, text: &str) -> uuid::Uuid {
        let job = self.app.submit_prompt(&self.key, text).await;
        let body = self.app.finished_job(&self.key, job).await;
        assert_eq!(body["status"], "completed", "{body}");
        job
    }

    /// `method path` as `key`, with `body` as JSON when given.
    pub async fn send(
        &self,
        key: &TestKey,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> reqwest::Response {
        let mut request = self
            .app
            .client
            .request(method, self.app.url(path))
            .bearer_auth(&key.key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.unwrap()
    }

    /// Claims the next item as `key`: the item, or `None` on 204.
    pub async fn claim(&self, key: &TestKey) -> Option<Value> {
        let response = self
            .send(key, Method::POST, "/api/v1/review/claim", None)
            .await;
        match response.status().as_u16() {
            200 => Some(response.json().await.unwrap()),
            204 => None,
            other => panic!("claim answered {other}: {}", response.text().await.unwrap()),
        }
    }

    /// Decides item `id` as `key` with `body`.
    pub async fn decide(&self, key: &TestKey, id: &str, body: Value) -> reqwest::Response {
        self.send(
            key,
            Method::POST,
            &format!("/api/v1/review/items/{id}/decide"),
            Some(body),
        )
        .await
    }

    /// The job object.
    pub async fn job(&self, job: uuid::Uuid) -> Value {
        self.app
            .get(&format!("/api/v1/job/{job}"), &self.key)
            .await
            .json()
            .await
            .unwrap()
    }

    /// Lets the claim on item `id` run out, as if its ten minutes' lease had passed.
    pub async fn expire_claim(&self, id: &str) {
        let client = self.app.db.pool.get().await.unwrap();
        client
            .execute(
                "UPDATE review_items SET claim_expires_at = now() - interval '1 second' \
                 WHERE id = $1",
                &[&id.parse::<uuid::Uuid>().unwrap()],
            )
            .await
            .unwrap();
    }

    /// The review queue's counts.
    pub async fn queue(&self) -> Value {
        self.send(&self.key, Method::GET, "/api/v1/review/queue", None)
            .await
            .json()
            .await
            .unwrap()
    }
}
