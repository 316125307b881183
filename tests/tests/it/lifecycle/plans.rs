//! Every query that reads by id, or by account and time, reads one or few partitions: counted
//! from Postgres's own statistics of each partition, around the real statements (a job read,
//! the job listing, an export window, the worker's claim and finish, the dispatcher's claim).

use std::time::Duration as StdDuration;

use moderation_shared::{
    clock,
    db::{
        deliveries::{self, Lane},
        job_leases, job_reports,
        jobs::{self, ClaimRequest, JobResult, NewJob},
    },
    domain::{AccountId, ClaimToken, FailureCode, JobId, JobStage, JobStatus, Modality},
    outcome::JobOutcome,
};
use moderation_tests::{
    fixtures::{ensure_partitions, JobRow},
    plans::{index_scans, partition_reads, read_between, row_updates, scanned_between},
    spawn_app,
    worker::insert_jobs,
    TestApp,
};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// Thirteen months of jobs of `account` (one in the middle of each month), each month's
/// partitions made: the shape of a year of history.
async fn a_year_of_jobs(app: &TestApp, account: AccountId) -> Vec<(OffsetDateTime, Uuid)> {
    let now = clock::now();
    let mut made = Vec::new();
    let mut month = now.replace_day(1).unwrap();
    for _ in 0..13 {
        let at = month.replace_day(15).unwrap().min(now);
        // The first of the month before.
        month = (month - Duration::days(1)).replace_day(1).unwrap();
        ensure_partitions(&app.db.pool, at).await;
        let job = JobRow::new(account, "text", "history", at).completed(at, false, None);
        job.insert(&app.db.pool).await;
        made.push((at, job.id));
    }
    // Another account's jobs and delivered webhooks, two thousand a month: partitions the size
    // that makes Postgres plan as it does in production (a tiny table is read whole).
    let other = app.create_account().await;
    let client = app.db.pool.get().await.unwrap();
    for (at, _) in &made {
        client
            .execute(
                "WITH j AS (INSERT INTO jobs (id, account_id, type, status, stage, content, \
                                             is_prohibited, created_at, updated_at, completed_at) \
                            SELECT uuid_v7(t), $1, 'text', 'completed', 'done', 'x', false, t, t, t \
                            FROM generate_series(1, 2000) AS n, \
                                 LATERAL (SELECT $2::timestamptz - n * interval '1 second') AS a(t) \
                            RETURNING id, created_at) \
                 INSERT INTO deliveries (id, job_id, account_id, target_url, body, state, \
                                         attempts, schedule_attempts, created_at, finished_at) \
                 SELECT uuid_v7(created_at), id, $1, 'https://hooks.example.com/x', '\\x7b7d', \
                        'delivered', 1, 1, created_at, created_at FROM j",
                &[&other.0, at],
            )
            .await
            .unwrap();
    }
    client.batch_execute("ANALYZE").await.unwrap();
    made
}

/// The name of the partition of `table` holding `at`.
fn partition(table: &str, at: OffsetDateTime) -> String {
    format!("{table}_y{:04}m{:02}", at.year(), u8::from(at.month()))
}

fn names(read: &[(String, moderation_tests::plans::Reads)]) -> Vec<&str> {
    read.iter().map(|(name, _)| name.as_str()).collect()
}

/// A worker's first claim of each of `ids`, all under `token`.
fn first_claims(ids: &[JobId], token: ClaimToken) -> Vec<ClaimRequest> {
    ids.iter()
        .map(|&id| ClaimRequest {
            id,
            token,
            redelivery: false,
            first_stage: JobStage::Classifying,
        })
        .collect()
}

/// A failure of each of `ids`, written under `token`.
fn failures(ids: &[JobId], token: ClaimToken) -> Vec<JobResult> {
    ids.iter()
        .map(|&id| JobResult {
            id,
            token,
            stamp: None,
            outcome: JobOutcome::Failed {
                code: FailureCode::Internal,
                message: "a test".to_owned(),
            },
        })
        .collect()
}

/// The name of this month's partition of `jobs`, its autovacuum off: its statistics stay
/// as the test leaves them.
async fn this_months_jobs_without_autovacuum(client: &tokio_postgres::Client) -> String {
    let current = partition("jobs", clock::now());
    client
        .batch_execute(&format!(
            "ALTER TABLE {current} SET (autovacuum_enabled = false)"
        ))
        .await
        .unwrap();
    current
}

#[tokio::test]
async fn a_job_read_and_an_export_window_read_the_one_partition_of_their_time() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    let history = a_year_of_jobs(&app, account).await;
    let client = app.db.pool.get().await.unwrap();

    let (at, id) = history[3];
    let before = partition_reads(&client, "jobs").await;
    let job = jobs::get(&client, account, JobId(id), Uuid::nil())
        .await
        .unwrap();
    let after = partition_reads(&client, "jobs").await;
    assert!(job.is_some());
    let read = read_between(&before, &after);
    assert_eq!(names(&read), [partition("jobs", at)], "{read:?}");

    let before = partition_reads(&client, "jobs").await;
    let rows = job_reports::export_rows(
        &client,
        account,
        at - Duration::hours(12),
        at + Duration::hours(12),
        Uuid::nil(),
    )
    .await
    .unwrap();
    let mut rows = std::pin::pin!(rows);
    let mut exported = 0;
    while let Some(row) = futures_util::StreamExt::next(&mut rows).await {
        row.unwrap();
        exported += 1;
    }
    let after = partition_reads(&client, "jobs").await;
    assert_eq!(exported, 1);
    let read = read_between(&before, &after);
    assert_eq!(names(&read), [partition("jobs", at)], "{read:?}");
}

#[tokio::test]
async fn the_job_listing_reads_no_partition_below_the_retention_floor() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    let history = a_year_of_jobs(&app, account).await;
    let client = app.db.pool.get().await.unwrap();
    // A retention floor four months back: the nine older months are never read.
    let floor = moderation_shared::domain::id_floor(history[4].0 - Duration::days(1));

    let before = partition_reads(&client, "jobs").await;
    let page = jobs::list(&client, account, &[JobStatus::Completed], None, 100, floor)
        .await
        .unwrap();
    let after = partition_reads(&client, "jobs").await;

    assert_eq!(page.len(), 5);
    let read = read_between(&before, &after);
    for (at, _) in &history[5..] {
        assert!(
            !names(&read).contains(&partition("jobs", *at).as_str()),
            "{read:?}"
        );
    }
}

#[tokio::test]
async fn the_workers_claim_and_finish_read_the_one_partition_of_the_job() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    a_year_of_jobs(&app, account).await;
    let job = JobId::new();
    let client = app.db.pool.get().await.unwrap();
    jobs::insert_many(
        &client,
        &[NewJob {
            id: job,
            account_id: account,
            api_key_id: None,
            modality: Modality::Text,
            content: "claimed".to_owned(),
            messages: None,
            webhook_url: None,
            idempotency: None,
        }],
    )
    .await
    .unwrap();
    let current = partition("jobs", clock::now());

    let before = partition_reads(&client, "jobs").await;
    let token = ClaimToken::new();
    let claims = jobs::claim_many(
        &client,
        &first_claims(&[job], token),
        3,
        StdDuration::from_secs(60),
    )
    .await
    .unwrap();
    let after = partition_reads(&client, "jobs").await;
    assert!(
        matches!(claims[..], [jobs::Claim::Claimed(_)]),
        "{claims:?}"
    );
    let read = read_between(&before, &after);
    assert_eq!(names(&read), [current.as_str()], "claim: {read:?}");

    let before = partition_reads(&client, "jobs").await;
    let finished = jobs::finish_many(&client, &failures(&[job], token))
        .await
        .unwrap();
    let after = partition_reads(&client, "jobs").await;
    assert_eq!(finished.len(), 1);
    let read = read_between(&before, &after);
    assert_eq!(names(&read), [current.as_str()], "finish: {read:?}");
}

/// Whether this connection's open transaction wrote through the table `jobs` itself (it holds
/// `RowExclusiveLock` on it). A statement naming a partition takes at most `AccessShareLock`
/// on the table.
async fn wrote_through_the_table(client: &tokio_postgres::Client) -> bool {
    client
        .query_one(
            "SELECT EXISTS (SELECT FROM pg_locks \
                            WHERE pid = pg_backend_pid() AND relation = 'jobs'::regclass \
                              AND mode = 'RowExclusiveLock')",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// Claims `job` and fails it, each in a transaction of its own: whether each wrote through the
/// table `jobs`, and the job's status after the finish.
async fn claim_and_finish(client: &deadpool_postgres::Client, job: JobId) -> (bool, bool, String) {
    let token = ClaimToken::new();
    client.batch_execute("BEGIN").await.unwrap();
    let claims = jobs::claim_many(
        client,
        &first_claims(&[job], token),
        3,
        StdDuration::from_secs(60),
    )
    .await
    .unwrap();
    assert!(
        matches!(claims[..], [jobs::Claim::Claimed(_)]),
        "{claims:?}"
    );
    let claim_through_table = wrote_through_the_table(client).await;
    client.batch_execute("COMMIT; BEGIN").await.unwrap();
    let finished = jobs::finish_many(client, &failures(&[job], token))
        .await
        .unwrap();
    assert!(
        matches!(finished[..], [jobs::Finish::Done(_)]),
        "{finished:?}"
    );
    let finish_through_table = wrote_through_the_table(client).await;
    client.batch_execute("COMMIT").await.unwrap();
    let status = client
        .query_one("SELECT status FROM jobs WHERE id = $1", &[&job.0])
        .await
        .unwrap()
        .get(0);
    (claim_through_table, finish_through_table, status)
}

#[tokio::test]
async fn the_claim_and_finish_name_this_months_partition_and_reach_older_jobs_through_the_table() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    let now = clock::now();
    let this_month = JobRow::new(account, "text", "this month", now);
    this_month.insert(&app.db.pool).await;
    // Noon on the last day of the month before.
    let before = now
        .replace_day(1)
        .unwrap()
        .replace_time(time::Time::MIDNIGHT)
        - Duration::hours(12);
    let month_before = JobRow::new(account, "text", "the month before", before);
    month_before.insert(&app.db.pool).await;
    let client = app.db.pool.get().await.unwrap();

    let (claim_now, finish_now, status_now) = claim_and_finish(&client, JobId(this_month.id)).await;
    let (claim_before, finish_before, status_before) =
        claim_and_finish(&client, JobId(month_before.id)).await;

    // This month's partition is written by name (planned as a plain table is); a job of
    // another month is written through the table. Both end.
    assert_eq!((claim_now, finish_now), (false, false));
    assert_eq!((claim_before, finish_before), (true, true));
    assert_eq!(
        (status_now.as_str(), status_before.as_str()),
        ("failed", "failed")
    );
}

#[tokio::test]
async fn the_workers_claim_and_finish_read_jobs_by_id_while_statistics_lag_behind_the_queue() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    let client = app.db.pool.get().await.unwrap();
    // Statistics taken while the month held 5,000 finished jobs and 10 queued, then 20,000
    // queued behind them that no ANALYZE has seen: a saturated fleet's queue.
    let current = this_months_jobs_without_autovacuum(&client).await;
    let insert = |status: &'static str, count: i64| {
        let client = &client;
        async move {
            client
                .execute(
                    "WITH j AS ( \
                         INSERT INTO jobs (id, account_id, type, content, status, stage, \
                                           is_prohibited, completed_at) \
                         SELECT uuid_v7(), $1, 'text', 'lagging', $2, \
                                CASE WHEN $2 = 'queued' THEN 'queued' ELSE 'done' END, \
                                CASE WHEN $2 = 'queued' THEN NULL ELSE false END, \
                                CASE WHEN $2 = 'queued' THEN NULL ELSE now() END \
                         FROM generate_series(1, $3::int8) \
                         RETURNING id, account_id, type, created_at, status) \
                     INSERT INTO open_jobs (job_id, account_id, type, created_at, enqueued_at) \
                     SELECT id, account_id, type, created_at, now() FROM j \
                     WHERE status = 'queued'",
                    &[&account.0, &status, &count],
                )
                .await
                .unwrap();
        }
    };
    insert("completed", 5_000).await;
    insert("queued", 10).await;
    client
        .batch_execute(&format!("ANALYZE {current}"))
        .await
        .unwrap();
    insert("queued", 20_000).await;
    let ids: Vec<JobId> = client
        .query(
            "SELECT id FROM jobs WHERE status = 'queued' ORDER BY id DESC LIMIT 20",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| JobId(row.get(0)))
        .collect();
    let token = ClaimToken::new();

    let before = index_scans(&client, &current).await;
    let claims = jobs::claim_many(
        &client,
        &first_claims(&ids, token),
        3,
        StdDuration::from_secs(60),
    )
    .await
    .unwrap();
    let finished = jobs::finish_many(&client, &failures(&ids, token))
        .await
        .unwrap();
    let after = index_scans(&client, &current).await;

    assert!(
        claims.iter().all(|c| matches!(c, jobs::Claim::Claimed(_))),
        "{claims:?}"
    );
    assert_eq!(finished.len(), 20);
    // Each statement looks its jobs up by the primary key, whatever the statistics say.
    assert_eq!(
        scanned_between(&before, &after),
        [format!("{current}_pkey")],
        "{before:?} -> {after:?}"
    );
}

#[tokio::test]
async fn every_update_of_a_job_by_the_worker_and_the_rescuer_is_hot() {
    let app = spawn_app().await;
    let jobs_ids = insert_jobs(&app, Modality::Text, 2, true).await;
    let (first, second) = (jobs_ids[0], jobs_ids[1]);
    let mut client = app.db.pool.get().await.unwrap();
    let current = partition("jobs", clock::now());
    let before = row_updates(&client, &current).await;
    let lease = StdDuration::from_secs(60);
    let token = ClaimToken::new();

    // The first job: claimed, its lease renewed, moved on a stage, ended.
    let claims = jobs::claim_many(&client, &first_claims(&[first, second], token), 3, lease)
        .await
        .unwrap();
    assert!(claims.iter().all(|c| matches!(c, jobs::Claim::Claimed(_))));
    assert_eq!(
        job_leases::renew(&client, &[(first, token)], lease)
            .await
            .unwrap(),
        1
    );
    jobs::set_stage(&client, first, JobStage::Fetching)
        .await
        .unwrap();
    let finished = jobs::finish_many(&client, &failures(&[first], token))
        .await
        .unwrap();
    assert!(matches!(finished[..], [jobs::Finish::Done(_)]));
    // The second: given back after a transient failure, claimed again on a lease that runs
    // out at once, and rescued.
    assert!(jobs::requeue(&client, second, token).await.unwrap());
    let again = ClaimToken::new();
    jobs::claim_many(
        &client,
        &first_claims(&[second], again),
        3,
        StdDuration::from_millis(1),
    )
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + StdDuration::from_secs(10);
    let rescued = loop {
        let tx = client.transaction().await.unwrap();
        let expired = job_leases::take_expired(&tx, Modality::Text, 10, 3)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        if !expired.requeued.is_empty() {
            break expired.requeued;
        }
        assert!(std::time::Instant::now() < deadline, "never rescued");
        tokio::time::sleep(StdDuration::from_millis(20)).await;
    };
    assert_eq!(rescued, [second]);

    // Seven updates of the jobs' rows (three claims, a stage, an end, a requeue, a rescue:
    // the renewal writes only `open_jobs`), each on the row's own page.
    let after = row_updates(&client, &current).await;
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (7, 7),
        "(updates, of them HOT) before {before:?}, after {after:?}"
    );
    let open: Vec<(Uuid, String, bool)> = client
        .query(
            "SELECT job_id, status, enqueued_at IS NULL FROM open_jobs ORDER BY job_id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    // The ended job left `open_jobs`; the rescued one is queued, for the relay to enqueue.
    assert_eq!(open, [(second.0, "queued".to_owned(), true)]);
}

#[tokio::test]
async fn a_generic_plan_of_the_claim_made_while_the_month_was_small_reads_by_id_once_it_has_grown()
{
    let app = spawn_app().await;
    let account = app.create_account().await;
    let client = app.db.pool.get().await.unwrap();
    // The first minutes of a month: a handful of jobs, analyzed; then 20,000 more that no
    // ANALYZE has seen (none would invalidate a plan the connection kept). The claim is sent
    // unnamed, so no plan outlives its call: as a prepared statement, the generic plan made
    // on the small partition (a sequential scan) read the whole grown one on every claim.
    let current = this_months_jobs_without_autovacuum(&client).await;
    let queue = |count: i64| {
        let client = &client;
        async move {
            client
                .query(
                    "WITH j AS ( \
                         INSERT INTO jobs (id, account_id, type, content) \
                         SELECT uuid_v7(), $1, 'text', 'month start' \
                         FROM generate_series(1, $2::int8) \
                         RETURNING id, account_id, type, created_at) \
                     INSERT INTO open_jobs (job_id, account_id, type, created_at, enqueued_at) \
                     SELECT id, account_id, type, created_at, now() FROM j RETURNING job_id",
                    &[&account.0, &count],
                )
                .await
                .unwrap()
                .iter()
                .map(|row| JobId(row.get(0)))
                .collect::<Vec<_>>()
        }
    };
    let claim = |ids: &[JobId]| {
        let requests = first_claims(ids, ClaimToken::new());
        let client = &client;
        async move {
            jobs::claim_many(client, &requests, 3, StdDuration::from_secs(60))
                .await
                .unwrap()
        }
    };
    let first = queue(10).await;
    client
        .batch_execute(&format!("ANALYZE {current}"))
        .await
        .unwrap();
    client
        .batch_execute("SET plan_cache_mode = force_generic_plan")
        .await
        .unwrap();
    claim(&first[..2]).await;
    let grown = queue(20_000).await;

    let before = index_scans(&client, &current).await;
    let claims = claim(&grown[..10]).await;
    let after = index_scans(&client, &current).await;

    assert!(
        claims.iter().all(|c| matches!(c, jobs::Claim::Claimed(_))),
        "{claims:?}"
    );
    // Read through the primary key (a sequential scan reads no index at all).
    assert_eq!(
        scanned_between(&before, &after),
        [format!("{current}_pkey")],
        "{before:?} -> {after:?}"
    );
}

#[tokio::test]
async fn the_dispatchers_claim_reads_partitions_by_their_due_index_only() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    a_year_of_jobs(&app, account).await;
    let due = app
        .make_delivery(account, "https://hooks.example.com/x", b"{}")
        .await;

    let client = app.db.pool.get().await.unwrap();
    let before = partition_reads(&client, "deliveries").await;
    let claimed =
        deliveries::claim_due(&client, Lane::Scheduled, 32, StdDuration::from_secs(60), 12)
            .await
            .unwrap();
    let after = partition_reads(&client, "deliveries").await;

    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id.0, due);
    let read = read_between(&before, &after);
    let sequential: Vec<String> = read
        .iter()
        .filter(|(_, r)| r.seq > 0)
        .map(|(name, _)| name.clone())
        .collect();
    // Only the empty partitions ahead are read whole (a read of nothing).
    let holding: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_class WHERE relname = ANY($1) AND reltuples > 0",
            &[&sequential],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(holding, 0, "{read:?}");
}

/// The batch inserts read no table that grows, so they go out prepared once per connection
/// (see `shared/src/db/mod.rs`): ten submissions' inserts of 1 to 10 jobs on one connection
/// are one prepared statement, parsed once and executed ten times.
#[tokio::test]
async fn the_submissions_insert_is_prepared_once_per_connection() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    let client = app.db.pool.get().await.unwrap();
    for size in 1..=10 {
        let batch: Vec<NewJob> = (0..size)
            .map(|n| NewJob {
                id: JobId::new(),
                account_id: account,
                api_key_id: None,
                modality: Modality::Text,
                content: format!("batch of {size}, job {n}"),
                messages: None,
                webhook_url: None,
                idempotency: None,
            })
            .collect();
        let stored = jobs::insert_many(&client, &batch).await.unwrap();
        assert_eq!(stored, vec![true; size]);
    }

    let prepared = client
        .query(
            "SELECT generic_plans + custom_plans FROM pg_prepared_statements \
             WHERE statement LIKE 'WITH input AS%INSERT INTO jobs%'",
            &[],
        )
        .await
        .unwrap();
    let executions: Vec<i64> = prepared.iter().map(|row| row.get(0)).collect();
    assert_eq!(executions, [10]);
}
