//! The upgrade to V017 on a database holding rows: every row moves into its month's partition
//! unchanged, idempotency keys and usage counts move out, and the service reads them back. The
//! upgrade to V021: the open jobs' queue state moves to `open_jobs`.

use moderation_shared::{
    db::{self, jobs},
    domain::{AccountId, JobId},
    lifecycle,
};
use moderation_tests::TestDatabase;
use uuid::Uuid;

/// The rows of `table` as text, ordered, over `columns` (the columns both schemas have).
async fn rows(client: &deadpool_postgres::Object, table: &str, columns: &str) -> Vec<String> {
    client
        .query(
            &format!("SELECT ({columns})::text FROM {table} ORDER BY 1"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

const JOB_COLUMNS: &str = "id, account_id, type, status, content, is_prohibited, created_at";
const DELIVERY_COLUMNS: &str = "id, job_id, account_id, target_url, body, state, created_at";
const ATTEMPT_COLUMNS: &str = "delivery_id, attempt, started_at, status_code";

/// A database migrated up to `version`, holding one account: the database and the account.
async fn database_at(version: i32) -> (TestDatabase, Uuid) {
    let db = TestDatabase::create_at(Some(version)).await;
    let account = Uuid::now_v7();
    db.pool
        .get()
        .await
        .unwrap()
        .execute(
            "INSERT INTO accounts (id, name) VALUES ($1, 'upgraded')",
            &[&account],
        )
        .await
        .unwrap();
    (db, account)
}

#[tokio::test]
async fn upgrading_a_database_with_rows_moves_each_into_its_month_partition_unchanged() {
    let (db, account) = database_at(16).await;
    let client = db.pool.get().await.unwrap();
    // The schema before V017 has no uuid_v7(): the test makes ids the services made then.
    client
        .batch_execute(
            "CREATE FUNCTION uuid_v7_test(at timestamptz) RETURNS uuid LANGUAGE sql AS $$ \
             SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) \
                    PLACING substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) \
                    FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid $$",
        )
        .await
        .unwrap();
    // Jobs of three months (70 and 35 days ago, and now), each with a delivery and an attempt;
    // one job holds an idempotency key.
    client
        .batch_execute(&format!(
            "INSERT INTO jobs (id, account_id, type, status, stage, content, is_prohibited, \
                               created_at, updated_at, completed_at, idempotency_key, \
                               request_fingerprint) \
             SELECT uuid_v7_test(t), '{account}', 'text', 'completed', 'done', 'job ' || n, \
                    n % 2 = 0, t, t, t, CASE WHEN n = 1 THEN 'order-1' END, \
                    CASE WHEN n = 1 THEN decode(repeat('ab', 32), 'hex') END \
             FROM generate_series(1, 30) AS n, \
                  LATERAL (SELECT now() - (n % 3) * interval '35 days') AS at(t); \
             INSERT INTO deliveries (id, job_id, account_id, target_url, body, state, attempts, \
                                     schedule_attempts, created_at, finished_at) \
             SELECT uuid_v7_test(created_at), id, account_id, 'https://hooks.example.com/x', \
                    convert_to('{{\"job_id\": \"' || id || '\"}}', 'UTF8'), 'delivered', 1, 1, \
                    created_at, created_at FROM jobs; \
             INSERT INTO delivery_attempts (delivery_id, attempt, scheduled_at, started_at, \
                                            duration_ms, status_code) \
             SELECT id, 1, created_at, created_at, 12, 200 FROM deliveries;"
        ))
        .await
        .unwrap();
    let jobs_before = rows(&client, "jobs", JOB_COLUMNS).await;
    let deliveries_before = rows(&client, "deliveries", DELIVERY_COLUMNS).await;
    let attempts_before = rows(&client, "delivery_attempts", ATTEMPT_COLUMNS).await;
    let per_day: Vec<String> = rows(
        &client,
        "(SELECT (created_at AT TIME ZONE 'UTC')::date AS day, type, count(*) AS n \
          FROM jobs GROUP BY 1, 2) AS d",
        "day, type, n",
    )
    .await;
    drop(client);

    let applied = db::migrate(&db.pool).await.unwrap();
    assert!(applied.contains(&17), "{applied:?}");

    let client = db.pool.get().await.unwrap();
    assert_eq!(rows(&client, "jobs", JOB_COLUMNS).await, jobs_before);
    assert_eq!(
        rows(&client, "deliveries", DELIVERY_COLUMNS).await,
        deliveries_before
    );
    assert_eq!(
        rows(&client, "delivery_attempts", ATTEMPT_COLUMNS).await,
        attempts_before
    );
    let usage: Vec<String> = rows(
        &client,
        "(SELECT day, type, sum(count) AS n FROM usage_days GROUP BY 1, 2) AS d",
        "day, type, n",
    )
    .await;
    assert_eq!(usage, per_day);
    let key: (String, Vec<u8>) = {
        let row = client
            .query_one("SELECT key, fingerprint FROM idempotency_keys", &[])
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(key, ("order-1".to_owned(), vec![0xab; 32]));

    // Every row sits in the partition of its id's month, and every partition is one month.
    let partitions = lifecycle::partitions(&client).await.unwrap();
    for table in ["jobs", "deliveries", "delivery_attempts"] {
        let months = partitions.iter().filter(|p| p.table == table).count();
        assert!(
            months >= 5,
            "{table}: three months of rows and two ahead: {months}"
        );
    }
    let misplaced: i64 = client
        .query_one(
            "SELECT count(*) FROM jobs j \
             WHERE tableoid::regclass::text <> 'jobs_y' \
                   || to_char(created_at AT TIME ZONE 'UTC', 'YYYY\"m\"MM')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(misplaced, 0);

    // The service reads them back.
    let any: Uuid = client
        .query_one("SELECT id FROM jobs ORDER BY id LIMIT 1", &[])
        .await
        .unwrap()
        .get(0);
    let read = jobs::get(&client, AccountId(account), JobId(any), Uuid::nil())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.id, JobId(any));
}

/// A row of `open_jobs`: job, status, enqueued at and leased until (UTC, to the second), and
/// whether its claim token is the job's.
type OpenRow = (Uuid, String, Option<String>, Option<String>, bool);

#[tokio::test]
async fn upgrading_to_v021_moves_the_open_jobs_queue_state_to_open_jobs() {
    let (db, account) = database_at(20).await;
    let client = db.pool.get().await.unwrap();
    // Queued (never enqueued, and enqueued), processing (with a lease, and claimed before
    // leases existed), and ended.
    let made: Vec<(Uuid, String)> = client
        .query(
            "INSERT INTO jobs (id, account_id, type, status, stage, content, enqueued_at, \
                               claim_token, locked_until, updated_at, completed_at, \
                               is_prohibited) \
             SELECT uuid_v7(), $1, 'text', s.status, \
                    CASE s.status WHEN 'queued' THEN 'queued' WHEN 'processing' THEN 'classifying' \
                                  ELSE 'done' END, \
                    s.name, s.enqueued, s.token, \
                    s.lease, timestamptz '2026-01-01 00:00:00+00', s.ended, \
                    CASE WHEN s.status = 'completed' THEN false END \
             FROM (VALUES ('never enqueued', 'queued', NULL::timestamptz, NULL::uuid, \
                           NULL::timestamptz, NULL::timestamptz), \
                          ('enqueued', 'queued', timestamptz '2026-01-01 00:00:01+00', NULL, \
                           NULL, NULL), \
                          ('leased', 'processing', timestamptz '2026-01-01 00:00:01+00', \
                           gen_random_uuid(), timestamptz '2030-01-01 00:00:00+00', NULL), \
                          ('before leases', 'processing', NULL, gen_random_uuid(), NULL, NULL), \
                          ('ended', 'completed', NULL, gen_random_uuid(), NULL, now())) \
                  AS s(name, status, enqueued, token, lease, ended) \
             RETURNING id, content",
            &[&account],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let id_of = |name: &str| made.iter().find(|(_, n)| n == name).unwrap().0;
    drop(client);

    let applied = db::migrate(&db.pool).await.unwrap();
    assert!(applied.contains(&21), "{applied:?}");

    let client = db.pool.get().await.unwrap();
    let open: Vec<OpenRow> = client
        .query(
            "SELECT o.job_id, o.status, \
                    to_char(o.enqueued_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), \
                    to_char(o.locked_until AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), \
                    o.claim_token IS NOT DISTINCT FROM j.claim_token \
             FROM open_jobs o JOIN jobs j ON j.id = o.job_id ORDER BY j.content",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4)))
        .collect();
    let utc = |at: &str| Some(at.to_owned());
    assert_eq!(
        open,
        [
            (
                id_of("before leases"),
                "processing".to_owned(),
                None,
                utc("2026-01-01 01:00:00"),
                true
            ),
            (
                id_of("enqueued"),
                "queued".to_owned(),
                utc("2026-01-01 00:00:01"),
                None,
                true
            ),
            (
                id_of("leased"),
                "processing".to_owned(),
                utc("2026-01-01 00:00:01"),
                utc("2030-01-01 00:00:00"),
                true
            ),
            (
                id_of("never enqueued"),
                "queued".to_owned(),
                None,
                None,
                true
            ),
        ]
    );

    // Every partition of `jobs`, and one made after the upgrade, leaves room on its pages
    // for the updates of its rows.
    client
        .execute(
            "SELECT make_month_partition('jobs', now() + interval '6 months')",
            &[],
        )
        .await
        .unwrap();
    let partitions: Vec<(String, Option<Vec<String>>)> = client
        .query(
            "SELECT c.relname::text, c.reloptions FROM pg_inherits i \
             JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'jobs'::regclass",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert!(partitions.len() >= 4, "{partitions:?}");
    for (name, options) in &partitions {
        assert_eq!(
            options.as_deref(),
            Some(&["fillfactor=70".to_owned()][..]),
            "{name}"
        );
    }
}
