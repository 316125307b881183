//! Appeals: idempotent by `appeal_ref`, one open per job, decided by someone who has not
//! decided the job before, and announced as `appeal.decided`.

use moderation_tests::assert_error;
use reqwest::Method;
use serde_json::{json, Value};

use super::ReviewFleet;

async fn appeal(fleet: &ReviewFleet, job: uuid::Uuid, body: Value) -> reqwest::Response {
    fleet
        .send(
            &fleet.key,
            Method::POST,
            &format!("/api/v1/job/{job}/appeal"),
            Some(body),
        )
        .await
}

#[tokio::test]
async fn an_appeal_goes_to_someone_who_has_not_decided_the_job_and_its_decision_is_announced() {
    let fleet = ReviewFleet::start(1.0).await;
    let job = fleet.completed("I will find you").await;
    let sampled = fleet.claim(&fleet.key).await.unwrap();
    let upheld = fleet
        .decide(
            &fleet.key,
            sampled["item_id"].as_str().unwrap(),
            json!({"is_prohibited": false}),
        )
        .await;
    assert_eq!(upheld.status(), 200);

    let created = appeal(
        &fleet,
        job,
        json!({"reason": "It was a joke among friends.", "appeal_ref": "ticket-7"}),
    )
    .await;
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    assert_eq!(created["state"], "open");
    assert_eq!(created["job_id"], job.to_string());
    let appeal_id = created["appeal_id"].as_str().unwrap().to_owned();
    assert_eq!(fleet.job(job).await["review"]["state"], "pending");
    assert!(
        fleet.claim(&fleet.key).await.is_none(),
        "never to the reviewer who decided the job"
    );
    let other = fleet.other_reviewer().await;
    let item = fleet.claim(&other).await.unwrap();
    assert_eq!(item["appeal_id"], appeal_id.as_str());
    assert_eq!(item["reasons"], json!(["appeal"]));

    let decided = fleet
        .decide(
            &other,
            item["item_id"].as_str().unwrap(),
            json!({"is_prohibited": true, "note": "A threat."}),
        )
        .await;

    assert_eq!(decided.status(), 200);
    let decided: Value = decided.json().await.unwrap();
    assert_eq!(decided["decided_by"], "appeal");
    assert_eq!(decided["appeal_state"], "overturned");
    let read: Value = fleet
        .send(
            &fleet.key,
            Method::GET,
            &format!("/api/v1/appeals/{appeal_id}"),
            None,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(read["state"], "overturned");
    assert!(read["decided_at"].is_string());
    let body = fleet.job(job).await;
    assert_eq!(
        (body["revision"].clone(), body["decided_by"].clone()),
        (json!(2), json!("appeal"))
    );
    assert_eq!(body["review"]["state"], "decided");
    let client = fleet.app.db.pool.get().await.unwrap();
    let actions: Vec<String> = client
        .query(
            "SELECT action FROM audit_events WHERE account_id = $1 AND action LIKE 'appeal.%' ORDER BY id",
            &[&fleet.key.account.0],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(actions, ["appeal.created", "appeal.decided"]);
}

#[tokio::test]
async fn the_same_appeal_ref_answers_the_same_appeal_and_a_job_has_one_open_appeal() {
    let fleet = ReviewFleet::start(0.0).await;
    let job = fleet.completed("hello").await;

    let first = appeal(&fleet, job, json!({"reason": "r", "appeal_ref": "a-1"})).await;
    let again = appeal(&fleet, job, json!({"reason": "r", "appeal_ref": "a-1"})).await;
    let another = appeal(&fleet, job, json!({"reason": "r", "appeal_ref": "a-2"})).await;
    let unreferenced = appeal(&fleet, job, json!({"reason": "r"})).await;

    assert_eq!(first.status(), 201);
    assert_eq!(again.status(), 200);
    let (first, again): (Value, Value) = (first.json().await.unwrap(), again.json().await.unwrap());
    assert_eq!(first["appeal_id"], again["appeal_id"]);
    assert_error(another, 409, "CONFLICT").await;
    assert_error(unreferenced, 409, "CONFLICT").await;
    assert_eq!(fleet.queue().await["by_reason"]["appeal"], 1);
}

#[tokio::test]
async fn an_appeal_cannot_be_decided_by_who_decided_its_job() {
    let fleet = ReviewFleet::start(1.0).await;
    let job = fleet.completed("hello").await;
    let appealed = appeal(&fleet, job, json!({"reason": "Why is this in review?"})).await;
    assert_eq!(appealed.status(), 201);
    // Appeals first: the reviewer holds the appeal, then the sample's item of the same job.
    let appeal_item = fleet.claim(&fleet.key).await.unwrap();
    assert!(appeal_item["appeal_id"].is_string());
    let sampled = fleet.claim(&fleet.key).await.unwrap();
    let decided = fleet
        .decide(
            &fleet.key,
            sampled["item_id"].as_str().unwrap(),
            json!({"is_prohibited": false}),
        )
        .await;
    assert_eq!(decided.status(), 200);

    let refused = fleet
        .decide(
            &fleet.key,
            appeal_item["item_id"].as_str().unwrap(),
            json!({"is_prohibited": false}),
        )
        .await;

    let error = assert_error(refused, 409, "CONFLICT").await;
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("has not decided"),
        "{error}"
    );
}

#[tokio::test]
async fn refused_appeals_change_nothing() {
    let fleet = ReviewFleet::start(0.0).await;
    let job = fleet.completed("hello").await;
    let client = fleet.app.db.pool.get().await.unwrap();
    let in_progress = uuid::Uuid::now_v7();
    let failed = uuid::Uuid::now_v7();
    // Not completed, and left so however slow the machine: a job in progress without a row
    // of `open_jobs`, so neither the rescuer nor the relay touches it (a queued one is relayed
    // to the fleet's worker once the relay's grace passes, and could complete before the
    // appeal is tried).
    client
        .execute(
            "INSERT INTO jobs (id, account_id, type, status, stage, content, claim_token) \
             VALUES ($1, $2, 'text', 'processing', 'classifying', 'x', gen_random_uuid())",
            &[&in_progress, &fleet.key.account.0],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO jobs (id, account_id, type, status, stage, content, error_code, completed_at) \
             VALUES ($1, $2, 'image', 'failed', 'failed', 'https://example.com/a.png', 'MEDIA_UNREACHABLE', now())",
            &[&failed, &fleet.key.account.0],
        )
        .await
        .unwrap();

    assert_error(
        appeal(&fleet, in_progress, json!({"reason": "r"})).await,
        409,
        "CONFLICT",
    )
    .await;
    assert_error(
        appeal(&fleet, failed, json!({"reason": "r"})).await,
        409,
        "CONFLICT",
    )
    .await;
    let stranger = fleet.app.account_with_key(Some(&super::SCOPES)).await;
    let elsewhere = fleet
        .send(
            &stranger,
            Method::POST,
            &format!("/api/v1/job/{job}/appeal"),
            Some(json!({"reason": "r"})),
        )
        .await;
    assert_error(elsewhere, 404, "NOT_FOUND").await;
    for body in [
        json!({}),
        json!({"reason": ""}),
        json!({"reason": "x".repeat(2001)}),
        json!({"reason": "r", "appeal_ref": ""}),
        json!({"reason": "r", "appeal_ref": "x".repeat(201)}),
        json!({"reason": "r", "extra": 1}),
    ] {
        assert_error(appeal(&fleet, job, body).await, 400, "INVALID_REQUEST").await;
    }
    let no_scope = fleet.app.create_key(fleet.key.account, None).await;
    let forbidden = fleet
        .send(
            &no_scope,
            Method::POST,
            &format!("/api/v1/job/{job}/appeal"),
            Some(json!({"reason": "r"})),
        )
        .await;
    assert_error(forbidden, 403, "FORBIDDEN").await;
    assert_eq!(fleet.queue().await["pending"], 0, "no item was made");

    let at_the_limits = appeal(
        &fleet,
        job,
        json!({"reason": "x".repeat(2000), "appeal_ref": "r".repeat(200)}),
    )
    .await;
    assert_eq!(at_the_limits.status(), 201);
    let read_with_job_read = fleet.app.create_key(fleet.key.account, None).await;
    let appeal_id = at_the_limits.json::<Value>().await.unwrap()["appeal_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let read = fleet
        .send(
            &read_with_job_read,
            Method::GET,
            &format!("/api/v1/appeals/{appeal_id}"),
            None,
        )
        .await;
    assert_eq!(read.status(), 200, "job:read reads an appeal");
}
