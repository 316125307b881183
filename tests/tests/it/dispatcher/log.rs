//! The delivery log of contract 11 through the api, with a dispatcher driven step by step:
//! listing and filters, every attempt, resend and recover.

use std::time::Duration;

use moderation_dispatcher::{Dispatched, Dispatcher, DispatcherSettings};
use moderation_shared::{
    db::delivery_log::{self, Filter},
    domain::{AccountId, DeliveryState, Scope},
};
use moderation_tests::{
    assert_error, eventually,
    fixtures::ensure_partitions,
    plans,
    receiver::{Reply, TestReceiver},
    spawn_app, TestApp, TestKey,
};
use serde_json::{json, Value};
use uuid::Uuid;

use super::{active_secret, assert_verifies, header, manager, BODY};

/// A stepped dispatcher (never started, so only its steps send), a manager's key and a
/// receiver answering 200 unless scripted.
struct Log {
    app: TestApp,
    key: TestKey,
    receiver: TestReceiver,
    dispatcher: Dispatcher,
}

/// With the schedule scaled by `scale` (1e-5 makes all 12 attempts take ~0.2 s).
async fn log(scale: f64) -> Log {
    let app = spawn_app().await;
    let key = manager(&app).await;
    app.lift_rate_limit(key.account).await;
    let receiver = TestReceiver::start().await;
    let dispatcher = Dispatcher::build(app.dispatcher_settings(&receiver, scale))
        .await
        .unwrap();
    Log {
        app,
        key,
        receiver,
        dispatcher,
    }
}

impl Log {
    async fn delivery(&self) -> Uuid {
        self.app
            .make_delivery(self.key.account, &self.receiver.url("/hook"), BODY)
            .await
    }

    /// Steps the dispatcher until `id` is in `state` and nothing is due.
    async fn step_until(&self, id: Uuid, state: &str) {
        eventually(Duration::from_secs(30), state, || async {
            let step = self.dispatcher.try_dispatch_due().await.unwrap();
            let (now, _) = self.app.delivery_state(id).await;
            (now == state && step == Dispatched::Empty).then_some(())
        })
        .await;
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.app.get(path, &self.key).await
    }

    async fn post(&self, path: &str, body: Option<Value>) -> reqwest::Response {
        let request = self
            .app
            .client
            .post(self.app.url(path))
            .bearer_auth(&self.key.key);
        match body {
            Some(body) => request.json(&body),
            None => request,
        }
        .send()
        .await
        .unwrap()
    }

    async fn json(&self, path: &str) -> Value {
        let response = self.get(path).await;
        assert_eq!(response.status(), 200, "GET {path}");
        response.json().await.unwrap()
    }

    /// Moves a delivery's creation back by `hours` (to place it outside a window).
    async fn age(&self, id: Uuid, hours: f64) {
        let client = self.app.db.pool.get().await.unwrap();
        client
            .execute(
                "UPDATE deliveries SET created_at = created_at - make_interval(secs => $2) \
                 WHERE id = $1",
                &[&id, &(hours * 3600.0)],
            )
            .await
            .unwrap();
    }
}

fn ids(page: &Value) -> Vec<String> {
    page["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["delivery_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_log_pages_newest_first_and_filters_by_job_status_and_time() {
    let t = log(1.0).await;
    let mut made = Vec::new();
    for _ in 0..5 {
        made.push(t.delivery().await.to_string());
    }
    // The oldest two are delivered; the other three stay pending.
    t.age(made[0].parse().unwrap(), 2.0).await;
    t.age(made[1].parse().unwrap(), 1.0).await;
    let client = t.app.db.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE deliveries SET state = 'delivered', next_attempt_at = NULL, \
             finished_at = now() WHERE id = ANY($1)",
            &[&vec![
                made[0].parse::<Uuid>().unwrap(),
                made[1].parse::<Uuid>().unwrap(),
            ]],
        )
        .await
        .unwrap();
    let newest_first: Vec<String> = made.iter().rev().cloned().collect();

    let first = t.json("/api/v1/deliveries?limit=2").await;
    let second = t
        .json(&format!(
            "/api/v1/deliveries?limit=2&cursor={}",
            first["next_cursor"].as_str().unwrap()
        ))
        .await;
    let third = t
        .json(&format!(
            "/api/v1/deliveries?limit=2&cursor={}",
            second["next_cursor"].as_str().unwrap()
        ))
        .await;
    let delivered = t.json("/api/v1/deliveries?status=delivered").await;
    let both = t
        .json("/api/v1/deliveries?status=delivered,pending&limit=1000")
        .await;
    let one_job = {
        let job = first["deliveries"][0]["job_id"]
            .as_str()
            .unwrap()
            .to_owned();
        t.json(&format!("/api/v1/deliveries?job_id={job}")).await
    };
    let recent = t
        .json("/api/v1/deliveries?since=2000-01-01T00:00:00Z&limit=1000")
        .await;
    let since_an_hour = {
        let since = (moderation_shared::clock::now() - time::Duration::minutes(30))
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        t.json(&format!(
            "/api/v1/deliveries?since={}",
            since.replace('+', "%2B")
        ))
        .await
    };
    let stranger = t.app.account_with_key(Some(&[Scope::WebhookManage])).await;
    let theirs: Value = t
        .app
        .get("/api/v1/deliveries", &stranger)
        .await
        .json()
        .await
        .unwrap();

    let mut paged = ids(&first);
    paged.extend(ids(&second));
    paged.extend(ids(&third));
    assert_eq!(paged, newest_first);
    assert!(third["next_cursor"].is_null());
    assert_eq!(ids(&delivered), vec![made[1].clone(), made[0].clone()]);
    assert_eq!(ids(&both), newest_first);
    assert_eq!(ids(&one_job), vec![made[4].clone()]);
    assert_eq!(ids(&recent), newest_first);
    assert_eq!(ids(&since_an_hour), newest_first[..3].to_vec());
    assert_eq!(ids(&theirs), Vec::<String>::new());
    let shown = &first["deliveries"][0];
    assert_eq!(shown["url"], t.receiver.url("/hook"));
    assert_eq!(shown["status"], "pending");
    assert_eq!(shown["attempts"], 0);
    assert!(shown["next_attempt_at"].is_string());
    assert!(shown["last_status_code"].is_null());
    assert!(shown["created_at"].is_string());
    assert!(shown["finished_at"].is_null());
}

#[tokio::test]
async fn the_logs_query_is_checked_at_its_edges() {
    let t = log(1.0).await;
    t.delivery().await;

    let at_most = t.get("/api/v1/deliveries?limit=1000").await;
    let at_least = t.get("/api/v1/deliveries?limit=1").await;

    assert_eq!(at_most.status(), 200);
    assert_eq!(at_least.status(), 200);
    for bad in [
        "limit=0",
        "limit=1001",
        "limit=many",
        "status=sent",
        "status=pending,",
        "job_id=42",
        "since=yesterday",
        "cursor=bm90LWEtY3Vyc29y",
    ] {
        let response = t.get(&format!("/api/v1/deliveries?{bad}")).await;
        assert_error(response, 400, "INVALID_REQUEST").await;
    }
}

#[tokio::test]
async fn a_deliverys_detail_holds_every_attempt_and_another_account_gets_404() {
    let t = log(0.001).await;
    t.receiver
        .script([Reply::Status(500), Reply::Status(503)], Reply::Status(200));
    let id = t.delivery().await;
    t.step_until(id, "delivered").await;

    let detail = t.json(&format!("/api/v1/deliveries/{id}")).await;
    let stranger = t.app.account_with_key(Some(&[Scope::WebhookManage])).await;
    let theirs = t
        .app
        .get(&format!("/api/v1/deliveries/{id}"), &stranger)
        .await;
    let missing = t
        .get(&format!("/api/v1/deliveries/{}", Uuid::new_v4()))
        .await;
    let malformed = t.get("/api/v1/deliveries/not-a-uuid").await;

    assert_eq!(detail["delivery_id"], id.to_string());
    assert_eq!(detail["status"], "delivered");
    assert_eq!(detail["attempts"], 3);
    assert_eq!(detail["last_status_code"], 200);
    assert!(detail["finished_at"].is_string());
    assert!(detail["next_attempt_at"].is_null());
    let log = detail["attempts_log"].as_array().unwrap();
    let numbers: Vec<i64> = log.iter().map(|a| a["attempt"].as_i64().unwrap()).collect();
    let codes: Vec<i64> = log
        .iter()
        .map(|a| a["status_code"].as_i64().unwrap())
        .collect();
    assert_eq!(numbers, vec![1, 2, 3]);
    assert_eq!(codes, vec![500, 503, 200]);
    for attempt in log {
        assert!(attempt["scheduled_at"].is_string());
        assert!(attempt["started_at"].is_string());
        assert!(attempt["duration_ms"].as_i64().unwrap() >= 0);
        assert!(attempt["error"].is_null());
        assert!(attempt["response_excerpt"].is_string());
    }
    assert_error(theirs, 404, "NOT_FOUND").await;
    assert_error(missing, 404, "NOT_FOUND").await;
    assert_error(malformed, 400, "INVALID_REQUEST").await;
}

#[tokio::test]
async fn a_resend_sends_the_same_body_and_id_once_more_signed_afresh_and_is_logged() {
    let t = log(1.0).await;
    let secret = active_secret(&t.app, &t.key).await;
    let id = t.delivery().await;
    t.step_until(id, "delivered").await;

    let asked = t
        .post(&format!("/api/v1/deliveries/{id}/resend"), None)
        .await;
    let asked_status = asked.status();
    let answer: Value = asked.json().await.unwrap();
    let sent = t.dispatcher.try_dispatch_due().await.unwrap();
    let after = t.dispatcher.try_dispatch_due().await.unwrap();
    let detail = t.json(&format!("/api/v1/deliveries/{id}")).await;

    assert_eq!(asked_status, 202);
    assert_eq!(answer["delivery_id"], id.to_string());
    assert_eq!(answer["status"], "delivered");
    assert!(answer["next_attempt_at"].is_string(), "{answer}");
    assert_eq!(sent, Dispatched::Done(1));
    assert_eq!(after, Dispatched::Empty);
    let got = t.receiver.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].body, got[0].body);
    assert_eq!(header(&got[1], "webhook-id"), id.to_string());
    assert_eq!(header(&got[1], "x-service-delivery-id"), id.to_string());
    assert_verifies(&got[1], &secret);
    assert_eq!(detail["status"], "delivered");
    assert_eq!(detail["attempts"], 2);
    assert!(detail["next_attempt_at"].is_null());
    let log = detail["attempts_log"].as_array().unwrap();
    assert_eq!(log.len(), 2);
    assert_eq!(log[1]["attempt"], 2);
    assert_eq!(log[1]["status_code"], 200);
}

/// A running dispatcher is woken for a resend on the resends' own channel: it asks that lane
/// at once, not when its idle poll (a minute here) comes round; the quiet lanes are asked
/// only when woken for or due.
#[tokio::test]
async fn a_running_dispatcher_sends_a_resend_as_soon_as_it_is_asked() {
    let t = log(1.0).await;
    let id = t.delivery().await;
    t.step_until(id, "delivered").await;
    let settings = DispatcherSettings {
        idle_poll: Duration::from_secs(60),
        ..t.app.dispatcher_settings(&t.receiver, 1.0)
    };
    let running = t.app.start_dispatcher(settings).await;
    // A new delivery wakes it on the deliveries' channel; once it is sent the loop sleeps.
    let second = t.delivery().await;
    eventually(Duration::from_secs(10), "the new delivery sent", || async {
        (t.app.delivery_state(second).await.0 == "delivered").then_some(())
    })
    .await;

    let answer = t
        .post(&format!("/api/v1/deliveries/{id}/resend"), None)
        .await;
    assert_eq!(answer.status(), 202);
    eventually(Duration::from_secs(10), "the resend sent", || async {
        let got = t.receiver.received();
        let sent = got
            .iter()
            .filter(|r| header(r, "webhook-id") == id.to_string())
            .count();
        (sent == 2).then_some(())
    })
    .await;
    running.stop().await;

    assert_eq!(t.app.delivery_state(id).await, ("delivered".to_owned(), 2));
}

/// A running dispatcher wakes for the retry its own attempt scheduled: not at its idle poll
/// (a minute here) nor when the attempt's claim would have lapsed (11 s), so a failed attempt
/// is retried on its schedule while nothing else happens.
#[tokio::test]
async fn a_running_dispatcher_retries_a_failed_attempt_when_it_falls_due() {
    retried_while_running(0.001, Duration::from_secs(60), Duration::from_secs(5)).await;
}

/// The shortest idle poll there is (`APP_DISPATCH_IDLE_POLL_MS=1`, below the loop's 5 ms
/// floor between looks) with a delivery due later: the loop sleeps 1 ms and runs on (its
/// sleep was once clamped between 5 ms and the poll, which panicked when the poll was
/// shorter).
#[tokio::test]
async fn a_running_dispatcher_with_the_shortest_idle_poll_waits_for_a_retry() {
    retried_while_running(0.01, Duration::from_millis(1), Duration::from_secs(10)).await;
}

/// Starts a dispatcher polling every `idle_poll` on the schedule scaled by `scale`, makes a
/// delivery whose first attempt the receiver refuses, and waits at most `within` for its
/// retry to be delivered.
async fn retried_while_running(scale: f64, idle_poll: Duration, within: Duration) {
    let t = log(scale).await;
    t.receiver.script([Reply::Status(500)], Reply::Status(200));
    let settings = DispatcherSettings {
        idle_poll,
        ..t.app.dispatcher_settings(&t.receiver, scale)
    };
    let running = t.app.start_dispatcher(settings).await;
    let id = t.delivery().await;
    eventually(within, "the retry delivered", || async {
        (t.app.delivery_state(id).await == ("delivered".to_owned(), 2)).then_some(())
    })
    .await;
    running.stop().await;

    assert_eq!(t.receiver.received().len(), 2);
}

#[tokio::test]
async fn a_pending_delivery_cannot_be_resent_and_a_strangers_gets_404() {
    let t = log(1.0).await;
    let id = t.delivery().await;
    let stranger = t.app.account_with_key(Some(&[Scope::WebhookManage])).await;

    let pending = t
        .post(&format!("/api/v1/deliveries/{id}/resend"), None)
        .await;
    let theirs = t
        .app
        .client
        .post(t.app.url(&format!("/api/v1/deliveries/{id}/resend")))
        .bearer_auth(&stranger.key)
        .send()
        .await
        .unwrap();

    assert_error(pending, 409, "CONFLICT").await;
    assert_error(theirs, 404, "NOT_FOUND").await;
    assert_eq!(t.app.delivery_state(id).await, ("pending".to_owned(), 0));
}

#[tokio::test]
async fn a_resend_asked_while_no_dispatcher_runs_is_sent_by_the_next_one() {
    let t = log(1.0).await;
    let id = t.delivery().await;
    t.step_until(id, "delivered").await;
    let asked = t
        .post(&format!("/api/v1/deliveries/{id}/resend"), None)
        .await;
    assert_eq!(asked.status(), 202);
    // A second request before it is sent joins the first.
    let again = t
        .post(&format!("/api/v1/deliveries/{id}/resend"), None)
        .await;
    assert_eq!(again.status(), 202);
    drop(t.dispatcher);

    let fresh = Dispatcher::build(t.app.dispatcher_settings(&t.receiver, 1.0))
        .await
        .unwrap();
    let sent = fresh.try_dispatch_due().await.unwrap();

    assert_eq!(sent, Dispatched::Done(1));
    assert_eq!(fresh.try_dispatch_due().await.unwrap(), Dispatched::Empty);
    assert_eq!(t.receiver.received().len(), 2);
    assert_eq!(t.app.delivery_state(id).await, ("delivered".to_owned(), 2));
}

#[tokio::test]
async fn a_refused_resend_of_an_abandoned_delivery_is_logged_and_leaves_it_abandoned() {
    let t = log(0.00001).await;
    t.receiver.script([], Reply::Status(500));
    let id = t.delivery().await;
    t.step_until(id, "abandoned").await;

    let asked = t
        .post(&format!("/api/v1/deliveries/{id}/resend"), None)
        .await;
    assert_eq!(asked.status(), 202);
    t.step_until(id, "abandoned").await;
    let detail = t.json(&format!("/api/v1/deliveries/{id}")).await;

    assert_eq!(t.receiver.received().len(), 13);
    assert_eq!(detail["status"], "abandoned");
    assert_eq!(detail["attempts"], 13);
    assert_eq!(detail["last_status_code"], 500);
    assert!(detail["next_attempt_at"].is_null());
    assert_eq!(detail["attempts_log"].as_array().unwrap().len(), 13);
}

#[tokio::test]
async fn a_recover_restarts_every_abandoned_delivery_of_the_window_and_no_other() {
    let t = log(0.00001).await;
    t.receiver.script([], Reply::Status(500));
    let in_window = [t.delivery().await, t.delivery().await, t.delivery().await];
    let too_old = t.delivery().await;
    let stranger = t.app.account_with_key(Some(&[Scope::WebhookManage])).await;
    let theirs = t
        .app
        .make_delivery(stranger.account, &t.receiver.url("/theirs"), BODY)
        .await;
    for id in in_window.iter().chain([&too_old, &theirs]) {
        t.step_until(*id, "abandoned").await;
    }
    t.age(too_old, 3.0).await;
    // Delivered ones are not recovered.
    t.receiver.script([], Reply::Status(200));
    let delivered = t.delivery().await;
    t.step_until(delivered, "delivered").await;
    let since = (moderation_shared::clock::now() - time::Duration::hours(1))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let before = t.receiver.received().len();

    let recovered = t
        .post(
            "/api/v1/deliveries/recover",
            Some(json!({ "since": since })),
        )
        .await;
    let status = recovered.status();
    let answer: Value = recovered.json().await.unwrap();
    for id in &in_window {
        t.step_until(*id, "delivered").await;
    }

    assert_eq!(status, 202);
    assert_eq!(answer, json!({ "count": 3 }));
    assert_eq!(t.receiver.received().len(), before + 3);
    assert_eq!(t.app.delivery_state(too_old).await.0, "abandoned");
    assert_eq!(t.app.delivery_state(theirs).await.0, "abandoned");
    assert_eq!(
        t.app.delivery_state(delivered).await,
        ("delivered".to_owned(), 1)
    );
    let detail = t
        .json(&format!("/api/v1/deliveries/{}", in_window[0]))
        .await;
    let numbers: Vec<i64> = detail["attempts_log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["attempt"].as_i64().unwrap())
        .collect();
    assert_eq!(numbers, (1..=13).collect::<Vec<_>>());
    assert_eq!(detail["attempts"], 13);
    assert_eq!(detail["last_status_code"], 200);
}

/// A running dispatcher whose recovered lane has a share of one slot (two slots in all) and
/// a minute's idle poll works through a recover of three deliveries one after another: each
/// recovered attempt that ends frees the share, and the next is claimed then, not at the
/// idle poll.
#[tokio::test]
async fn a_running_dispatcher_claims_the_next_recovered_delivery_when_its_share_frees() {
    let t = log(0.00001).await;
    t.receiver.script([], Reply::Status(500));
    let ids = [t.delivery().await, t.delivery().await, t.delivery().await];
    for id in ids {
        t.step_until(id, "abandoned").await;
    }
    t.receiver.script([], Reply::Status(200));
    let settings = DispatcherSettings {
        idle_poll: Duration::from_secs(60),
        concurrency: 2,
        ..t.app.dispatcher_settings(&t.receiver, 0.00001)
    };
    let running = t.app.start_dispatcher(settings).await;

    let recovered = t
        .post(
            "/api/v1/deliveries/recover",
            Some(json!({ "since": "2000-01-01T00:00:00Z", "until": "2100-01-01T00:00:00Z" })),
        )
        .await;
    assert_eq!(recovered.status(), 202);
    eventually(
        Duration::from_secs(10),
        "every recovered delivery sent",
        || async {
            for id in ids {
                if t.app.delivery_state(id).await.0 != "delivered" {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    running.stop().await;
}

#[tokio::test]
async fn a_recovered_delivery_gets_a_whole_fresh_schedule() {
    let t = log(0.00001).await;
    t.receiver.script([], Reply::Status(500));
    let id = t.delivery().await;
    t.step_until(id, "abandoned").await;

    let recovered = t
        .post(
            "/api/v1/deliveries/recover",
            Some(json!({ "since": "2000-01-01T00:00:00Z", "until": "2100-01-01T00:00:00Z" })),
        )
        .await;
    assert_eq!(recovered.status(), 202);
    t.step_until(id, "abandoned").await;

    assert_eq!(t.receiver.received().len(), 24);
    assert_eq!(t.app.delivery_state(id).await, ("abandoned".to_owned(), 24));
}

#[tokio::test]
async fn a_recovers_body_is_checked() {
    let t = log(1.0).await;

    let nothing = t
        .post(
            "/api/v1/deliveries/recover",
            Some(json!({ "since": "2000-01-01T00:00:00Z" })),
        )
        .await;
    let nothing: Value = nothing.json().await.unwrap();

    assert_eq!(nothing, json!({ "count": 0 }));
    for bad in [
        json!({}),
        json!({ "since": "last week" }),
        json!({ "since": 5 }),
        json!({ "since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z" }),
        json!({ "since": "2026-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z" }),
        json!({ "since": "2026-01-01T00:00:00Z", "state": "abandoned" }),
    ] {
        let response = t.post("/api/v1/deliveries/recover", Some(bad)).await;
        assert_error(response, 400, "INVALID_REQUEST").await;
    }
}

#[tokio::test]
async fn the_log_needs_the_webhook_manage_scope() {
    let t = log(1.0).await;
    let reader = t.app.account_with_key(Some(&[Scope::JobRead])).await;
    let id = t.delivery().await;

    for (method, path) in [
        ("GET", "/api/v1/deliveries".to_owned()),
        ("GET", format!("/api/v1/deliveries/{id}")),
        ("POST", format!("/api/v1/deliveries/{id}/resend")),
        ("POST", "/api/v1/deliveries/recover".to_owned()),
    ] {
        let response = t
            .app
            .client
            .request(method.parse().unwrap(), t.app.url(&path))
            .bearer_auth(&reader.key)
            .json(&json!({ "since": "2000-01-01T00:00:00Z" }))
            .send()
            .await
            .unwrap();
        assert_error(response, 403, "FORBIDDEN").await;
    }
}

/// Every page of one account's log is read from indexes, never by scanning the table, with
/// 60 000 deliveries of which one account holds 20 000.
#[tokio::test]
async fn every_page_of_the_log_reads_indexes_only() {
    let app = spawn_app().await;
    let ours = app.create_account().await;
    let others = [app.create_account().await, app.create_account().await];
    ensure_partitions(
        &app.db.pool,
        moderation_shared::clock::now() - time::Duration::days(31),
    )
    .await;
    let client = app.db.pool.get().await.unwrap();
    for (n, account) in [ours, others[0], others[1]].iter().enumerate() {
        client
            .execute(
                "WITH made AS ( \
                     INSERT INTO jobs (id, account_id, type, status, stage, content, \
                                       is_prohibited, completed_at) \
                     SELECT uuid_v7(), $1, 'text', 'completed', 'done', 'x', false, now() \
                     FROM generate_series(1, 20000) RETURNING id) \
                 INSERT INTO deliveries (id, job_id, account_id, target_url, body, state, \
                                         attempts, schedule_attempts, created_at, finished_at) \
                 SELECT uuid_v7(at), id, $1, 'https://example.com/', '\\x00', \
                        (ARRAY['delivered', 'abandoned', 'undeliverable'])[1 + (random() * 2)::int], \
                        1, 1, at, now() \
                 FROM made, LATERAL (SELECT now() - random() * interval '30 days' \
                                     WHERE made.id IS NOT NULL) AS t(at)",
                &[&account.0],
            )
            .await
            .unwrap_or_else(|e| panic!("account {n}: {e}"));
    }
    client
        .batch_execute("ANALYZE deliveries; ANALYZE delivery_attempts")
        .await
        .unwrap();
    let some_job: Uuid = client
        .query_one(
            "SELECT job_id FROM deliveries WHERE account_id = $1 LIMIT 1",
            &[&ours.0],
        )
        .await
        .unwrap()
        .get(0);
    let after = Some((
        moderation_shared::clock::now() - time::Duration::days(3),
        moderation_shared::domain::DeliveryId(Uuid::new_v4()),
    ));
    let filters = [
        Filter::default(),
        Filter {
            states: vec![DeliveryState::Abandoned],
            ..Filter::default()
        },
        Filter {
            states: vec![DeliveryState::Pending, DeliveryState::Abandoned],
            since: Some(moderation_shared::clock::now() - time::Duration::days(7)),
            ..Filter::default()
        },
        Filter {
            job_id: Some(moderation_shared::domain::JobId(some_job)),
            ..Filter::default()
        },
    ];

    for filter in &filters {
        for position in [None, after] {
            let plan = delivery_log::plan(&client, AccountId(ours.0), filter, position, 101)
                .await
                .unwrap();
            assert_eq!(
                plans::full_reads(&client, &plan).await,
                Vec::<String>::new(),
                "{filter:?}:\n{plan}"
            );
            assert!(plan.contains("Index"), "{filter:?}:\n{plan}");
        }
    }
}
