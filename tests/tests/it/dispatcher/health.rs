//! Webhook endpoint health (contract 17) with a dispatcher driven step by step: the account
//! URL's state kept from its attempts, the automatic disable (by time and count, at once on
//! 410), held deliveries, the test send, and the operator's signed notices.

use std::time::Duration;

use moderation_dispatcher::{settings::OperatorWebhook, Dispatched, Dispatcher};
use moderation_shared::{config::Secret, endpoint_health::HealthSettings, signing};
use moderation_tests::{
    eventually,
    receiver::{Received, Reply, TestReceiver},
    spawn_app, spawn_app_with, TestApp, TestKey,
};
use serde_json::{json, Value};
use time::{format_description::well_known::Rfc3339, OffsetDateTime};
use uuid::Uuid;

use super::{active_secret, assert_verifies, header, manager, BODY};

/// A stepped dispatcher (never started), a manager's key and the account's URL at a receiver
/// answering 200 unless scripted.
struct Health {
    app: TestApp,
    key: TestKey,
    receiver: TestReceiver,
    dispatcher: Dispatcher,
}

/// Health thresholds that never disable by time within a test.
fn lenient() -> HealthSettings {
    HealthSettings {
        disable_after: Duration::from_secs(3600),
        ..HealthSettings::default()
    }
}

/// With the schedule scaled by `scale`, `health`, and `operator` receiving notices.
async fn health(
    scale: f64,
    health: HealthSettings,
    operator: Option<(&TestReceiver, &str)>,
) -> Health {
    // The api shows `disable_at` by the same settings.
    let shown = health.clone();
    let app = spawn_app_with(move |api| api.health = shown).await;
    let key = manager(&app).await;
    app.lift_rate_limit(key.account).await;
    let receiver = TestReceiver::start().await;
    app.set_webhook_url(key.account, &receiver.url("/hook"))
        .await;
    let mut settings = app.dispatcher_settings(&receiver, scale);
    // One attempt at a time: the order of sends is the order of claims.
    settings.concurrency = 1;
    settings.health = health;
    if let Some((to, secret)) = operator {
        settings.extra_ca_pem = Some(format!("{}{}", receiver.ca_pem, to.ca_pem).into_bytes());
        settings.operator = Some(OperatorWebhook {
            url: to.url("/operator"),
            secret: Secret::new(secret.to_owned()),
        });
    }
    let dispatcher = Dispatcher::build(settings).await.unwrap();
    Health {
        app,
        key,
        receiver,
        dispatcher,
    }
}

impl Health {
    async fn delivery(&self) -> Uuid {
        self.app
            .make_delivery(self.key.account, &self.receiver.url("/hook"), BODY)
            .await
    }

    /// Steps the dispatcher until `probe` holds and nothing is due.
    async fn step_until<F, Fut>(&self, what: &str, probe: F)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        eventually(Duration::from_secs(30), what, || async {
            let step = self.dispatcher.try_dispatch_due().await.unwrap();
            (probe().await && step == Dispatched::Empty).then_some(())
        })
        .await;
    }

    /// Steps until the URL is in `state`.
    async fn step_until_state(&self, state: &str) -> Value {
        self.step_until(state, || async { self.state().await["state"] == state })
            .await;
        self.state().await
    }

    /// Steps until delivery `id` is in `state`.
    async fn step_until_delivery(&self, id: Uuid, state: &str) {
        self.step_until(state, || async {
            self.app.delivery_state(id).await.0 == state
        })
        .await;
    }

    async fn state(&self) -> Value {
        let response = self.app.get("/api/v1/webhook/register", &self.key).await;
        assert_eq!(response.status(), 200);
        response.json().await.unwrap()
    }

    async fn post(&self, path: &str, body: Option<Value>) -> (u16, Value) {
        let request = self
            .app
            .client
            .post(self.app.url(path))
            .bearer_auth(&self.key.key);
        let response = match body {
            Some(body) => request.json(&body),
            None => request,
        }
        .send()
        .await
        .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// The `webhook.endpoint_state` audit events of the account: (from, to, reason), oldest
    /// first.
    async fn transitions(&self) -> Vec<(String, String, Value)> {
        let client = self.app.db.pool.get().await.unwrap();
        client
            .query(
                "SELECT detail FROM audit_events WHERE account_id = $1 \
                 AND action = 'webhook.endpoint_state' ORDER BY id",
                &[&self.key.account.0],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| {
                let detail: Value = r.get(0);
                (
                    detail["from"].as_str().unwrap().to_owned(),
                    detail["to"].as_str().unwrap().to_owned(),
                    detail["disabled_reason"].clone(),
                )
            })
            .collect()
    }

    fn hook_requests(&self) -> Vec<Received> {
        self.receiver.received()
    }
}

fn at(value: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(value.as_str().unwrap(), &Rfc3339).unwrap()
}

fn transition(from: &str, to: &str, reason: Value) -> (String, String, Value) {
    (from.to_owned(), to.to_owned(), reason)
}

#[tokio::test]
async fn a_failed_attempt_makes_the_url_failing_and_a_2xx_makes_it_active_again() {
    let t = health(0.0001, lenient(), None).await;
    t.receiver.script([Reply::Status(500)], Reply::Status(200));
    let fresh = t.state().await;
    assert_eq!(fresh["state"], "active");
    assert_eq!(fresh["failing_since"], Value::Null);
    assert_eq!(fresh["held"], 0);

    let id = t.delivery().await;
    t.dispatcher.try_dispatch_due().await.unwrap();
    let failing = t.state().await;

    assert_eq!(failing["state"], "failing");
    assert_eq!(failing["disabled_reason"], Value::Null);
    assert_eq!(failing["last_success_at"], Value::Null);
    assert_eq!(failing["last_failure"]["status_code"], 500);
    assert_eq!(failing["last_failure"]["error"], "answered 500");
    assert_eq!(failing["failing_since"], failing["last_failure"]["at"]);
    assert_eq!(
        at(&failing["disable_at"]) - at(&failing["failing_since"]),
        time::Duration::hours(1)
    );
    t.step_until_delivery(id, "delivered").await;
    let recovered = t.state().await;
    assert_eq!(recovered["state"], "active");
    assert_eq!(recovered["failing_since"], Value::Null);
    assert_eq!(recovered["disable_at"], Value::Null);
    assert!(at(&recovered["last_success_at"]) > at(&failing["failing_since"]));
    assert_eq!(
        recovered["last_failure"]["status_code"], 500,
        "kept as history"
    );
    assert_eq!(
        t.transitions().await,
        [
            transition("active", "failing", Value::Null),
            transition("failing", "active", Value::Null)
        ]
    );
}

#[tokio::test]
async fn a_410_disables_the_url_at_once_and_its_deliveries_are_held_never_attempted() {
    let t = health(0.0001, lenient(), None).await;
    t.receiver.script([Reply::Status(410)], Reply::Status(200));
    let first = t.delivery().await;
    t.dispatcher.try_dispatch_due().await.unwrap();

    let disabled = t.state().await;
    let second = t.delivery().await;
    for _ in 0..5 {
        t.dispatcher.try_dispatch_due().await.unwrap();
    }

    assert_eq!(disabled["state"], "disabled");
    assert_eq!(disabled["disabled_reason"], "gone");
    assert_eq!(
        t.hook_requests().len(),
        1,
        "nothing attempted after the 410"
    );
    assert_eq!(t.app.delivery_state(first).await, ("held".to_owned(), 1));
    assert_eq!(t.app.delivery_state(second).await, ("held".to_owned(), 0));
    assert_eq!(t.state().await["held"], 2);
    let log: Value = t
        .app
        .get("/api/v1/deliveries?status=held", &t.key)
        .await
        .json()
        .await
        .unwrap();
    let listed: Vec<&str> = log["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            assert_eq!(d["status"], "held");
            assert_eq!(d["next_attempt_at"], Value::Null);
            d["delivery_id"].as_str().unwrap()
        })
        .collect();
    assert_eq!(listed, [second.to_string(), first.to_string()]);
    let (resend, _) = t
        .post(&format!("/api/v1/deliveries/{first}/resend"), None)
        .await;
    assert_eq!(resend, 409, "a held delivery is not resent");
    assert_eq!(
        t.transitions().await,
        [transition("active", "disabled", json!("gone"))]
    );
}

#[tokio::test]
async fn enabling_with_replay_held_sends_the_held_deliveries_oldest_first() {
    let t = health(0.0001, lenient(), None).await;
    let (status, _) = t.post("/api/v1/webhook/disable", None).await;
    assert_eq!(status, 200);
    let mut made = Vec::new();
    for _ in 0..3 {
        made.push(t.delivery().await);
    }
    t.dispatcher.try_dispatch_due().await.unwrap();
    assert!(t.hook_requests().is_empty());

    let (status, enabled) = t
        .post("/api/v1/webhook/enable", Some(json!({"replay": "held"})))
        .await;
    assert_eq!(status, 200);
    assert_eq!(enabled["state"], "active");
    let last = *made.last().unwrap();
    t.step_until_delivery(last, "delivered").await;

    let order: Vec<String> = t
        .hook_requests()
        .iter()
        .map(|r| header(r, "webhook-id").to_owned())
        .collect();
    let made: Vec<String> = made.iter().map(Uuid::to_string).collect();
    assert_eq!(order, made, "oldest first, each once");
    assert_eq!(t.state().await["held"], 0);
}

#[tokio::test]
async fn enabling_with_replay_none_abandons_the_held_deliveries() {
    let t = health(0.0001, lenient(), None).await;
    t.post("/api/v1/webhook/disable", None).await;
    let id = t.delivery().await;

    let (status, enabled) = t
        .post("/api/v1/webhook/enable", Some(json!({"replay": "none"})))
        .await;
    let later = t.delivery().await;
    t.step_until_delivery(later, "delivered").await;

    assert_eq!(status, 200);
    assert_eq!(enabled["held"], 0);
    assert_eq!(t.app.delivery_state(id).await, ("abandoned".to_owned(), 0));
    assert_eq!(
        t.hook_requests().len(),
        1,
        "only the later delivery was sent"
    );
}

#[tokio::test]
async fn pause_holds_new_and_pending_deliveries_and_resume_sends_them_in_order() {
    let t = health(0.0001, lenient(), None).await;
    t.receiver.script([Reply::Status(500)], Reply::Status(200));
    let retrying = t.delivery().await;
    t.dispatcher.try_dispatch_due().await.unwrap();

    let (status, paused) = t.post("/api/v1/webhook/pause", None).await;
    let new = t.delivery().await;
    for _ in 0..5 {
        t.dispatcher.try_dispatch_due().await.unwrap();
    }
    let held = t.hook_requests().len();
    let (resumed_status, resumed) = t.post("/api/v1/webhook/resume", None).await;
    t.step_until_delivery(new, "delivered").await;

    assert_eq!(status, 200);
    assert_eq!(paused["state"], "paused");
    assert_eq!(paused["held"], 1, "the retrying delivery is held");
    assert_eq!(held, 1, "nothing sent while paused");
    assert_eq!(resumed_status, 200);
    assert_eq!(resumed["state"], "active");
    assert_eq!(resumed["failing_since"], Value::Null);
    assert_eq!(t.app.delivery_state(retrying).await.0, "delivered");
    let order: Vec<String> = t.hook_requests()[1..]
        .iter()
        .map(|r| header(r, "webhook-id").to_owned())
        .collect();
    assert_eq!(order, [retrying.to_string(), new.to_string()]);
    assert_eq!(
        t.transitions().await,
        [
            transition("active", "failing", Value::Null),
            transition("failing", "paused", Value::Null),
            transition("paused", "active", Value::Null),
        ]
    );
}

#[tokio::test]
async fn a_failing_url_is_disabled_once_both_the_time_and_the_count_are_reached() {
    let settings = HealthSettings {
        disable_after: Duration::from_millis(400),
        disable_min_failures: 3,
        ..HealthSettings::default()
    };
    // Attempts 30 ms, 60 ms, 120 ms … apart: the third failure comes before 400 ms.
    let t = health(0.001, settings, None).await;
    t.receiver.script([], Reply::Status(500));
    t.delivery().await;

    let disabled = t.step_until_state("disabled").await;

    assert_eq!(disabled["disabled_reason"], "auto");
    let client = t.app.db.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT e.failures_since, e.failing_since, \
                    (SELECT at FROM audit_events a WHERE a.account_id = e.account_id \
                       AND a.action = 'webhook.endpoint_state' AND a.detail->>'to' = 'disabled') \
             FROM webhook_endpoints e WHERE e.account_id = $1",
            &[&t.key.account.0],
        )
        .await
        .unwrap();
    let failures: i32 = row.get(0);
    let since: OffsetDateTime = row.get(1);
    let disabled_at: OffsetDateTime = row.get(2);
    assert!(failures >= 3, "{failures}");
    assert!(
        disabled_at - since >= time::Duration::milliseconds(400),
        "{}",
        disabled_at - since
    );
    assert_eq!(
        t.transitions().await,
        [
            transition("active", "failing", Value::Null),
            transition("failing", "disabled", json!("auto")),
        ]
    );
}

#[tokio::test]
async fn enough_time_with_too_few_failures_keeps_the_url_failing() {
    let settings = HealthSettings {
        disable_after: Duration::from_millis(1),
        disable_min_failures: 13,
        ..HealthSettings::default()
    };
    let t = health(0.00001, settings, None).await;
    t.receiver.script([], Reply::Status(500));
    let id = t.delivery().await;

    t.step_until_delivery(id, "abandoned").await;

    let state = t.state().await;
    assert_eq!(state["state"], "failing", "12 failures are one too few");
    assert_eq!(t.hook_requests().len(), 12);
    let next = t.delivery().await;
    t.dispatcher.try_dispatch_due().await.unwrap();
    assert_eq!(t.state().await["state"], "disabled", "the 13th disables");
    assert_eq!(t.app.delivery_state(next).await.0, "held");
}

#[tokio::test]
async fn with_auto_disable_off_a_410_leaves_the_url_failing() {
    let settings = HealthSettings {
        auto_disable: false,
        disable_after: Duration::from_millis(1),
        disable_min_failures: 1,
        ..HealthSettings::default()
    };
    let t = health(0.00001, settings, None).await;
    t.receiver.script([], Reply::Status(410));
    let id = t.delivery().await;

    t.step_until_delivery(id, "abandoned").await;

    let state = t.state().await;
    assert_eq!(state["state"], "failing");
    assert_eq!(state["disable_at"], Value::Null);
    assert_eq!(t.hook_requests().len(), 12);
}

#[tokio::test]
async fn held_deliveries_are_abandoned_after_the_hold() {
    let settings = HealthSettings {
        hold: Duration::from_millis(300),
        ..lenient()
    };
    let t = health(0.0001, settings, None).await;
    t.post("/api/v1/webhook/pause", None).await;
    let id = t.delivery().await;
    assert_eq!(t.app.delivery_state(id).await.0, "held");

    t.step_until_delivery(id, "abandoned").await;

    assert!(t.hook_requests().is_empty());
    assert_eq!(t.state().await["held"], 0);
}

#[tokio::test]
async fn a_per_request_webhook_url_has_no_state() {
    let t = health(0.0001, lenient(), None).await;
    t.post("/api/v1/webhook/pause", None).await;
    let id = t
        .app
        .make_job_url_delivery(t.key.account, &t.receiver.url("/job-url"), BODY)
        .await;
    t.receiver.script([Reply::Status(410)], Reply::Status(200));

    t.step_until_delivery(id, "delivered").await;

    assert_eq!(
        t.state().await["state"],
        "paused",
        "unchanged by a 410 elsewhere"
    );
    assert_eq!(t.hook_requests().len(), 2);
}

#[tokio::test]
async fn a_test_send_is_one_signed_ping_logged_like_any_delivery_whatever_the_state() {
    let t = health(0.0001, lenient(), None).await;
    let secret = active_secret(&t.app, &t.key).await;
    t.post("/api/v1/webhook/disable", None).await;

    let (status, accepted) = t.post("/api/v1/webhook/test", None).await;
    let id: Uuid = accepted["delivery_id"].as_str().unwrap().parse().unwrap();
    t.step_until_delivery(id, "delivered").await;

    assert_eq!(status, 202);
    assert_eq!(accepted["event"], "ping");
    assert_eq!(accepted["job_id"], Value::Null);
    let sent = t.hook_requests();
    assert_eq!(sent.len(), 1);
    assert_verifies(&sent[0], &secret);
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(body["event"], "ping");
    assert_eq!(body["delivery_id"], id.to_string());
    let logged: Value = t
        .app
        .get(&format!("/api/v1/deliveries/{id}"), &t.key)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(logged["status"], "delivered");
    assert_eq!(logged["attempts_log"].as_array().unwrap().len(), 1);
    assert_eq!(logged["attempts_log"][0]["status_code"], 200);
    assert_eq!(
        t.state().await["state"],
        "disabled",
        "a ping changes no state"
    );
}

/// The operator's notices received, verified with `secret`: their bodies, in order.
fn notices(operator: &TestReceiver, secret: &str) -> Vec<Value> {
    operator
        .received()
        .iter()
        .map(|r| {
            assert_verifies(r, secret);
            serde_json::from_slice(&r.body).unwrap()
        })
        .collect()
}

fn events(bodies: &[Value]) -> Vec<&str> {
    bodies
        .iter()
        .map(|b| b["event"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_operator_is_sent_signed_notices_of_failing_recovered_disabled_and_enabled() {
    let operator = TestReceiver::start().await;
    let secret = signing::generate_secret().unwrap();
    let t = health(0.0001, lenient(), Some((&operator, &secret))).await;
    t.receiver.script(
        [Reply::Status(500), Reply::Status(200), Reply::Status(410)],
        Reply::Status(200),
    );
    let first = t.delivery().await;
    t.step_until_delivery(first, "delivered").await;
    let second = t.delivery().await;
    t.step_until_delivery(second, "held").await;
    let (status, _) = t
        .post("/api/v1/webhook/enable", Some(json!({"replay": "held"})))
        .await;
    assert_eq!(status, 200);
    t.step_until_delivery(second, "delivered").await;
    t.step_until("four notices", || async { operator.received().len() >= 4 })
        .await;

    let bodies = notices(&operator, &secret);
    assert_eq!(
        events(&bodies),
        [
            "endpoint.failing",
            "endpoint.recovered",
            "endpoint.disabled",
            "endpoint.enabled"
        ]
    );
    let failing = &bodies[0];
    assert_eq!(failing["account_id"], t.key.account.0.to_string());
    assert_eq!(failing["url"], t.receiver.url("/hook"));
    assert_eq!(failing["state"], "failing");
    assert_eq!(failing["disabled_reason"], Value::Null);
    assert_eq!(failing["last_failure"]["status_code"], 500);
    assert!(failing["failing_since"].is_string());
    assert!(failing["disable_at"].is_string());
    assert!(failing["at"].is_string());
    assert_eq!(bodies[2]["state"], "disabled");
    assert_eq!(bodies[2]["disabled_reason"], "gone");
    assert_eq!(bodies[3]["state"], "active");
}

#[tokio::test]
async fn the_operator_is_warned_a_day_before_disable_at_and_told_of_failing_once_a_day() {
    let operator = TestReceiver::start().await;
    let secret = signing::generate_secret().unwrap();
    let settings = HealthSettings {
        disable_after: Duration::from_millis(600),
        disable_min_failures: 1000,
        warn_before: Duration::from_millis(400),
        failing_notice_every: Duration::from_secs(3600),
        ..HealthSettings::default()
    };
    let t = health(0.0001, settings, Some((&operator, &secret))).await;
    t.receiver.script(
        [Reply::Status(500), Reply::Status(200), Reply::Status(500)],
        Reply::Status(500),
    );
    // Failing, recovered, failing again at once: one notice of entering `failing`.
    let first = t.delivery().await;
    t.step_until_delivery(first, "delivered").await;
    t.delivery().await;
    t.dispatcher.try_dispatch_due().await.unwrap();
    let failing = t.state().await;
    let warn_from = at(&failing["disable_at"]) - time::Duration::milliseconds(400);

    t.step_until("the warning", || async {
        events(&notices(&operator, &secret))
            .iter()
            .filter(|e| **e == "endpoint.failing")
            .count()
            >= 2
    })
    .await;

    let bodies = notices(&operator, &secret);
    assert_eq!(
        events(&bodies),
        ["endpoint.failing", "endpoint.recovered", "endpoint.failing"]
    );
    let warning = &bodies[2];
    assert!(at(&warning["at"]) >= warn_from, "{warning}");
    assert_eq!(warning["disable_at"], failing["disable_at"]);
    assert_eq!(
        t.state().await["state"],
        "failing",
        "too few failures to disable"
    );
}

#[tokio::test]
async fn the_dispatcher_refuses_to_start_without_a_valid_operator_secret() {
    let app = spawn_app().await;
    for secret in [None, Some("not-a-secret"), Some("whsec_AAAA")] {
        let mut command = std::process::Command::new(moderation_tests::binary("dispatcher"));
        command
            .env_clear()
            .env("DATABASE_URL", app.db.settings.url.expose())
            .env("REDIS_URL", app.redis.url.expose())
            .env("APP_ENCRYPTION_KEY", app.encryption_key.to_base64())
            .env("METRICS_PORT", "0")
            .env("APP_OPERATOR_WEBHOOK_URL", "https://ops.example.com/hook");
        if let Some(secret) = secret {
            command.env("APP_OPERATOR_WEBHOOK_SECRET", secret);
        }
        let output = command.output().unwrap();

        assert!(!output.status.success(), "{secret:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("APP_OPERATOR_WEBHOOK_SECRET"),
            "{secret:?}: {stderr}"
        );
    }
}

#[tokio::test]
async fn a_job_finishing_while_the_url_is_paused_gets_a_held_delivery() {
    let t = health(0.0001, lenient(), None).await;
    t.post("/api/v1/webhook/pause", None).await;

    let job = t
        .app
        .finished_into_review(
            t.key.account,
            moderation_shared::domain::Modality::Image,
            "https://93.184.215.14/picture.png",
            moderation_tests::review::image_decision(100),
        )
        .await;
    t.dispatcher.try_dispatch_due().await.unwrap();

    let client = t.app.db.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT state, to_account_url FROM deliveries WHERE job_id = $1",
            &[&job.0],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "held");
    assert!(row.get::<_, bool>(1), "it goes to the account's URL");
    assert!(t.hook_requests().is_empty());
    assert_eq!(t.state().await["held"], 1);
}
