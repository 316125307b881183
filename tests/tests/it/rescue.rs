//! Jobs are never stranded: a claim or result run again after its reply was lost recognises
//! its own write; a `processing` job whose worker died (and whose queue entry Redis lost) is
//! rescued once its lease runs out, while a long job whose worker renews its lease is not; and
//! the relay judges a queued job lost by its entry in the stream itself.

use std::time::Duration;

use moderation_shared::{
    db::jobs::{claim_many, finish_many, requeue, Claim, ClaimRequest, Finish, JobResult},
    domain::{ClaimToken, JobId, JobStage, Modality},
    outcome::JobOutcome,
    queue::JOB_MAX_TRIES,
};
use moderation_tests::{
    eventually,
    media::{png, MediaServer},
    spawn_app,
    worker::{count_status, delete_namespace, insert_jobs, queue, WorkerProcess},
    TestApp,
};
use time::OffsetDateTime;

const IMAGE: Modality = Modality::Image;
const TEXT: Modality = Modality::Text;

/// A worker binary's settings for these tests: media from the local server, a lease of
/// `lease_ms`, and a relay (with the rescue) every 100 ms that enqueues at once.
fn worker_env(lease_ms: &str) -> [(&str, &str); 4] {
    [
        ("APP_ALLOW_PRIVATE_URLS", "true"),
        ("APP_JOB_LEASE_MS", lease_ms),
        ("APP_RELAY_INTERVAL_MS", "100"),
        ("APP_RELAY_GRACE_MS", "0"),
    ]
}

struct JobRow {
    status: String,
    attempts: i32,
    error_code: Option<String>,
    locked_until: Option<OffsetDateTime>,
}

async fn job_row(app: &TestApp, job: JobId) -> JobRow {
    let client = app.db.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT j.status, j.attempts, j.error_code, o.locked_until
             FROM jobs j LEFT JOIN open_jobs o ON o.job_id = j.id WHERE j.id = $1",
            &[&job.0],
        )
        .await
        .unwrap();
    JobRow {
        status: row.get(0),
        attempts: row.get(1),
        error_code: row.get(2),
        locked_until: row.get(3),
    }
}

/// A queued image job of a new account fetching `url`, with `attempts` tries already taken.
async fn image_job(app: &TestApp, url: &str, attempts: i32) -> JobId {
    let job = insert_jobs(app, IMAGE, 1, true).await[0];
    let client = app.db.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE jobs SET content = $2, attempts = $3 WHERE id = $1",
            &[&job.0, &url, &attempts],
        )
        .await
        .unwrap();
    job
}

async fn claim(app: &TestApp, job: JobId, token: ClaimToken, redelivery: bool) -> Claim {
    let client = app.db.pool.get().await.unwrap();
    let request = ClaimRequest {
        id: job,
        token,
        redelivery,
        first_stage: JobStage::Classifying,
    };
    let mut claims = claim_many(&client, &[request], JOB_MAX_TRIES, Duration::from_secs(60))
        .await
        .unwrap();
    claims.pop().unwrap()
}

async fn finish(app: &TestApp, job: JobId, token: ClaimToken) -> Option<Option<uuid::Uuid>> {
    let mut client = app.db.pool.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let result = JobResult {
        id: job,
        token,
        stamp: None,
        outcome: JobOutcome::Decided(Box::default()),
    };
    let mut finished = finish_many(&tx, &[result]).await.unwrap();
    tx.commit().await.unwrap();
    match finished.pop().unwrap() {
        Finish::Done(f) => Some(f.delivery_id.map(|d| d.0)),
        _ => None,
    }
}

fn claimed_attempts(claim: &Claim) -> Option<i32> {
    match claim {
        Claim::Claimed(job) => Some(job.attempts),
        _ => None,
    }
}

#[tokio::test]
async fn a_claim_run_again_after_its_reply_was_lost_is_claimed_for_its_token_only() {
    let app = spawn_app().await;
    let job = insert_jobs(&app, TEXT, 1, true).await[0];
    let (mine, other) = (ClaimToken::new(), ClaimToken::new());

    let first = claim(&app, job, mine, false).await;
    let again = claim(&app, job, mine, false).await;
    let someone_else = claim(&app, job, other, false).await;

    assert_eq!(claimed_attempts(&first), Some(1));
    assert_eq!(
        claimed_attempts(&again),
        Some(1),
        "the same claim again is answered claimed, without another try"
    );
    assert!(matches!(someone_else, Claim::Duplicate), "{someone_else:?}");
    let row = job_row(&app, job).await;
    assert_eq!((row.status.as_str(), row.attempts), ("processing", 1));
    let client = app.db.pool.get().await.unwrap();
    assert!(
        !requeue(&client, job, other).await.unwrap(),
        "only the holder gives the job back"
    );
}

#[tokio::test]
async fn a_result_run_again_after_its_reply_was_lost_answers_as_the_first_run_did() {
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
    let job = JobId(app.submit_prompt(&key, "hello").await);
    let (mine, other) = (ClaimToken::new(), ClaimToken::new());
    assert!(claimed_attempts(&claim(&app, job, mine, false).await).is_some());

    let first = finish(&app, job, mine).await;
    let again = finish(&app, job, mine).await;
    let someone_else = finish(&app, job, other).await;

    let delivery = first.flatten().expect("the first result made a delivery");
    assert_eq!(
        again,
        Some(Some(delivery)),
        "the same result again succeeds with the same delivery"
    );
    assert_eq!(someone_else, None, "another token's result is a duplicate");
    assert_eq!(app.deliveries_of(job.0).await, 1);
    assert_eq!(job_row(&app, job).await.status, "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_of_a_killed_worker_whose_entries_redis_lost_are_rescued_and_count_the_lost_try() {
    let app = spawn_app().await;
    let media = MediaServer::start().await;
    media.add("fresh.png", png(5, 5), "image/png");
    media.add("spent.png", png(30, 30), "image/png");
    let fresh = image_job(&app, &media.url("/slow-first/fresh.png"), 0).await;
    let spent = image_job(&app, &media.url("/slow-first/spent.png"), JOB_MAX_TRIES - 1).await;
    let queue = queue(&app.redis);
    let mut first = WorkerProcess::spawn(&app, &app.redis, IMAGE, &worker_env("1000"));
    queue.enqueue_many(IMAGE, &[fresh, spent]).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "both jobs mid-download",
        || async {
            let downloading = media.requests("/slow-first/fresh.png") == 1
                && media.requests("/slow-first/spent.png") == 1;
            (downloading && count_status(&app, "processing").await == 2).then_some(())
        },
    )
    .await;

    first.kill();
    assert!(
        delete_namespace(&app.redis).await > 0,
        "Redis lost the entries"
    );
    let _second = WorkerProcess::spawn(&app, &app.redis, IMAGE, &worker_env("1000"));

    let (fresh_row, spent_row) = eventually(Duration::from_secs(30), "both jobs ended", || async {
        let (f, s) = (job_row(&app, fresh).await, job_row(&app, spent).await);
        (f.status == "completed" && s.status == "failed").then_some((f, s))
    })
    .await;
    assert_eq!(fresh_row.attempts, 2, "the killed worker's try counted");
    assert_eq!(media.requests("/slow-first/fresh.png"), 2);
    assert_eq!(
        (spent_row.attempts, spent_row.error_code.as_deref()),
        (JOB_MAX_TRIES, Some("INTERNAL")),
        "its last try was the killed one"
    );
    assert_eq!(
        media.requests("/slow-first/spent.png"),
        1,
        "a job out of tries is not tried again"
    );
    let depth = queue.depth(IMAGE, Duration::from_secs(15)).await.unwrap();
    assert_eq!(depth.dead, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_job_whose_stream_was_deleted_while_its_entry_ids_survived_is_enqueued_again() {
    let app = spawn_app().await;
    let queue = queue(&app.redis);
    let jobs = insert_jobs(&app, TEXT, 3, true).await;
    queue.enqueue_many(TEXT, &jobs).await.unwrap();
    let stream = queue.stream_key(TEXT);
    let entries = queue.entries_key(TEXT);
    let surviving: i64 = queue
        .redis()
        .with(|mut conn| async move {
            redis::cmd("DEL")
                .arg(&stream)
                .query_async::<()>(&mut conn)
                .await?;
            redis::cmd("HLEN")
                .arg(&entries)
                .query_async(&mut conn)
                .await
        })
        .await
        .unwrap();
    assert_eq!(surviving, 3, "the entry ids outlived the stream");

    let _worker = WorkerProcess::spawn(&app, &app.redis, TEXT, &worker_env("60000"));

    eventually(Duration::from_secs(30), "the jobs completed", || async {
        (count_status(&app, "completed").await == 3).then_some(())
    })
    .await;
    for job in jobs {
        assert_eq!(job_row(&app, job).await.attempts, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_job_whose_worker_renews_its_lease_is_never_rescued() {
    let app = spawn_app().await;
    let media = MediaServer::start().await;
    let job = image_job(&app, &media.url("/slow"), 0).await;
    let queue = queue(&app.redis);
    let lease = Duration::from_millis(600);
    let _worker = WorkerProcess::spawn(&app, &app.redis, IMAGE, &worker_env("600"));
    queue.enqueue(IMAGE, job).await.unwrap();
    let claimed = eventually(Duration::from_secs(30), "the job mid-download", || async {
        let row = job_row(&app, job).await;
        (row.status == "processing" && media.requests("/slow") == 1).then_some(row)
    })
    .await;
    let first_lease = claimed.locked_until.unwrap();

    // Five leases long: without renewals the rescue (every 100 ms) would have taken it.
    eventually(
        Duration::from_secs(10),
        "the lease renewed five leases on",
        || async {
            let row = job_row(&app, job).await;
            assert_eq!(
                (row.status.as_str(), row.attempts),
                ("processing", 1),
                "the job was rescued while its worker worked on it"
            );
            (row.locked_until.unwrap() > first_lease + lease * 5).then_some(())
        },
    )
    .await;

    assert_eq!(media.requests("/slow"), 1, "downloaded once");
    assert_eq!(count_status(&app, "queued").await, 0);
}
