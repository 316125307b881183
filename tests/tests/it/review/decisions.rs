//! Decisions as revisions: uphold and overturn, the history, `job.revised`, the export, and
//! the refusals that change nothing.

use std::time::Duration;

use moderation_shared::{clock, signing};
use moderation_tests::{assert_error, eventually, receiver::TestReceiver};
use reqwest::Method;
use serde_json::{json, Value};

use super::ReviewFleet;

async fn register(fleet: &ReviewFleet, receiver: &TestReceiver) -> String {
    let registered = fleet
        .send(
            &fleet.key,
            Method::POST,
            "/api/v1/webhook/register",
            Some(json!({"url": receiver.url("/hook")})),
        )
        .await;
    assert_eq!(registered.status(), 200);
    let revealed: Value = fleet
        .send(
            &fleet.key,
            Method::POST,
            "/api/v1/me/webhook-secrets/reveal",
            None,
        )
        .await
        .json()
        .await
        .unwrap();
    revealed["secret"].as_str().unwrap().to_owned()
}

fn verify(received: &moderation_tests::receiver::Received, secret: &str) {
    let header = |name: &str| {
        received
            .headers
            .get(name)
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    };
    signing::verify(
        secret,
        &header("webhook-id"),
        header("webhook-timestamp").parse().unwrap(),
        &header("webhook-signature"),
        &received.body,
        clock::now().unix_timestamp(),
        300,
    )
    .expect("signed as Standard Webhooks");
}

#[tokio::test]
async fn an_overturn_is_a_new_revision_kept_in_the_history_and_sent_as_job_revised() {
    let fleet = ReviewFleet::start(1.0).await;
    let receiver = TestReceiver::start().await;
    let secret = register(&fleet, &receiver).await;
    let dispatcher = fleet
        .app
        .start_dispatcher(fleet.app.dispatcher_settings(&receiver, 0.001))
        .await;
    let job = fleet
        .completed("Meet me behind the school after class")
        .await;
    let item = fleet.claim(&fleet.key).await.unwrap();
    let id = item["item_id"].as_str().unwrap();

    let decided = fleet
        .decide(
            &fleet.key,
            id,
            json!({"is_prohibited": true, "note": "A threat in context."}),
        )
        .await;
    assert_eq!(decided.status(), 200);
    let decided: Value = decided.json().await.unwrap();
    let received = eventually(Duration::from_secs(20), "two webhooks", || async {
        let got = receiver.received();
        (got.len() >= 2).then_some(got)
    })
    .await;
    dispatcher.stop().await;

    assert_eq!(decided["revision"], 1);
    assert_eq!(decided["decided_by"], "review");
    assert_eq!(decided["changed"], true);
    let body = fleet.job(job).await;
    assert_eq!(body["is_prohibited"], true);
    assert_eq!(body["revision"], 1);
    assert_eq!(body["decided_by"], "review");
    assert_eq!(body["review"]["state"], "decided");
    assert!(body["reason"].is_string());
    let history: Value = fleet
        .send(
            &fleet.key,
            Method::GET,
            &format!("/api/v1/job/{job}/decisions"),
            None,
        )
        .await
        .json()
        .await
        .unwrap();
    let history = history["decisions"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0]["revision"], 0);
    assert_eq!(history[0]["decided_by"], "model");
    assert_eq!(history[0]["is_prohibited"], false);
    assert_eq!(history[0]["reviewer"], json!({"type": "model", "id": null}));
    assert_eq!(history[1]["note"], "A threat in context.");
    assert_eq!(
        history[1]["reviewer"],
        json!({"type": "key", "id": fleet.key.key_id})
    );
    let bodies: Vec<Value> = received
        .iter()
        .map(|r| {
            verify(r, &secret);
            serde_json::from_slice(&r.body).unwrap()
        })
        .collect();
    let completed = bodies
        .iter()
        .find(|b| b["event"] == "job.completed")
        .unwrap();
    assert_eq!(
        completed["review"],
        json!({"state": "pending", "reasons": ["sample"]})
    );
    let revised = bodies.iter().find(|b| b["event"] == "job.revised").unwrap();
    assert_eq!(revised["job_id"], job.to_string());
    assert_eq!(revised["revision"], 1);
    assert_eq!(revised["decided_by"], "review");
    assert_eq!(revised["is_prohibited"], true);
    assert_eq!(revised["previous"], json!({"is_prohibited": false}));
    assert!(
        received
            .iter()
            .all(|r| !String::from_utf8_lossy(&r.body).contains("threat in context")),
        "a reviewer's note is never sent"
    );
    assert_ne!(completed["delivery_id"], revised["delivery_id"]);
    let log: Value = fleet
        .send(
            &fleet.key,
            Method::GET,
            &format!("/api/v1/deliveries?job_id={job}"),
            None,
        )
        .await
        .json()
        .await
        .unwrap();
    let mut events: Vec<&str> = log["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["event"].as_str().unwrap())
        .collect();
    events.sort_unstable();
    assert_eq!(events, ["job.completed", "job.revised"]);
}

#[tokio::test]
async fn an_uphold_is_a_revision_that_sends_no_job_revised_and_needs_no_note() {
    let fleet = ReviewFleet::start(1.0).await;
    let job = fleet.completed("Lovely weather").await;
    let item = fleet.claim(&fleet.key).await.unwrap();

    let decided = fleet
        .decide(
            &fleet.key,
            item["item_id"].as_str().unwrap(),
            json!({"is_prohibited": false}),
        )
        .await;

    assert_eq!(decided.status(), 200);
    let decided: Value = decided.json().await.unwrap();
    assert_eq!(
        (decided["revision"].clone(), decided["changed"].clone()),
        (json!(1), json!(false))
    );
    assert_eq!(fleet.job(job).await["revision"], 1);
    let client = fleet.app.db.pool.get().await.unwrap();
    let revised: i64 = client
        .query_one(
            "SELECT count(*) FROM deliveries WHERE job_id = $1 AND event = 'job.revised'",
            &[&job],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(revised, 0);
    let audited: i64 = client
        .query_one(
            "SELECT count(*) FROM audit_events WHERE action = 'review.decided' AND target_id = $1",
            &[&job.to_string()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(audited, 1);
}

#[tokio::test]
async fn the_export_shows_the_latest_decision() {
    let fleet = ReviewFleet::start(1.0).await;
    let job = fleet.completed("A perfectly fine text").await;
    let item = fleet.claim(&fleet.key).await.unwrap();
    let decided = fleet
        .decide(
            &fleet.key,
            item["item_id"].as_str().unwrap(),
            json!({"is_prohibited": true, "note": "Spam."}),
        )
        .await;
    assert_eq!(decided.status(), 200);

    let now = clock::now();
    let window = format!(
        "/api/v1/jobs/export?from={}&to={}",
        clock::format_millis(now - time::Duration::hours(1)),
        clock::format_millis(now + time::Duration::hours(1))
    );
    let csv = fleet
        .app
        .get(&window, &fleet.key)
        .await
        .text()
        .await
        .unwrap();

    let row = csv
        .lines()
        .find(|l| l.starts_with(&job.to_string()))
        .unwrap_or_else(|| panic!("{csv}"));
    assert!(row.contains(",true,"), "{row}");
    assert!(row.contains("A reviewer rejected the content."), "{row}");
}

#[tokio::test]
async fn refused_decisions_change_nothing() {
    let fleet = ReviewFleet::start(1.0).await;
    let job = fleet.completed("Just checking in").await;
    let other = fleet.other_reviewer().await;
    let pending: Value = fleet
        .send(
            &fleet.key,
            Method::GET,
            "/api/v1/review/items?state=pending",
            None,
        )
        .await
        .json()
        .await
        .unwrap();
    let id = pending["items"][0]["item_id"].as_str().unwrap().to_owned();

    let unclaimed = fleet
        .decide(&fleet.key, &id, json!({"is_prohibited": false}))
        .await;
    assert_error(unclaimed, 409, "CONFLICT").await;
    fleet.claim(&fleet.key).await.unwrap();
    let not_mine = fleet
        .decide(&other, &id, json!({"is_prohibited": false}))
        .await;
    assert_error(not_mine, 409, "CONFLICT").await;
    for body in [
        json!({"is_prohibited": true}),
        json!({"is_prohibited": true, "note": ""}),
        json!({"is_prohibited": true, "note": "x".repeat(2001)}),
        json!({"is_prohibited": false, "categories": {"nsfw": true}, "note": "n"}),
        json!({"is_prohibited": false, "categories": {"custom.none": true}, "note": "n"}),
        json!({"is_prohibited": false, "verdict": "ok"}),
        json!({"is_prohibited": "no"}),
        json!({}),
    ] {
        let refused = fleet.decide(&fleet.key, &id, body.clone()).await;
        assert_error(refused, 400, "INVALID_REQUEST").await;
    }
    let stranger = fleet.app.account_with_key(Some(&super::SCOPES)).await;
    let elsewhere = fleet
        .decide(&stranger, &id, json!({"is_prohibited": false}))
        .await;
    assert_error(elsewhere, 404, "NOT_FOUND").await;
    let body = fleet.job(job).await;
    assert_eq!(
        (body["revision"].clone(), body["is_prohibited"].clone()),
        (json!(0), json!(false))
    );

    let at_the_limit = fleet
        .decide(
            &fleet.key,
            &id,
            json!({"is_prohibited": true, "note": "x".repeat(2000)}),
        )
        .await;
    assert_eq!(at_the_limit.status(), 200);
    let twice = fleet
        .decide(
            &fleet.key,
            &id,
            json!({"is_prohibited": true, "note": "again"}),
        )
        .await;
    assert_error(twice, 409, "CONFLICT").await;
    assert_eq!(fleet.job(job).await["revision"], 1);
}
