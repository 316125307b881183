//! Every request is signed so a receiver can verify it, with both secrets during a rotation.

use std::time::Duration;

use moderation_tests::{receiver::TestReceiver, spawn_app};
use serde_json::Value;

use super::{
    active_secret, assert_verifies, header, manager, wait_for_requests, wait_for_state, BODY,
};

#[tokio::test]
async fn a_delivery_is_signed_and_verifies_as_a_receiver_checks_it() {
    let app = spawn_app().await;
    let key = manager(&app).await;
    let secret = active_secret(&app, &key).await;
    let receiver = TestReceiver::start().await;
    let dispatcher = app
        .start_dispatcher(app.dispatcher_settings(&receiver, 0.001))
        .await;

    let id = app
        .make_delivery(key.account, &receiver.url("/hook"), BODY)
        .await;

    let got = wait_for_requests(&receiver, 1, Duration::from_secs(10)).await;
    assert_eq!(wait_for_state(&app, id, "delivered").await, 1);
    let request = &got[0];
    assert_eq!(request.body, BODY);
    assert_eq!(header(request, "content-type"), "application/json");
    assert_eq!(header(request, "webhook-id"), id.to_string());
    assert_eq!(header(request, "x-service-delivery-id"), id.to_string());
    assert_verifies(request, &secret);
    let client = app.db.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT status_code, response_body FROM delivery_attempts WHERE delivery_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<i32>>(0), Some(200));
    assert_eq!(row.get::<_, Option<String>>(1).as_deref(), Some("ok"));
    dispatcher.stop().await;
}

#[tokio::test]
async fn during_rotation_both_secrets_sign_until_the_old_one_expires() {
    let app = spawn_app().await;
    let key = manager(&app).await;
    let old = active_secret(&app, &key).await;
    let rotated = app
        .client
        .post(app.url("/api/v1/me/webhook-secrets/rotate"))
        .bearer_auth(&key.key)
        .send()
        .await
        .unwrap();
    assert_eq!(rotated.status(), 201);
    let new = rotated.json::<Value>().await.unwrap()["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(old, new);
    let receiver = TestReceiver::start().await;
    let dispatcher = app
        .start_dispatcher(app.dispatcher_settings(&receiver, 0.001))
        .await;

    app.make_delivery(key.account, &receiver.url("/a"), BODY)
        .await;
    let during = wait_for_requests(&receiver, 1, Duration::from_secs(10)).await;
    // The grace period ends.
    let client = app.db.pool.get().await.unwrap();
    client
        .execute("UPDATE webhook_secrets SET expires_at = now() - interval '1 second' WHERE expires_at IS NOT NULL", &[])
        .await
        .unwrap();
    app.make_delivery(key.account, &receiver.url("/b"), BODY)
        .await;
    let after = wait_for_requests(&receiver, 2, Duration::from_secs(10)).await;

    assert_eq!(
        header(&during[0], "webhook-signature").split(' ').count(),
        2
    );
    assert_verifies(&during[0], &old);
    assert_verifies(&during[0], &new);
    assert_eq!(header(&after[1], "webhook-signature").split(' ').count(), 1);
    assert_verifies(&after[1], &new);
    assert!(standardwebhooks::Webhook::new(&old)
        .unwrap()
        .verify(&after[1].body, &after[1].headers)
        .is_err());
    dispatcher.stop().await;
}
