//! The durable queue: draining, acknowledgement, idle pickup, takeover of a killed worker's
//! job, the relay after Redis loses its data, and the limit on tries.

use std::time::{Duration, Instant};

use moderation_shared::{
    domain::{JobId, Modality},
    queue::{relay::Relay, JobQueue, QueueDepth, QueueSettings},
};
use moderation_tests::{
    eventually, spawn_app,
    worker::{count_status, insert_jobs, queue, spawn_worker, PrivateRedis, WorkerProcess},
    TestApp,
};

const TEXT: Modality = Modality::Text;

async fn job_row(app: &TestApp, job: JobId) -> (String, String, i32, Option<String>) {
    let client = app.db.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT status, stage, attempts, error_code FROM jobs WHERE id = $1",
            &[&job.0],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

/// How many jobs have an entry id recorded.
async fn members(queue: &JobQueue) -> i64 {
    let key = queue.entries_key(TEXT);
    queue
        .redis()
        .with(|mut conn| async move { redis::cmd("HLEN").arg(&key).query_async(&mut conn).await })
        .await
        .unwrap()
}

/// Whether the stream holds no entry; false while Redis does not answer.
async fn consumers(queue: &JobQueue) -> usize {
    let key = queue.stream_key(TEXT);
    let info: redis::streams::StreamInfoConsumersReply = queue
        .redis()
        .with(|mut conn| async move {
            redis::cmd("XINFO")
                .arg("CONSUMERS")
                .arg(&key)
                .arg(moderation_shared::queue::GROUP)
                .query_async(&mut conn)
                .await
        })
        .await
        .unwrap();
    info.consumers.len()
}

async fn is_empty(queue: &JobQueue) -> bool {
    let Ok(depth) = queue.depth(TEXT, Duration::from_secs(15)).await else {
        return false;
    };
    depth.waiting == 0 && depth.pending == 0
}

#[tokio::test]
async fn a_queue_never_used_reports_zero_depth() {
    let app = spawn_app().await;

    let depth = queue(&app.redis)
        .depth(TEXT, Duration::from_secs(15))
        .await
        .unwrap();

    assert_eq!(depth, QueueDepth::default());
}

#[tokio::test]
async fn finished_jobs_do_not_accumulate_in_redis() {
    let app = spawn_app().await;
    let queue = queue(&app.redis);
    let jobs = insert_jobs(&app, TEXT, 200, true).await;
    queue.enqueue_many(TEXT, &jobs).await.unwrap();
    assert_eq!(
        queue
            .depth(TEXT, Duration::from_secs(15))
            .await
            .unwrap()
            .waiting,
        200
    );

    let worker = spawn_worker(&app, |s| s.modalities = vec![TEXT]).await;

    eventually(Duration::from_secs(60), "every job completed", || async {
        (count_status(&app, "completed").await == 200).then_some(())
    })
    .await;
    eventually(Duration::from_secs(10), "an empty stream", || async {
        is_empty(&queue).await.then_some(())
    })
    .await;
    assert_eq!(members(&queue).await, 0);
    assert_eq!(
        queue.depth(TEXT, Duration::from_secs(15)).await.unwrap(),
        QueueDepth::default()
    );
    let (status, stage, attempts, _) = job_row(&app, jobs[0]).await;
    assert_eq!(
        (status.as_str(), stage.as_str(), attempts),
        ("completed", "done", 1)
    );
    assert_eq!(worker.stats.handler_errors(), 0);
    worker.stop().await;
    assert_eq!(
        consumers(&queue).await,
        0,
        "a stopped worker leaves the group"
    );
}

#[tokio::test]
async fn an_idle_worker_picks_up_a_new_job_within_200_ms() {
    let app = spawn_app().await;
    let queue = queue(&app.redis);
    let _worker = spawn_worker(&app, |s| s.modalities = vec![TEXT]).await;
    let warm_up = insert_jobs(&app, TEXT, 1, true).await;
    queue.enqueue_many(TEXT, &warm_up).await.unwrap();
    eventually(
        Duration::from_secs(10),
        "the warm-up job completed",
        || async {
            (count_status(&app, "completed").await == 1 && is_empty(&queue).await).then_some(())
        },
    )
    .await;
    let job = insert_jobs(&app, TEXT, 1, true).await[0];

    let started = Instant::now();
    queue.enqueue(TEXT, job).await.unwrap();
    eventually(Duration::from_secs(5), "the new job completed", || async {
        (job_row(&app, job).await.0 == "completed").then_some(())
    })
    .await;

    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_millis(200), "took {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_queued_jobs_drain_without_a_worker_error_or_restart() {
    let app = spawn_app().await;
    let queue = queue(&app.redis);
    let jobs = insert_jobs(&app, TEXT, 100_000, true).await;
    queue.enqueue_many(TEXT, &jobs).await.unwrap();

    let worker = spawn_worker(&app, |s| {
        s.modalities = vec![TEXT];
        s.concurrency = moderation_worker::Concurrency::all(32);
        s.queue.relay_interval = Duration::from_secs(5);
    })
    .await;

    eventually(Duration::from_secs(600), "an empty stream", || async {
        is_empty(&queue).await.then_some(())
    })
    .await;
    assert_eq!(count_status(&app, "completed").await, 100_000);
    assert_eq!(members(&queue).await, 0);
    assert!(worker.is_running());
    assert_eq!(worker.stats.worker_errors(), 0);
    assert_eq!(worker.stats.handler_errors(), 0);
    assert_eq!(worker.stats.handled(), 100_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_held_by_a_worker_killed_with_sigkill_is_taken_over_within_30_s() {
    let app = spawn_app().await;
    let queue = queue(&app.redis);
    let job = insert_jobs(&app, TEXT, 1, true).await[0];
    // Hold the job's row so the first worker's claim waits: it is mid-task when killed.
    let mut locker = app.db.pool.get().await.unwrap();
    locker
        .execute(
            "UPDATE jobs SET webhook_url = 'https://127.0.0.1:9/hook' WHERE id = $1",
            &[&job.0],
        )
        .await
        .unwrap();
    let lock = locker.transaction().await.unwrap();
    lock.execute("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", &[&job.0])
        .await
        .unwrap();
    let mut first = WorkerProcess::spawn(&app, &app.redis, TEXT, &[]);
    queue.enqueue(TEXT, job).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "the first worker holding the job",
        || async {
            let depth = queue.depth(TEXT, Duration::from_secs(15)).await.unwrap();
            (depth.pending == 1).then_some(())
        },
    )
    .await;

    first.kill();
    let killed = Instant::now();
    lock.rollback().await.unwrap();
    eventually(
        Duration::from_secs(10),
        "the entry counted as retrying",
        || async {
            let depth = queue.depth(TEXT, Duration::from_millis(500)).await.unwrap();
            (depth.retrying == 1 && depth.pending == 1).then_some(())
        },
    )
    .await;
    let second = spawn_worker(&app, |s| {
        s.modalities = vec![TEXT];
        s.queue.min_idle = Duration::from_secs(5);
    })
    .await;

    eventually(Duration::from_secs(30), "the job taken over", || async {
        (second.stats.handled() >= 1 && is_empty(&queue).await).then_some(())
    })
    .await;
    assert!(
        killed.elapsed() < Duration::from_secs(30),
        "took {:?}",
        killed.elapsed()
    );
    let (status, _, attempts, _) = job_row(&app, job).await;
    assert_eq!(status, "completed");
    assert!((1..=2).contains(&attempts), "attempts {attempts}");
    assert_eq!(
        app.deliveries_of(job.0).await,
        1,
        "completed once, one delivery"
    );
    assert_eq!(members(&queue).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_that_loses_its_data_loses_no_job() {
    let app = spawn_app().await;
    let mut redis = PrivateRedis::start();
    let settings = redis.settings("own");
    let queue = queue(&settings);
    eventually(Duration::from_secs(10), "the private Redis up", || async {
        queue.redis().ping().await.ok()
    })
    .await;
    let lost = insert_jobs(&app, TEXT, 10, true).await;
    queue.enqueue_many(TEXT, &lost).await.unwrap();

    // Redis restarts empty before any worker ran: the ten entries are gone.
    redis.restart();
    eventually(
        Duration::from_secs(10),
        "the private Redis back",
        || async { queue.redis().ping().await.ok() },
    )
    .await;
    let worker = spawn_worker(&app, |s| {
        s.modalities = vec![TEXT];
        s.redis = settings.clone();
    })
    .await;
    eventually(
        Duration::from_secs(30),
        "the lost jobs relayed and processed",
        || async { (count_status(&app, "completed").await == 10).then_some(()) },
    )
    .await;

    // Redis restarts again under a running worker, and jobs arrive whose enqueue failed.
    redis.stop();
    let never_enqueued = insert_jobs(&app, TEXT, 5, false).await;
    redis.restart();
    eventually(
        Duration::from_secs(30),
        "the new jobs relayed and processed",
        || async { (count_status(&app, "completed").await == 15).then_some(()) },
    )
    .await;
    eventually(Duration::from_secs(10), "an empty stream", || async {
        is_empty(&queue).await.then_some(())
    })
    .await;
    assert_eq!(never_enqueued.len(), 5);
    assert_eq!(count_status(&app, "queued").await, 0);
    assert!(worker.is_running());
    assert_eq!(worker.stats.worker_errors(), 0);
}

#[tokio::test]
async fn a_job_is_tried_a_fifth_time_but_not_a_sixth() {
    let app = spawn_app().await;
    let queue = queue(&app.redis);
    let jobs = insert_jobs(&app, TEXT, 2, true).await;
    let (fifth, sixth) = (jobs[0], jobs[1]);
    let client = app.db.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE jobs SET attempts = CASE WHEN id = $1 THEN 4 ELSE 5 END,
                             webhook_url = 'https://93.184.215.14/hook'",
            &[&fifth.0],
        )
        .await
        .unwrap();
    queue.enqueue_many(TEXT, &jobs).await.unwrap();

    let _worker = spawn_worker(&app, |s| s.modalities = vec![TEXT]).await;

    eventually(Duration::from_secs(30), "both jobs handled", || async {
        is_empty(&queue).await.then_some(())
    })
    .await;
    let (status, _, attempts, _) = job_row(&app, fifth).await;
    assert_eq!((status.as_str(), attempts), ("completed", 5));
    let (status, stage, attempts, code) = job_row(&app, sixth).await;
    assert_eq!(
        (status.as_str(), stage.as_str(), attempts, code.as_deref()),
        ("failed", "failed", 5, Some("INTERNAL"))
    );
    // Its failure reaches the client like any other: one webhook delivery.
    let bodies = client
        .query("SELECT body FROM deliveries WHERE job_id = $1", &[&sixth.0])
        .await
        .unwrap();
    assert_eq!(bodies.len(), 1);
    let body: serde_json::Value = serde_json::from_slice(bodies[0].get::<_, &[u8]>(0)).unwrap();
    assert_eq!(body["status"], "failed");
    assert_eq!(body["error"]["code"], "INTERNAL");
    assert_eq!(body["job_id"], sixth.0.to_string());
    assert_eq!(
        queue
            .depth(TEXT, Duration::from_secs(15))
            .await
            .unwrap()
            .dead,
        1
    );
}

/// Without it, khugepaged refills the 64 KiB holes mimalloc purges to whole 2 MiB pages and the
/// worker's resident set creeps up under steady load (the soak measured 20 % in 10 minutes).
#[tokio::test]
async fn the_worker_process_runs_without_transparent_huge_pages() {
    let app = spawn_app().await;
    let worker = WorkerProcess::spawn(&app, &app.redis, TEXT, &[]);
    let status = format!("/proc/{}/status", worker.pid());

    // The worker turns them off as it starts (the kernel shows it as `THP_enabled: 0`).
    eventually(Duration::from_secs(10), "THP_enabled: 0", || async {
        let text = std::fs::read_to_string(&status).ok()?;
        let line = text.lines().find(|l| l.starts_with("THP_enabled:"))?;
        (line.trim_start_matches("THP_enabled:").trim() == "0").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_finishes_the_job_it_holds_and_exits_cleanly_within_25_s_of_sigterm() {
    let app = spawn_app().await;
    let queue = queue(&app.redis);
    let mut worker = WorkerProcess::spawn(&app, &app.redis, TEXT, &[]);
    let job = insert_jobs(&app, TEXT, 1, true).await[0];
    // Hold the job's row so the worker is mid-job when the signal comes.
    let mut locker = app.db.pool.get().await.unwrap();
    let lock = locker.transaction().await.unwrap();
    lock.execute("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", &[&job.0])
        .await
        .unwrap();
    queue.enqueue(TEXT, job).await.unwrap();
    // The worker holds the job once its claim waits on the row (its entry read from the
    // stream is not enough: on a loaded machine the claim may not have been sent yet when the
    // signal comes, and a worker stopping leaves a job it has not claimed to the others).
    let watcher = app.db.pool.get().await.unwrap();
    eventually(
        Duration::from_secs(30),
        "the worker's claim waiting on the job's row",
        || async {
            let waiting: i64 = watcher
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity
                     WHERE datname = current_database() AND wait_event_type = 'Lock'
                       AND query LIKE '%UPDATE%'",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            (waiting == 1).then_some(())
        },
    )
    .await;
    assert_eq!(
        queue
            .depth(TEXT, Duration::from_secs(15))
            .await
            .unwrap()
            .pending,
        1
    );

    worker.terminate();
    let signalled = Instant::now();
    lock.rollback().await.unwrap();
    let status = eventually(Duration::from_secs(25), "the worker exiting", || {
        std::future::ready(worker.try_wait())
    })
    .await;

    assert!(status.success(), "{status:?}");
    assert!(signalled.elapsed() < Duration::from_secs(25));
    let (status, stage, attempts, _) = job_row(&app, job).await;
    assert_eq!(
        (status.as_str(), stage.as_str(), attempts),
        ("completed", "done", 1)
    );
    assert!(is_empty(&queue).await, "the finished job was acknowledged");
    assert_eq!(
        consumers(&queue).await,
        0,
        "a stopped worker leaves the group"
    );
}

fn relay(app: &TestApp, grace: Duration) -> Relay {
    let settings = QueueSettings {
        relay_grace: grace,
        ..QueueSettings::default()
    };
    Relay::new(app.db.pool.clone(), queue(&app.redis), vec![TEXT], settings)
}

#[tokio::test]
async fn the_relay_leaves_jobs_younger_than_the_grace_time_to_the_api() {
    let app = spawn_app().await;
    insert_jobs(&app, TEXT, 3, false).await;

    let relayed = relay(&app, Duration::from_secs(60))
        .try_relay(TEXT)
        .await
        .unwrap();

    assert_eq!(relayed, 0);
    assert_eq!(members(&queue(&app.redis)).await, 0);
}

#[tokio::test]
async fn the_relay_enqueues_a_missing_job_once_and_one_relay_runs_a_round() {
    let app = spawn_app().await;
    let queue = queue(&app.redis);
    let never = insert_jobs(&app, TEXT, 2, false).await;
    let lost = insert_jobs(&app, TEXT, 3, true).await;
    let present = insert_jobs(&app, TEXT, 4, true).await;
    queue.enqueue_many(TEXT, &present).await.unwrap();
    let (first, second) = (relay(&app, Duration::ZERO), relay(&app, Duration::ZERO));

    let relayed = first.try_relay(TEXT).await.unwrap();
    let concurrent = second.try_relay(TEXT).await.unwrap();

    assert_eq!(relayed, never.len() + lost.len());
    assert_eq!(concurrent, 0, "the other relay waits for the next round");
    assert_eq!(members(&queue).await, 9);
    let depth = queue.depth(TEXT, Duration::from_secs(15)).await.unwrap();
    assert_eq!(depth.waiting, 9);
}

#[tokio::test]
async fn a_claim_commits_unflushed_and_nothing_else_does() {
    use moderation_shared::{
        db::jobs::{claim_many, Claim, ClaimRequest},
        domain::{ClaimToken, JobStage},
    };
    let app = spawn_app().await;
    let job = insert_jobs(&app, TEXT, 1, true).await[0];
    let mut client = app.db.pool.get().await.unwrap();
    let setting = "SELECT current_setting('synchronous_commit')";
    let request = ClaimRequest {
        id: job,
        token: ClaimToken::new(),
        redelivery: false,
        first_stage: JobStage::Classifying,
    };

    let before: String = client.query_one(setting, &[]).await.unwrap().get(0);
    // In a transaction only to look at the setting before the claim's commit.
    let tx = client.transaction().await.unwrap();
    let claims = claim_many(&tx, &[request], 5, Duration::from_secs(60))
        .await
        .unwrap();
    let during: String = tx.query_one(setting, &[]).await.unwrap().get(0);
    tx.commit().await.unwrap();
    let after: String = client.query_one(setting, &[]).await.unwrap().get(0);

    assert!(matches!(claims[..], [Claim::Claimed(_)]), "{claims:?}");
    assert_eq!(before, "on", "a pooled connection commits flushed");
    assert_eq!(during, "off", "the claim's transaction commits unflushed");
    assert_eq!(
        after, "on",
        "the setting ended with the claim's transaction"
    );
}

#[tokio::test]
async fn the_worker_takes_1_to_1024_threads_and_refuses_0_or_1025_naming_the_variable() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    for threads in ["1", "1024"] {
        let _worker =
            WorkerProcess::spawn(&app, &app.redis, TEXT, &[("APP_WORKER_THREADS", threads)]);
        let job = app.submit_prompt(&key, "a friendly note").await;
        let body = app.finished_job(&key, job).await;
        assert_eq!(body["status"], "completed", "{threads} threads: {body}");
    }
    for threads in ["0", "1025"] {
        let stderr = app
            .refused_start(
                "worker",
                &["--modality", "text"],
                &[("APP_WORKER_THREADS", threads)],
            )
            .await;
        assert!(
            stderr.contains("APP_WORKER_THREADS") && stderr.contains("1 to 1024"),
            "{threads}: {stderr}"
        );
    }
}
