//! The dispatcher against a real HTTPS receiver: signatures, the schedule, outcomes, crashes,
//! and how a finished job gets its delivery.

mod health;
mod jobs;
mod lifecycle;
mod log;
mod records;
mod schedule;
mod signatures;
mod step;

use std::time::Duration;

use moderation_shared::{clock, domain::Scope, signing};
use moderation_tests::{
    eventually,
    receiver::{Received, TestReceiver},
    TestApp, TestKey,
};
use serde_json::Value;

const BODY: &[u8] =
    br#"{"job_id":"j","status":"completed","is_prohibited":false,"delivery_id":"d"}"#;

async fn manager(app: &TestApp) -> TestKey {
    app.account_with_key(Some(&[Scope::WebhookManage])).await
}

async fn active_secret(app: &TestApp, key: &TestKey) -> String {
    let response = app
        .client
        .post(app.url("/api/v1/me/webhook-secrets/reveal"))
        .bearer_auth(&key.key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json::<Value>().await.unwrap()["secret"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn header<'a>(received: &'a Received, name: &str) -> &'a str {
    received
        .headers
        .get(name)
        .map(|v| v.to_str().unwrap())
        .unwrap_or_default()
}

/// Checks one request as a receiver would, with both our code and the standardwebhooks crate.
fn assert_verifies(received: &Received, secret: &str) {
    standardwebhooks::Webhook::new(secret)
        .unwrap()
        .verify(&received.body, &received.headers)
        .expect("standardwebhooks verifies");
    let timestamp: i64 = header(received, "webhook-timestamp").parse().unwrap();
    signing::verify(
        secret,
        header(received, "webhook-id"),
        timestamp,
        header(received, "webhook-signature"),
        &received.body,
        clock::now().unix_timestamp(),
        300,
    )
    .expect("our verifier agrees");
}

async fn wait_for_requests(receiver: &TestReceiver, n: usize, within: Duration) -> Vec<Received> {
    eventually(within, &format!("{n} requests"), || async {
        let got = receiver.received();
        (got.len() >= n).then_some(got)
    })
    .await
}

async fn wait_for_state(app: &TestApp, id: uuid::Uuid, state: &str) -> i32 {
    eventually(Duration::from_secs(30), state, || async {
        let (now, attempts) = app.delivery_state(id).await;
        (now == state).then_some(attempts)
    })
    .await
}
