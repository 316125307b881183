//! The dispatcher driven one step at a time (`try_dispatch_due`), without its loop.

use std::time::Duration;

use moderation_dispatcher::{Dispatched, Dispatcher};
use moderation_tests::{
    eventually,
    receiver::{Reply, TestReceiver},
    spawn_app, TestApp,
};

use super::{active_secret, assert_verifies, header, manager, BODY};

/// A dispatcher built but never started, so only its steps send; a manager's account with its
/// active secret; and one delivery of [`BODY`] to a receiver answering `replies`, then 200.
struct Stepped {
    app: TestApp,
    secret: String,
    receiver: TestReceiver,
    dispatcher: Dispatcher,
    delivery: uuid::Uuid,
}

async fn stepped(scale: f64, replies: &[Reply]) -> Stepped {
    let app = spawn_app().await;
    let key = manager(&app).await;
    let secret = active_secret(&app, &key).await;
    let receiver = TestReceiver::start().await;
    receiver.script(replies.iter().copied(), Reply::Status(200));
    let dispatcher = Dispatcher::build(app.dispatcher_settings(&receiver, scale))
        .await
        .unwrap();
    let delivery = app
        .make_delivery(key.account, &receiver.url("/hook"), BODY)
        .await;
    Stepped {
        app,
        secret,
        receiver,
        dispatcher,
        delivery,
    }
}

#[tokio::test]
async fn one_step_without_the_loop_delivers_a_completed_jobs_webhook_signed() {
    let t = stepped(1.0, &[]).await;

    let first = t.dispatcher.try_dispatch_due().await.unwrap();
    let second = t.dispatcher.try_dispatch_due().await.unwrap();

    assert_eq!(first, Dispatched::Done(1));
    assert_eq!(second, Dispatched::Empty);
    let got = t.receiver.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, BODY);
    assert_eq!(header(&got[0], "webhook-id"), t.delivery.to_string());
    assert_verifies(&got[0], &t.secret);
    assert_eq!(
        t.app.delivery_state(t.delivery).await,
        ("delivered".to_owned(), 1)
    );
}

#[tokio::test]
async fn a_refused_attempt_is_made_again_by_a_step_once_its_retry_falls_due() {
    let t = stepped(0.001, &[Reply::Status(500)]).await;

    let first = t.dispatcher.try_dispatch_due().await.unwrap();
    let after_refusal = t.app.delivery_state(t.delivery).await;
    // The retry falls due 30 ms later (the schedule scaled by 0.001): step until it is made.
    let retried = eventually(Duration::from_secs(10), "the retry", || async {
        match t.dispatcher.try_dispatch_due().await.unwrap() {
            Dispatched::Done(n) => Some(n),
            Dispatched::Empty => None,
        }
    })
    .await;
    let last = t.dispatcher.try_dispatch_due().await.unwrap();

    assert_eq!(first, Dispatched::Done(1));
    assert_eq!(after_refusal, ("pending".to_owned(), 1));
    assert_eq!(retried, 1);
    assert_eq!(last, Dispatched::Empty);
    assert_eq!(
        t.app.delivery_state(t.delivery).await,
        ("delivered".to_owned(), 2)
    );
    let got = t.receiver.received();
    assert_eq!(got.len(), 2);
    for request in &got {
        assert_verifies(request, &t.secret);
    }
}
