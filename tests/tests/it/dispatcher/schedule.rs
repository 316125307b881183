//! Outcomes and the schedule: twelve attempts, what stops them, what is never retried, and
//! the per-attempt deadline.

use std::time::Duration;

use moderation_shared::url_guard::UrlGuard;
use moderation_tests::{
    receiver::{Reply, TestReceiver},
    spawn_app,
};

use super::{
    active_secret, assert_verifies, header, manager, wait_for_requests, wait_for_state, BODY,
};

#[tokio::test]
async fn a_failing_target_gets_twelve_attempts_at_the_scaled_offsets_and_nothing_after() {
    let app = spawn_app().await;
    let key = manager(&app).await;
    let secret = active_secret(&app, &key).await;
    let receiver = TestReceiver::start().await;
    receiver.script([], Reply::Status(500));
    let scale = 0.0005;
    let dispatcher = app
        .start_dispatcher(app.dispatcher_settings(&receiver, scale))
        .await;

    let id = app
        .make_delivery(key.account, &receiver.url("/hook"), BODY)
        .await;

    assert_eq!(wait_for_state(&app, id, "abandoned").await, 12);
    let got = receiver.received();
    assert_eq!(got.len(), 12);
    // Each retry was due its delay (scaled: 30 s, 1, 2, 4, 8, 16, 32 min, then hourly) after
    // the previous attempt ended, and each started on time (no earlier, at most 1 s late).
    let delays = [
        30.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 3600.0, 3600.0, 3600.0, 3600.0,
    ];
    let client = app.db.pool.get().await.unwrap();
    let attempts = attempt_times(&app, id).await;
    assert_eq!(attempts.len(), 12);
    for (i, attempt) in attempts.iter().enumerate() {
        if i > 0 {
            let waited = (attempt.due - attempts[i - 1].ended).as_seconds_f64();
            let delay = delays[i - 1] * scale;
            // The recorded duration is whole milliseconds, so the end is known to within one.
            assert!(
                (delay - 0.0005..delay + 0.005).contains(&waited),
                "attempt {} due {waited:.4}s after the previous ended, want {delay:.4}s",
                i + 1
            );
        }
        let late = (attempt.started - attempt.due).as_seconds_f64();
        assert!(
            (-0.001..1.0).contains(&late),
            "attempt {} started {late:.3}s late",
            i + 1
        );
    }
    for request in &got {
        assert_eq!(request.body, BODY, "byte-identical body on every attempt");
        assert_eq!(header(request, "webhook-id"), id.to_string());
        assert_verifies(request, &secret);
    }
    let recorded: i64 = client
        .query_one(
            "SELECT count(*) FROM delivery_attempts WHERE delivery_id = $1 AND status_code = 500",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(recorded, 12);
    // Nothing is due any more, and nothing more arrives.
    let due: Option<time::OffsetDateTime> = client
        .query_one(
            "SELECT next_attempt_at FROM deliveries WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(due, None);
    dispatcher.stop().await;
    assert_eq!(receiver.received().len(), 12);
}

#[tokio::test]
async fn a_2xx_stops_the_schedule_and_a_redirect_is_not_followed() {
    let app = spawn_app().await;
    let key = manager(&app).await;
    let receiver = TestReceiver::start().await;
    receiver.script(
        [Reply::Status(503), Reply::Status(302), Reply::Status(204)],
        Reply::Status(500),
    );
    let dispatcher = app
        .start_dispatcher(app.dispatcher_settings(&receiver, 0.001))
        .await;

    let id = app
        .make_delivery(key.account, &receiver.url("/hook"), BODY)
        .await;

    assert_eq!(wait_for_state(&app, id, "delivered").await, 3);
    dispatcher.stop().await;
    assert_eq!(receiver.received().len(), 3);
    let client = app.db.pool.get().await.unwrap();
    let statuses: Vec<Option<i32>> = client
        .query(
            "SELECT status_code FROM delivery_attempts WHERE delivery_id = $1 ORDER BY attempt",
            &[&id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(statuses, vec![Some(503), Some(302), Some(204)]);
}

#[tokio::test]
async fn non_https_and_private_targets_are_undeliverable_without_a_retry() {
    let app = spawn_app().await;
    let key = manager(&app).await;
    let receiver = TestReceiver::start().await;
    let mut settings = app.dispatcher_settings(&receiver, 0.001);
    settings.url_guard = UrlGuard::system(false);
    let dispatcher = app.start_dispatcher(settings).await;

    let plain = app
        .make_delivery(
            key.account,
            &receiver.url("/hook").replace("https", "http"),
            BODY,
        )
        .await;
    let private = app
        .make_delivery(key.account, "https://10.0.0.1/hook", BODY)
        .await;
    let loopback_name = app
        .make_delivery(
            key.account,
            &receiver.url("/hook").replace("127.0.0.1", "localhost"),
            BODY,
        )
        .await;
    let malformed = app.make_delivery(key.account, "https://", BODY).await;

    for id in [plain, private, loopback_name, malformed] {
        assert_eq!(wait_for_state(&app, id, "undeliverable").await, 1);
    }
    dispatcher.stop().await;
    assert!(receiver.received().is_empty());
}

#[tokio::test]
async fn a_receiver_that_trickles_its_answer_is_cut_at_the_deadline() {
    let app = spawn_app().await;
    let key = manager(&app).await;
    let receiver = TestReceiver::start().await;
    receiver.script([Reply::Trickle], Reply::Status(200));
    let mut settings = app.dispatcher_settings(&receiver, 0.001);
    settings.attempt_timeout = Duration::from_millis(700);
    let dispatcher = app.start_dispatcher(settings).await;

    let id = app
        .make_delivery(key.account, &receiver.url("/hook"), BODY)
        .await;

    assert_eq!(wait_for_state(&app, id, "delivered").await, 2);
    dispatcher.stop().await;
    let client = app.db.pool.get().await.unwrap();
    let first = client
        .query_one("SELECT duration_ms, error FROM delivery_attempts WHERE delivery_id = $1 AND attempt = 1", &[&id])
        .await
        .unwrap();
    let duration: i32 = first.get(0);
    assert!((650..2000).contains(&duration), "cut after {duration} ms");
    assert!(first.get::<_, Option<String>>(1).is_some());
}

#[tokio::test]
async fn after_dispatcher_downtime_each_retry_still_waits_its_delay_from_the_last_attempt() {
    let app = spawn_app().await;
    let key = manager(&app).await;
    let receiver = TestReceiver::start().await;
    receiver.script([], Reply::Status(500));
    let scale = 0.001;
    let id = app
        .make_delivery(key.account, &receiver.url("/hook"), BODY)
        .await;
    // The delivery fell due five seconds ago, while no dispatcher ran.
    let client = app.db.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE deliveries SET next_attempt_at = now() - interval '5 seconds' WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();

    let dispatcher = app
        .start_dispatcher(app.dispatcher_settings(&receiver, scale))
        .await;
    wait_for_requests(&receiver, 6, Duration::from_secs(10)).await;
    dispatcher.stop().await;

    // Attempts 2 to 6 each waited 30, 60, 120, 240 and 480 ms (scaled) after the one before
    // ended, rather than all falling due at once five seconds late.
    let attempts = attempt_times(&app, id).await;
    for (i, delay) in [0.030, 0.060, 0.120, 0.240, 0.480].into_iter().enumerate() {
        let gap = (attempts[i + 1].started - attempts[i].ended).as_seconds_f64();
        assert!(
            gap >= delay - 0.0005,
            "attempt {} started {gap:.4}s after the previous ended, want at least {delay}s",
            i + 2
        );
    }
}

/// One recorded attempt's times.
struct AttemptTimes {
    due: time::OffsetDateTime,
    started: time::OffsetDateTime,
    /// `started` plus the recorded (whole millisecond) duration.
    ended: time::OffsetDateTime,
}

async fn attempt_times(app: &moderation_tests::TestApp, id: uuid::Uuid) -> Vec<AttemptTimes> {
    let client = app.db.pool.get().await.unwrap();
    client
        .query(
            "SELECT scheduled_at, started_at, duration_ms FROM delivery_attempts \
             WHERE delivery_id = $1 ORDER BY attempt",
            &[&id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let started: time::OffsetDateTime = r.get(1);
            AttemptTimes {
                due: r.get(0),
                started,
                ended: started + time::Duration::milliseconds(i64::from(r.get::<_, i32>(2))),
            }
        })
        .collect()
}
