//! The dispatcher against a real HTTPS receiver: signatures, the schedule, outcomes, crashes.

use std::time::{Duration, Instant};

use moderation_shared::{clock, domain::Scope, signing, url_guard::UrlGuard};
use moderation_tests::{
    eventually,
    receiver::{Received, Reply, TestReceiver},
    spawn_app, TestApp, TestKey,
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
    // Each attempt was due at the spec's offsets from the first (scaled): 30 s, 1, 2, 4, 8,
    // 16, 32 min, then hourly; and each started on time (no earlier, at most 1 s late).
    let delays = [
        30.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 3600.0, 3600.0, 3600.0, 3600.0,
    ];
    let client = app.db.pool.get().await.unwrap();
    let attempts: Vec<(time::OffsetDateTime, time::OffsetDateTime)> = client
        .query("SELECT scheduled_at, started_at FROM delivery_attempts WHERE delivery_id = $1 ORDER BY attempt", &[&id])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(attempts.len(), 12);
    let first_due = attempts[0].0;
    let mut expected = 0.0;
    for (i, (due, started)) in attempts.iter().enumerate() {
        if i > 0 {
            expected += delays[i - 1] * scale;
        }
        let offset = (*due - first_due).as_seconds_f64();
        assert!(
            (offset - expected).abs() < 0.002,
            "attempt {} due at {offset:.4}s, want {expected:.4}s",
            i + 1
        );
        let late = (*started - *due).as_seconds_f64();
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

/// Finishes a job as a worker does: the result and its delivery in one transaction.
async fn finish(app: &TestApp, job: uuid::Uuid) -> Option<moderation_shared::db::jobs::Finished> {
    let mut client = app.db.pool.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let outcome = moderation_shared::payload::JobOutcome::Decided {
        is_prohibited: true,
        reason: Some("violence".into()),
        categories: None,
        nsfw_checked: None,
    };
    let mut finished = moderation_shared::db::jobs::finish_many(
        &*tx,
        &[(moderation_shared::domain::JobId(job), outcome)],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    finished.pop().flatten()
}

#[tokio::test]
async fn the_target_is_the_requests_url_else_the_global_one_and_none_after_the_global_is_cleared() {
    let app = moderation_tests::spawn_app_with(|s| s.url_guard = UrlGuard::system(true)).await;
    let key = app
        .account_with_key(Some(&[Scope::WebhookManage, Scope::ModeratePrompt]))
        .await;
    let secret = active_secret(&app, &key).await;
    let receiver = TestReceiver::start().await;
    let registered = app
        .client
        .post(app.url("/api/v1/webhook/register"))
        .bearer_auth(&key.key)
        .json(&serde_json::json!({"url": receiver.url("/global")}))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 200);
    let with_own = app
        .submit(
            "prompt",
            &key,
            reqwest::multipart::Form::new()
                .text("text", "hi")
                .text("webhook_url", receiver.url("/own")),
        )
        .await;
    let with_own: uuid::Uuid = with_own.json::<Value>().await.unwrap()["job_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let plain = app.submit_prompt(&key, "hello").await;
    let dispatcher = app
        .start_dispatcher(app.dispatcher_settings(&receiver, 0.001))
        .await;

    finish(&app, with_own).await.unwrap().delivery_id.unwrap();
    finish(&app, plain).await.unwrap().delivery_id.unwrap();
    let got = wait_for_requests(&receiver, 2, Duration::from_secs(10)).await;
    let cleared = app
        .client
        .delete(app.url("/api/v1/webhook/register"))
        .bearer_auth(&key.key)
        .send()
        .await
        .unwrap();
    assert_eq!(cleared.status(), 204);
    let later = app
        .submit_prompt(&key, "after the global URL was cleared")
        .await;
    let finished_later = finish(&app, later).await.unwrap();
    dispatcher.stop().await;

    let by_job = |job: uuid::Uuid| {
        got.iter()
            .find(|r| {
                serde_json::from_slice::<Value>(&r.body).unwrap()["job_id"] == job.to_string()
            })
            .unwrap()
            .clone()
    };
    let own = by_job(with_own);
    let global = by_job(plain);
    assert_verifies(&own, &secret);
    assert_verifies(&global, &secret);
    let body: Value = serde_json::from_slice(&own.body).unwrap();
    assert_eq!(body["status"], "completed");
    assert_eq!(body["is_prohibited"], true);
    assert_eq!(body["reason"], "violence");
    assert_eq!(body["delivery_id"], header(&own, "webhook-id"));
    assert_eq!(finished_later.delivery_id, None);
    assert_eq!(receiver.received().len(), 2);
    let paths: Vec<_> = [&own, &global]
        .iter()
        .map(|r| header(r, "webhook-id").to_owned())
        .collect();
    assert_ne!(paths[0], paths[1]);
}

#[tokio::test]
async fn a_job_finished_twice_completes_once_with_one_delivery() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let client = app.db.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO webhook_endpoints (account_id, url) VALUES ($1, 'https://93.184.215.14/hook')",
            &[&key.account.0],
        )
        .await
        .unwrap();
    let job = app.submit_prompt(&key, "hello").await;

    let first = finish(&app, job).await;
    let second = finish(&app, job).await;

    assert!(first.unwrap().delivery_id.is_some());
    assert_eq!(second, None);
    let deliveries: i64 = client
        .query_one("SELECT count(*) FROM deliveries WHERE job_id = $1", &[&job])
        .await
        .unwrap()
        .get(0);
    assert_eq!(deliveries, 1);
}

#[tokio::test]
async fn one_batch_naming_a_job_twice_claims_and_finishes_it_once_and_answers_in_order() {
    use moderation_shared::{
        db::jobs::{finish_many, Claim},
        domain::JobId,
        payload::JobOutcome,
    };
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let mut client = app.db.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO webhook_endpoints (account_id, url) VALUES ($1, 'https://93.184.215.14/hook')",
            &[&key.account.0],
        )
        .await
        .unwrap();
    let twice = JobId(app.submit_prompt(&key, "hello").await);
    let once = JobId(app.submit_prompt(&key, "world").await);

    let claims = claim(&client, &[twice, once, twice]).await;
    let claimed: Vec<Option<JobId>> = claims
        .iter()
        .map(|c| match c {
            Claim::Claimed(job) => Some(job.id),
            _ => None,
        })
        .collect();
    assert_eq!(
        claimed.iter().flatten().filter(|&&id| id == twice).count(),
        1
    );
    assert_eq!(claimed[1], Some(once));
    assert!(claims.iter().any(|c| matches!(c, Claim::Duplicate)));

    let passed = JobOutcome::Decided {
        is_prohibited: false,
        reason: None,
        categories: None,
        nsfw_checked: None,
    };
    let tx = client.transaction().await.unwrap();
    let finished = finish_many(
        &*tx,
        &[
            (twice, passed.clone()),
            (once, passed.clone()),
            (twice, passed),
        ],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();

    assert_eq!(finished.iter().filter(|f| f.is_some()).count(), 2);
    assert!(finished[1].is_some());
    for job in [twice, once] {
        assert_eq!(app.deliveries_of(job.0).await, 1);
    }
}

#[tokio::test]
async fn a_job_out_of_tries_is_answered_exhausted_once_and_a_job_on_its_last_try_is_claimed() {
    use moderation_shared::{db::jobs::Claim, domain::JobId};
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let client = app.db.pool.get().await.unwrap();
    let last = JobId(app.submit_prompt(&key, "fourth try done").await);
    let spent = JobId(app.submit_prompt(&key, "fifth try done").await);
    client
        .execute(
            "UPDATE jobs SET attempts = CASE WHEN id = $1 THEN 4 ELSE 5 END",
            &[&last.0],
        )
        .await
        .unwrap();

    let claims = claim(&client, &[last, spent, last, spent]).await;

    let kinds: Vec<&str> = claims
        .iter()
        .map(|c| match c {
            Claim::Claimed(job) if job.id == last && job.attempts == 5 => "claimed last",
            Claim::Claimed(_) => "claimed other",
            Claim::Exhausted => "exhausted",
            Claim::Duplicate => "duplicate",
        })
        .collect();
    // Which of a job's two requests gets the answer is the database's choice.
    let of = |i: usize, j: usize| {
        let mut pair = [kinds[i], kinds[j]];
        pair.sort_unstable();
        pair
    };
    assert_eq!(of(0, 2), ["claimed last", "duplicate"]);
    assert_eq!(of(1, 3), ["duplicate", "exhausted"]);
    let row = client
        .query_one(
            "SELECT status, attempts FROM jobs WHERE id = $1",
            &[&spent.0],
        )
        .await
        .unwrap();
    assert_eq!(
        (row.get::<_, &str>(0), row.get::<_, i32>(1)),
        ("queued", 5),
        "an exhausted job is ended by finish, not by the claim"
    );
}

/// Claims `ids` in one batch, as a worker's first delivery of each, with 5 tries allowed.
async fn claim(
    client: &deadpool_postgres::Client,
    ids: &[moderation_shared::domain::JobId],
) -> Vec<moderation_shared::db::jobs::Claim> {
    use moderation_shared::db::jobs::{claim_many, ClaimRequest};
    let requests: Vec<ClaimRequest> = ids
        .iter()
        .map(|&id| ClaimRequest {
            id,
            redelivery: false,
            first_stage: moderation_shared::domain::JobStage::Classifying,
        })
        .collect();
    claim_many(&***client, &requests, 5).await.unwrap()
}
