//! Attempts recorded together (`deliveries::record_attempts`, the dispatcher's record of an
//! attempt to a per-request URL): each delivery ends as its own attempt says, whatever else is
//! in the batch, and a row another dispatcher took over is told apart.

use std::time::Duration as StdDuration;

use moderation_shared::{
    clock,
    db::deliveries::{self, AttemptRecord, Claimed, Lane, NewDelivery, NextStep},
    domain::{DeliveryId, JobId, WebhookEvent},
};
use moderation_tests::{
    fixtures::{ensure_partitions, id_at},
    spawn_app, TestApp,
};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

const LEASE: StdDuration = StdDuration::from_secs(60);

/// The entry of `claimed`'s attempt: answered `status` (or a transport error without one).
fn entry(claimed: &Claimed, status: Option<i32>, next: NextStep) -> AttemptRecord {
    AttemptRecord {
        id: claimed.id,
        attempt: claimed.attempt,
        lane: claimed.lane,
        scheduled_at: claimed.scheduled_at,
        status_code: status,
        error: status.is_none().then(|| "connection refused".to_owned()),
        response_body: status.map(|s| format!("answered {s}")),
        started_at: clock::now(),
        duration: StdDuration::from_millis(12),
        next,
    }
}

/// A delivery's state, next attempt, last status and whether it is finished.
async fn delivery(
    app: &TestApp,
    id: DeliveryId,
) -> (String, Option<OffsetDateTime>, Option<i32>, bool) {
    let client = app.db.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT state, next_attempt_at, last_status_code, finished_at IS NOT NULL \
             FROM deliveries WHERE id = $1",
            &[&id.0],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

/// The logged attempts of `id`: number, status and error, oldest first.
async fn logged(app: &TestApp, id: DeliveryId) -> Vec<(i32, Option<i32>, Option<String>)> {
    let client = app.db.pool.get().await.unwrap();
    client
        .query(
            "SELECT attempt, status_code, error FROM delivery_attempts \
             WHERE delivery_id = $1 ORDER BY attempt",
            &[&id.0],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

#[tokio::test]
async fn attempts_recorded_together_each_end_their_delivery_as_their_own_outcome_says() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    let mut made = Vec::new();
    for n in 0..4 {
        made.push(
            app.make_delivery(account, &format!("https://hooks.example.com/{n}"), b"{}")
                .await,
        );
    }
    let client = app.db.pool.get().await.unwrap();
    let mut claimed = deliveries::claim_due(&client, Lane::Scheduled, 32, LEASE, 12)
        .await
        .unwrap();
    claimed.sort_by_key(|c| made.iter().position(|&m| m == c.id.0));
    assert_eq!(claimed.len(), 4);
    let retry_at = clock::now() + Duration::seconds(30);
    // The fourth names an attempt its row no longer has: another dispatcher's by now.
    let mut taken_over = entry(&claimed[3], Some(200), NextStep::Delivered);
    taken_over.attempt += 1;
    let entries = [
        entry(&claimed[0], Some(200), NextStep::Delivered),
        entry(&claimed[1], Some(503), NextStep::RetryAt(retry_at)),
        entry(&claimed[2], None, NextStep::Abandoned),
        taken_over,
    ];

    let ours = deliveries::record_attempts(&client, &entries)
        .await
        .unwrap();

    assert_eq!(ours, [true, true, true, false]);
    assert_eq!(
        delivery(&app, claimed[0].id).await,
        ("delivered".to_owned(), None, Some(200), true)
    );
    let (state, next, status, finished) = delivery(&app, claimed[1].id).await;
    assert_eq!(
        (state.as_str(), status, finished),
        ("pending", Some(503), false)
    );
    // Postgres keeps microseconds.
    let next = next.expect("a retry time");
    assert!(
        (next - retry_at).abs() < Duration::milliseconds(1),
        "{next} against {retry_at}"
    );
    assert_eq!(
        delivery(&app, claimed[2].id).await,
        ("abandoned".to_owned(), None, None, true)
    );
    // The row taken over keeps its claim (pending, its lease as next attempt).
    let (state, next, status, finished) = delivery(&app, claimed[3].id).await;
    assert_eq!((state.as_str(), status, finished), ("pending", None, false));
    assert!(next.is_some_and(|at| at > clock::now()));
    assert_eq!(logged(&app, claimed[0].id).await, [(1, Some(200), None)]);
    assert_eq!(logged(&app, claimed[1].id).await, [(1, Some(503), None)]);
    assert_eq!(
        logged(&app, claimed[2].id).await,
        [(1, None, Some("connection refused".to_owned()))]
    );
}

#[tokio::test]
async fn a_resend_recorded_beside_a_scheduled_attempt_leaves_its_delivery_as_it_was_unless_acknowledged(
) {
    let app = spawn_app().await;
    let account = app.create_account().await;
    let resent = DeliveryId(
        app.make_delivery(account, "https://hooks.example.com/r", b"{}")
            .await,
    );
    let client = app.db.pool.get().await.unwrap();
    let first = deliveries::claim_due(&client, Lane::Scheduled, 32, LEASE, 12)
        .await
        .unwrap();
    let ours =
        deliveries::record_attempts(&client, &[entry(&first[0], Some(200), NextStep::Delivered)])
            .await
            .unwrap();
    assert_eq!(ours, [true]);
    client
        .execute(
            "UPDATE deliveries SET resend_at = now() WHERE id = $1",
            &[&resent.0],
        )
        .await
        .unwrap();
    let scheduled = DeliveryId(
        app.make_delivery(account, "https://hooks.example.com/s", b"{}")
            .await,
    );
    let resend = deliveries::claim_due(&client, Lane::Resend, 32, LEASE, 12)
        .await
        .unwrap();
    let due = deliveries::claim_due(&client, Lane::Scheduled, 32, LEASE, 12)
        .await
        .unwrap();
    assert_eq!((resend[0].id, due[0].id), (resent, scheduled));

    let ours = deliveries::record_attempts(
        &client,
        &[
            entry(&resend[0], Some(500), NextStep::Unchanged),
            entry(&due[0], Some(200), NextStep::Delivered),
        ],
    )
    .await
    .unwrap();

    assert_eq!(ours, [true, true]);
    // The refused resend leaves the delivery delivered, its status the resend's, and no
    // resend asked for any more.
    assert_eq!(
        delivery(&app, resent).await,
        ("delivered".to_owned(), None, Some(500), true)
    );
    let resend_at: Option<OffsetDateTime> = client
        .query_one(
            "SELECT resend_at FROM deliveries WHERE id = $1",
            &[&resent.0],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(resend_at, None);
    assert_eq!(
        logged(&app, resent).await,
        [(1, Some(200), None), (2, Some(500), None)]
    );
    assert_eq!(
        delivery(&app, scheduled).await,
        ("delivered".to_owned(), None, Some(200), true)
    );
}

#[tokio::test]
async fn a_batch_holding_a_delivery_of_last_month_is_recorded_through_the_table() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    let now = clock::now();
    let last_month = now
        .replace_day(1)
        .unwrap()
        .replace_time(time::Time::MIDNIGHT)
        - Duration::days(3);
    ensure_partitions(&app.db.pool, last_month).await;
    let old = DeliveryId(id_at(last_month, Uuid::new_v4().as_u128()));
    let mut client = app.db.pool.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    deliveries::insert_many(
        &tx,
        &[NewDelivery {
            id: old,
            event: WebhookEvent::JobCompleted,
            job_id: Some(JobId::new()),
            account_id: account,
            target_url: "https://hooks.example.com/old".to_owned(),
            body: b"{}".to_vec(),
            to_account_url: false,
        }],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let fresh = DeliveryId(
        app.make_delivery(account, "https://hooks.example.com/new", b"{}")
            .await,
    );
    let claimed = deliveries::claim_due(&client, Lane::Scheduled, 32, LEASE, 12)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);

    let entries: Vec<AttemptRecord> = claimed
        .iter()
        .map(|c| entry(c, Some(204), NextStep::Delivered))
        .collect();
    let ours = deliveries::record_attempts(&client, &entries)
        .await
        .unwrap();

    assert_eq!(ours, [true, true]);
    for id in [old, fresh] {
        assert_eq!(
            delivery(&app, id).await,
            ("delivered".to_owned(), None, Some(204), true)
        );
        assert_eq!(logged(&app, id).await, [(1, Some(204), None)]);
    }
}
