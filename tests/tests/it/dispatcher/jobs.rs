//! How a finished job gets its delivery: the target it goes to, and claims and finishes that
//! happen once however often a job is named.

use std::time::Duration;

use moderation_shared::{
    db::jobs::{Finish, Finished},
    domain::Scope,
    outcome::{Decision, JobOutcome},
    url_guard::UrlGuard,
};
use moderation_tests::{receiver::TestReceiver, spawn_app, TestApp};
use serde_json::Value;

use super::{active_secret, assert_verifies, header, wait_for_requests};

/// Finishes a job as a worker does: the result and its delivery in one transaction.
async fn finish(app: &TestApp, job: uuid::Uuid) -> Option<Finished> {
    let mut client = app.db.pool.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let outcome = JobOutcome::Decided(Box::new(Decision {
        is_prohibited: true,
        reason: Some("violence".into()),
        scores: [("violence".to_owned(), 912), ("hate".to_owned(), 0)].into(),
        ..Decision::default()
    }));
    let result = moderation_shared::db::jobs::JobResult {
        id: moderation_shared::domain::JobId(job),
        token: moderation_shared::domain::ClaimToken::new(),
        stamp: None,
        outcome,
    };
    let mut finished = moderation_shared::db::jobs::finish_many(&tx, &[result])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    match finished.pop() {
        Some(Finish::Done(finished)) => Some(finished),
        _ => None,
    }
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
    assert_eq!(
        body["scores"],
        serde_json::json!({"violence": 0.912, "hate": 0.0})
    );
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
    let view: Value = app
        .client
        .get(app.url(&format!("/api/v1/job/{job}")))
        .bearer_auth(&key.key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        view["scores"],
        serde_json::json!({"violence": 0.912, "hate": 0.0}),
        "the job object carries the scores its webhook had: {view}"
    );
}

#[tokio::test]
async fn one_batch_naming_a_job_twice_claims_and_finishes_it_once_and_answers_in_order() {
    use moderation_shared::{
        db::jobs::{finish_many, Claim, JobResult},
        domain::{ClaimToken, JobId},
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

    let passed = JobOutcome::Decided(Box::default());
    let tx = client.transaction().await.unwrap();
    let results: Vec<JobResult> = [twice, once, twice]
        .into_iter()
        .map(|id| JobResult {
            id,
            token: ClaimToken::new(),
            stamp: None,
            outcome: passed.clone(),
        })
        .collect();
    let finished = finish_many(&tx, &results).await.unwrap();
    tx.commit().await.unwrap();

    let done = |f: &Finish| matches!(f, Finish::Done(_));
    assert_eq!(finished.iter().filter(|f| done(f)).count(), 2);
    assert!(done(&finished[1]));
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
            token: moderation_shared::domain::ClaimToken::new(),
            redelivery: false,
            first_stage: moderation_shared::domain::JobStage::Classifying,
        })
        .collect();
    claim_many(client, &requests, 5, Duration::from_secs(60))
        .await
        .unwrap()
}
