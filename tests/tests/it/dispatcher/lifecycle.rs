//! The running dispatcher: woken by new deliveries, and killed mid-schedule without losing any.

use std::time::{Duration, Instant};

use moderation_tests::{
    receiver::{Reply, TestReceiver},
    spawn_app,
};

use super::{manager, wait_for_requests, wait_for_state, BODY};

#[tokio::test]
async fn a_new_delivery_wakes_an_idle_dispatcher_without_waiting_for_its_poll() {
    let app = spawn_app().await;
    let key = manager(&app).await;
    let receiver = TestReceiver::start().await;
    let mut settings = app.dispatcher_settings(&receiver, 0.001);
    // Only the notification can wake it in time.
    settings.idle_poll = Duration::from_secs(120);
    let dispatcher = app.start_dispatcher(settings).await;
    // Let it reach its idle sleep: its first look finds nothing.
    tokio::task::yield_now().await;

    let sent = Instant::now();
    app.make_delivery(key.account, &receiver.url("/hook"), BODY)
        .await;

    let got = wait_for_requests(&receiver, 1, Duration::from_secs(10)).await;
    assert!(got[0].at.duration_since(sent) < Duration::from_secs(10));
    dispatcher.stop().await;
}

#[tokio::test]
async fn a_dispatcher_killed_mid_schedule_loses_nothing_and_costs_at_most_one_extra_send() {
    let app = spawn_app().await;
    let key = manager(&app).await;
    let receiver = TestReceiver::start().await;
    receiver.script([], Reply::Status(500));
    let ca = receiver.ca_file();
    let mut child = std::process::Command::new(moderation_tests::binary("dispatcher"))
        .env("DATABASE_URL", app.db.settings.url.expose())
        .env("REDIS_URL", app.redis.url.expose())
        .env("APP_REDIS_NAMESPACE", &app.redis.namespace)
        .env("APP_ENCRYPTION_KEY", app.encryption_key.to_base64())
        .env("APP_ALLOW_PRIVATE_URLS", "true")
        .env("APP_EXTRA_CA_FILE", ca.path())
        .env("APP_WEBHOOK_SCHEDULE_SCALE", "0.01")
        .env("APP_WEBHOOK_TIMEOUT_MS", "1000")
        .env("METRICS_PORT", "0")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let id = app
        .make_delivery(key.account, &receiver.url("/hook"), BODY)
        .await;
    wait_for_requests(&receiver, 2, Duration::from_secs(20)).await;

    child.kill().unwrap();
    child.wait().unwrap();
    let sent_before = receiver.received().len();
    receiver.script([], Reply::Status(200));
    let mut settings = app.dispatcher_settings(&receiver, 0.01);
    settings.attempt_timeout = Duration::from_millis(1000);
    let dispatcher = app.start_dispatcher(settings).await;

    let attempts = wait_for_state(&app, id, "delivered").await;
    dispatcher.stop().await;
    let sent = receiver.received().len();
    assert!(
        sent > sent_before,
        "the new dispatcher finished the schedule"
    );
    assert!(
        attempts as usize >= sent,
        "every send was a counted attempt"
    );
    assert!(
        attempts as usize <= sent + 1,
        "at most one claimed attempt was lost with the process"
    );
    let client = app.db.pool.get().await.unwrap();
    let recorded: i64 = client
        .query_one(
            "SELECT count(*) FROM delivery_attempts WHERE delivery_id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        recorded as usize + 1 >= sent,
        "at most one attempt went unrecorded"
    );
}

/// The pid of the session `LISTEN`ing under `application_name`, once there is one other than
/// `not`.
async fn listener_pid(app: &moderation_tests::TestApp, application_name: &str, not: i32) -> i32 {
    let client = app.db.pool.get().await.unwrap();
    moderation_tests::eventually(Duration::from_secs(20), "a listening session", || {
        let client = &client;
        async move {
            client
                .query_opt(
                    "SELECT pid FROM pg_stat_activity \
                     WHERE application_name = $1 AND query LIKE 'LISTEN%' AND pid <> $2",
                    &[&application_name, &not],
                )
                .await
                .unwrap()
                .map(|row| row.get::<_, i32>(0))
        }
    })
    .await
}

#[tokio::test]
async fn the_dispatcher_listens_on_the_direct_url_and_again_after_its_session_is_ended() {
    use moderation_shared::config::Secret;
    let app = spawn_app().await;
    let key = manager(&app).await;
    let receiver = TestReceiver::start().await;
    let mut settings = app.dispatcher_settings(&receiver, 0.001);
    let name = format!("listen-{}", uuid::Uuid::new_v4().simple());
    settings.direct_url = Secret::new(format!(
        "{}?application_name={name}",
        app.db.settings.url.expose()
    ));
    // Only a notification can wake it in time.
    settings.idle_poll = Duration::from_secs(120);
    let dispatcher = app.start_dispatcher(settings).await;
    let first = listener_pid(&app, &name, 0).await;

    // As a failover or an administrator ends it.
    let client = app.db.pool.get().await.unwrap();
    client
        .execute("SELECT pg_terminate_backend($1)", &[&first])
        .await
        .unwrap();
    let second = listener_pid(&app, &name, first).await;
    // Its first look after listening again is over once the idle sleep begins.
    tokio::task::yield_now().await;
    let sent = Instant::now();
    app.make_delivery(key.account, &receiver.url("/hook"), BODY)
        .await;

    let got = wait_for_requests(&receiver, 1, Duration::from_secs(10)).await;
    assert_ne!(first, second);
    assert!(got[0].at.duration_since(sent) < Duration::from_secs(10));
    dispatcher.stop().await;
}

#[tokio::test]
async fn the_dispatcher_refuses_a_direct_url_of_several_hosts_without_read_write() {
    let app = spawn_app().await;
    let mut child = std::process::Command::new(moderation_tests::binary("dispatcher"))
        .env("DATABASE_URL", app.db.settings.url.expose())
        .env(
            "APP_DATABASE_DIRECT_URL",
            "postgres://postgres@127.0.0.1:1,127.0.0.1:2/x",
        )
        .env("REDIS_URL", app.redis.url.expose())
        .env("APP_ENCRYPTION_KEY", app.encryption_key.to_base64())
        .env("METRICS_PORT", "0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    let status = moderation_tests::eventually(Duration::from_secs(20), "the exit", || {
        let exited = child.try_wait().unwrap();
        async move { exited }
    })
    .await;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();

    assert!(!status.success());
    assert!(stderr.contains("APP_DATABASE_DIRECT_URL"), "{stderr}");
    assert!(
        stderr.contains("target_session_attrs=read-write"),
        "{stderr}"
    );
}
