//! Review items and the queue: made with the job's result, claimed once, released, and pending
//! again when a claim expires.

use std::collections::HashSet;

use reqwest::Method;
use serde_json::{json, Value};

use super::ReviewFleet;
use moderation_tests::assert_error;

#[tokio::test]
async fn a_sampled_job_completes_at_once_with_its_review_pending_and_an_item_waiting() {
    let fleet = ReviewFleet::start(1.0).await;

    let job = fleet
        .completed("Could we move the meeting to Thursday?")
        .await;

    let body = fleet.job(job).await;
    assert_eq!(body["is_prohibited"], false);
    assert_eq!(
        body["review"],
        json!({"state": "pending", "reasons": ["sample"]})
    );
    assert_eq!(
        (body["revision"].clone(), body["decided_by"].clone()),
        (json!(0), json!("model"))
    );
    let queue = fleet.queue().await;
    assert_eq!(queue["pending"], 1);
    assert_eq!(queue["claimed"], 0);
    assert_eq!(
        queue["by_reason"],
        json!({"band": 0, "sample": 1, "appeal": 0})
    );
    assert!(queue["oldest_pending_at"].is_string());
    let client = fleet.app.db.pool.get().await.unwrap();
    let webhook: Option<Vec<u8>> = client
        .query_opt("SELECT body FROM deliveries WHERE job_id = $1", &[&job])
        .await
        .unwrap()
        .map(|row| row.get(0));
    assert!(webhook.is_none(), "no URL registered, no delivery");
}

#[tokio::test]
async fn the_sample_picks_none_at_rate_zero() {
    let fleet = ReviewFleet::start(0.0).await;

    let job = fleet.completed("Hello there").await;

    assert!(fleet.job(job).await.get("review").is_none());
    assert_eq!(fleet.queue().await["pending"], 0);
}

#[tokio::test]
async fn concurrent_claims_never_get_one_item_and_take_the_oldest_first() {
    let fleet = ReviewFleet::start(1.0).await;
    let mut jobs = Vec::new();
    for n in 0..5 {
        jobs.push(fleet.completed(&format!("message number {n}")).await);
    }
    let other = fleet.other_reviewer().await;

    let claims = (0..10).map(|n| {
        let key = if n % 2 == 0 { &fleet.key } else { &other };
        let fleet = &fleet;
        async move { fleet.claim(key).await }
    });
    let claimed: Vec<Value> = futures_util::future::join_all(claims)
        .await
        .into_iter()
        .flatten()
        .collect();

    assert_eq!(claimed.len(), 5, "{claimed:?}");
    let items: HashSet<&str> = claimed
        .iter()
        .map(|c| c["item_id"].as_str().unwrap())
        .collect();
    assert_eq!(items.len(), 5, "no item claimed twice");
    for item in &claimed {
        assert_eq!(item["state"], "claimed");
        assert!(item["claim_expires_at"].is_string());
        assert!(item["content"]["text"]
            .as_str()
            .unwrap()
            .starts_with("message number"));
    }
    let queue = fleet.queue().await;
    assert_eq!(
        (queue["pending"].clone(), queue["claimed"].clone()),
        (json!(0), json!(5))
    );
    assert!(
        fleet.claim(&fleet.key).await.is_none(),
        "204 when none is pending"
    );
}

#[tokio::test]
async fn the_oldest_pending_item_is_claimed_first() {
    let fleet = ReviewFleet::start(1.0).await;
    let first = fleet.completed("first").await;
    fleet.completed("second").await;

    let claimed = fleet.claim(&fleet.key).await.unwrap();

    assert_eq!(claimed["job_id"], first.to_string());
    assert_eq!(
        claimed["claimed_by"],
        json!({"type": "key", "id": fleet.key.key_id})
    );
}

#[tokio::test]
async fn an_expired_claim_is_pending_again_by_itself_and_anyone_may_claim_it() {
    let fleet = ReviewFleet::start(1.0).await;
    fleet.completed("something").await;
    let claimed = fleet.claim(&fleet.key).await.unwrap();
    let id = claimed["item_id"].as_str().unwrap().to_owned();
    // Ten minutes pass (the lease), as far as the item knows.
    fleet.expire_claim(&id).await;

    let item: Value = fleet
        .send(
            &fleet.key,
            Method::GET,
            &format!("/api/v1/review/items/{id}"),
            None,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(item["state"], "pending");
    assert_eq!(item["claimed_by"], Value::Null);
    assert_eq!(fleet.queue().await["pending"], 1);
    let late = fleet
        .decide(&fleet.key, &id, json!({"is_prohibited": false}))
        .await;
    assert_error(late, 409, "CONFLICT").await;
    let other = fleet.other_reviewer().await;
    let again = fleet.claim(&other).await.unwrap();
    assert_eq!(again["item_id"], id.as_str());
}

#[tokio::test]
async fn an_expired_claim_keeps_its_place_in_the_queue_before_newer_pending_items() {
    let fleet = ReviewFleet::start(1.0).await;
    fleet.completed("the older one").await;
    let older = fleet.claim(&fleet.key).await.unwrap();
    let older_id = older["item_id"].as_str().unwrap().to_owned();
    fleet.completed("the newer one").await;
    fleet.expire_claim(&older_id).await;
    // The expired claim is read from one index and the pending item from another: the claim
    // takes the earlier in queue order, then the other, then there is none.
    let other = fleet.other_reviewer().await;
    let first = fleet.claim(&other).await.unwrap();
    assert_eq!(first["item_id"], older_id.as_str());
    let second = fleet.claim(&other).await.unwrap();
    assert_ne!(second["item_id"], older_id.as_str());
    assert!(fleet.claim(&other).await.is_none());
}

#[tokio::test]
async fn only_the_holder_releases_an_item_which_is_pending_again() {
    let fleet = ReviewFleet::start(1.0).await;
    fleet.completed("something").await;
    let claimed = fleet.claim(&fleet.key).await.unwrap();
    let id = claimed["item_id"].as_str().unwrap();
    let other = fleet.other_reviewer().await;
    let path = format!("/api/v1/review/items/{id}/release");

    let refused = fleet.send(&other, Method::POST, &path, None).await;
    assert_error(refused, 409, "CONFLICT").await;
    let released = fleet.send(&fleet.key, Method::POST, &path, None).await;
    assert_eq!(released.status(), 200);
    let released: Value = released.json().await.unwrap();

    assert_eq!(released["state"], "pending");
    assert_eq!(fleet.queue().await["pending"], 1);
    let unheld = fleet.send(&fleet.key, Method::POST, &path, None).await;
    assert_error(unheld, 409, "CONFLICT").await;
}

#[tokio::test]
async fn items_are_listed_by_state_paged_and_kept_to_their_account() {
    let fleet = ReviewFleet::start(1.0).await;
    for n in 0..3 {
        fleet.completed(&format!("text {n}")).await;
    }
    let claimed = fleet.claim(&fleet.key).await.unwrap();
    let list = |query: &'static str| {
        let fleet = &fleet;
        async move {
            fleet
                .send(
                    &fleet.key,
                    Method::GET,
                    &format!("/api/v1/review/items{query}"),
                    None,
                )
                .await
        }
    };

    let pending: Value = list("?state=pending").await.json().await.unwrap();
    let held: Value = list("?state=claimed").await.json().await.unwrap();
    let first: Value = list("?limit=2").await.json().await.unwrap();
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let rest: Value = fleet
        .send(
            &fleet.key,
            Method::GET,
            &format!("/api/v1/review/items?limit=2&cursor={cursor}"),
            None,
        )
        .await
        .json()
        .await
        .unwrap();

    assert_eq!(pending["items"].as_array().unwrap().len(), 2);
    assert_eq!(held["items"][0]["item_id"], claimed["item_id"]);
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    assert_eq!(rest["items"].as_array().unwrap().len(), 1);
    assert_eq!(rest["next_cursor"], Value::Null);
    for query in ["?state=open", "?limit=0", "?limit=1001", "?cursor=nope"] {
        assert_error(list(query).await, 400, "INVALID_REQUEST").await;
    }
    let stranger = fleet.app.account_with_key(Some(&super::SCOPES)).await;
    let id = claimed["item_id"].as_str().unwrap();
    let other_account = fleet
        .send(
            &stranger,
            Method::GET,
            &format!("/api/v1/review/items/{id}"),
            None,
        )
        .await;
    assert_error(other_account, 404, "NOT_FOUND").await;
    let bad_id = fleet
        .send(
            &fleet.key,
            Method::GET,
            "/api/v1/review/items/not-a-uuid",
            None,
        )
        .await;
    assert_error(bad_id, 400, "INVALID_REQUEST").await;
}

#[tokio::test]
async fn every_review_endpoint_needs_review_decide() {
    let fleet = ReviewFleet::start(1.0).await;
    let client_key = fleet.app.create_key(fleet.key.account, None).await;
    let id = uuid::Uuid::now_v7();
    for (method, path) in [
        (Method::GET, "/api/v1/review/queue".to_owned()),
        (Method::GET, "/api/v1/review/items".to_owned()),
        (Method::GET, format!("/api/v1/review/items/{id}")),
        (Method::POST, "/api/v1/review/claim".to_owned()),
        (Method::POST, format!("/api/v1/review/items/{id}/release")),
        (Method::POST, format!("/api/v1/review/items/{id}/decide")),
    ] {
        let response = fleet
            .send(
                &client_key,
                method,
                &path,
                Some(json!({"is_prohibited": true})),
            )
            .await;
        assert_error(response, 403, "FORBIDDEN").await;
    }
}
