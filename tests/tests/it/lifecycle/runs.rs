//! The lifecycle runs: `modctl lifecycle status` and `run [--as-of]`, the partitions they make
//! and drop at the retention's edge, usage that outlives the jobs, and the lease that lets one
//! process of the fleet run it.

use std::time::Duration as StdDuration;

use moderation_shared::{
    clock,
    domain::Modality,
    lifecycle::{Lifecycle, Retention},
};
use moderation_tests::{eventually, fixtures::JobRow, spawn_app, worker::spawn_worker, TestApp};
use serde_json::Value;
use time::{format_description::well_known::Rfc3339, Duration, OffsetDateTime};

use super::{lifecycle, names};

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap()
}

/// The partition of `table` holding `at`, from `modctl lifecycle status`.
fn partition_of(status: &Value, table: &str, at: OffsetDateTime) -> Value {
    status["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            let from = OffsetDateTime::parse(p["from"].as_str().unwrap(), &Rfc3339).unwrap();
            let to = OffsetDateTime::parse(p["to"].as_str().unwrap(), &Rfc3339).unwrap();
            p["table"] == table && from <= at && at < to
        })
        .unwrap_or_else(|| panic!("no partition of {table} holds {at}: {status}"))
        .clone()
}

/// The number of rows of `table`.
async fn rows(app: &TestApp, table: &str) -> i64 {
    let client = app.db.pool.get().await.unwrap();
    let sql = format!("SELECT count(*) FROM {table}");
    client.query_one(&sql, &[]).await.unwrap().get(0)
}

async fn month_usage(app: &TestApp, key: &moderation_tests::TestKey) -> Value {
    let usage: Value = app
        .get("/api/v1/usage/volume?period=month", key)
        .await
        .json()
        .await
        .unwrap();
    usage["data"].clone()
}

#[tokio::test]
async fn status_lists_the_partitions_and_what_the_next_run_erases() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let now = clock::now();
    for age in [40, 31, 29] {
        let at = now - Duration::days(age);
        JobRow::new(key.account, "text", "aging", at)
            .completed(at, false, None)
            .insert(&app.db.pool)
            .await;
    }

    let (ok, status, stderr) = lifecycle(&app, &["status"], &[]);
    assert!(ok, "{stderr}");
    assert_eq!(status["retention_days"], 400);
    assert_eq!(status["content_retention_days"], 30);
    for table in ["jobs", "deliveries", "delivery_attempts", "audit_events"] {
        for ahead in [0, 62] {
            partition_of(&status, table, now + Duration::days(ahead));
        }
    }
    // The two jobs older than 30 days; nothing is old enough to drop.
    assert_eq!(status["contents_to_erase"], 2, "{status}");
    assert_eq!(names(&status["partitions_to_drop"]), Vec::<String>::new());
    assert_eq!(status["last_run"], Value::Null);

    let (ok, ran, stderr) = lifecycle(&app, &["run"], &[]);
    assert!(ok, "{stderr}");
    assert_eq!(ran["contents_erased"], 2, "{ran}");
    let (_, after, _) = lifecycle(&app, &["status"], &[]);
    assert_eq!(after["contents_to_erase"], 0, "{after}");
    assert_eq!(after["last_run"]["contents_erased"], 2, "{after}");
    let (_, again, _) = lifecycle(&app, &["run"], &[]);
    assert_eq!(again["contents_erased"], 0, "{again}");
}

#[tokio::test]
async fn a_run_as_of_a_later_date_drops_partitions_at_the_retention_edge_and_usage_keeps_its_answer(
) {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let now = clock::now();
    for kind in ["text", "text", "image"] {
        JobRow::new(key.account, kind, "counted", now)
            .completed(now, false, None)
            .insert(&app.db.pool)
            .await;
    }
    let job = app.submit_prompt(&key, "submitted, then dropped").await;
    let usage_before = month_usage(&app, &key).await;

    let (_, status, _) = lifecycle(&app, &["status"], &[]);
    let jobs = partition_of(&status, "jobs", now);
    let to = OffsetDateTime::parse(jobs["to"].as_str().unwrap(), &Rfc3339).unwrap();
    let edge = to + Duration::days(400);
    let env = [("APP_RETENTION_DAYS", "400")];

    let (ok, short, stderr) = lifecycle(
        &app,
        &["run", "--as-of", &rfc3339(edge - Duration::seconds(1))],
        &env,
    );
    assert!(ok, "{stderr}");
    let name = jobs["name"].as_str().unwrap().to_owned();
    assert!(
        !names(&short["partitions_dropped"]).contains(&name),
        "{short}"
    );
    assert_eq!(
        app.get(&format!("/api/v1/job/{job}"), &key).await.status(),
        200
    );
    assert_eq!(rows(&app, "open_jobs").await, 1);

    let (ok, dropped, stderr) = lifecycle(&app, &["run", "--as-of", &rfc3339(edge)], &env);
    assert!(ok, "{stderr}");
    let dropped = names(&dropped["partitions_dropped"]);
    let month = name.trim_start_matches("jobs");
    for table in [
        "jobs",
        "job_scores",
        "deliveries",
        "delivery_attempts",
        "review_items",
    ] {
        assert!(
            dropped.contains(&format!("{table}{month}")),
            "{table}: {dropped:?}"
        );
    }
    assert!(
        !dropped.contains(&format!("audit_events{month}")),
        "the audit log keeps two years: {dropped:?}"
    );

    assert_eq!(
        app.get(&format!("/api/v1/job/{job}"), &key).await.status(),
        404
    );
    assert_eq!(rows(&app, "jobs").await, 0);
    // The submitted job never ended (no worker ran): its row of `open_jobs` went with its
    // partition, so the relay has nothing left to enqueue.
    assert_eq!(rows(&app, "open_jobs").await, 0);
    assert_eq!(month_usage(&app, &key).await, usage_before);
}

#[tokio::test]
async fn as_of_may_be_five_years_ahead_and_no_more() {
    let app = spawn_app().await;
    let now = clock::now();

    let (ok, _, stderr) = lifecycle(
        &app,
        &[
            "run",
            "--as-of",
            &rfc3339(now + Duration::days(5 * 365 + 2)),
        ],
        &[],
    );
    assert!(!ok);
    assert!(
        stderr.contains("--as-of") && stderr.contains("5 years"),
        "{stderr}"
    );
    let (ok, _, stderr) = lifecycle(&app, &["run", "--as-of", "next tuesday"], &[]);
    assert!(!ok);
    assert!(stderr.contains("RFC 3339"), "{stderr}");
    let client = app.db.pool.get().await.unwrap();
    let runs: i64 = client
        .query_one("SELECT count(*) FROM lifecycle_runs", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(runs, 0, "a refused run changes nothing");

    let (ok, ran, stderr) = lifecycle(
        &app,
        &[
            "run",
            "--as-of",
            &rfc3339(now + Duration::days(5 * 365 - 1)),
        ],
        &[],
    );
    assert!(ok, "{stderr}");
    assert!(!names(&ran["partitions_made"]).is_empty(), "{ran}");
}

#[tokio::test]
async fn one_process_at_a_time_holds_the_lease_and_a_worker_runs_the_lifecycle_by_itself() {
    let app = spawn_app().await;
    let retention = Retention::default();
    let every = StdDuration::from_secs(3600);
    let first = Lifecycle::new(app.db.pool.clone(), retention, every);
    let second = Lifecycle::new(app.db.pool.clone(), retention, every);

    let (a, b) = tokio::join!(first.try_run(), second.try_run());
    let ran = [a.unwrap().is_some(), b.unwrap().is_some()];
    assert_eq!(ran.iter().filter(|r| **r).count(), 1, "{ran:?}");
    // The holder renews; the other still waits.
    let (holder, other) = if ran[0] {
        (&first, &second)
    } else {
        (&second, &first)
    };
    assert!(holder.try_run().await.unwrap().is_some());
    assert!(other.try_run().await.unwrap().is_none());

    // A worker of a fleet whose lease has lapsed runs it at start.
    let client = app.db.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE maintenance_leases SET until = now() - interval '1 second'",
            &[],
        )
        .await
        .unwrap();
    let before = finished_runs(&client).await;
    let _worker = spawn_worker(&app, |s| s.modalities = vec![Modality::Text]).await;
    eventually(
        StdDuration::from_secs(20),
        "the worker's lifecycle run",
        || async { (finished_runs(&client).await > before).then_some(()) },
    )
    .await;
}

async fn finished_runs(client: &deadpool_postgres::Object) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM lifecycle_runs WHERE finished_at IS NOT NULL",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}
