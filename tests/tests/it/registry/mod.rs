//! The Shared Registry: reports, the entry state machine, checks, quota, disputes and privacy.

mod check;
mod disputes;
mod entries;
mod privacy;
mod revoke;
mod validation;

use moderation_tests::{assert_error, TestApp};

/// Puts an entry's retention end in the past.
pub async fn expire(app: &TestApp, entry_id: &str) {
    let client = app.db.pool.get().await.unwrap();
    let id: uuid::Uuid = entry_id.parse().unwrap();
    client
        .execute(
            "UPDATE registry_entries SET expires_at = now() - interval '1 second' WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
}

/// Asserts a 400 INVALID_REQUEST whose message never repeats `secret`.
pub async fn assert_invalid(response: reqwest::Response, secret: &str, case: &str) {
    let body = assert_error(response, 400, "INVALID_REQUEST").await;
    assert!(
        !body.to_string().contains(secret),
        "{case}: the error body repeats the hash: {body}"
    );
}
