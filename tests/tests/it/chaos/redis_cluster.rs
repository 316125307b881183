//! The fleet on Redis beyond one node (contract 16): a six-node cluster (three masters, a
//! replica each) and a master behind Sentinel, made of Debian's `redis-server` on free ports.
//! Submissions end terminal exactly once with one delivery each, before and across the kill
//! of the master that serves the text queue (its replica promoted), with no `CROSSSLOT` error
//! in any log; a cluster that loses a slot answers 503 (with `job_id` where a job exists) and
//! the fleet recovers by itself when the slot returns.

use std::{
    net::{IpAddr, Ipv4Addr},
    time::{Duration, Instant},
};

use moderation_shared::{
    config::RedisSettings,
    domain::{AccountId, JobId, Modality},
    limits::{LimitSettings, Limiter, Verdict},
    queue::{relay::Relay, JobQueue, QueueSettings},
    redis_conn::RedisConn,
    registry::quota,
};
use moderation_tests::{
    eventually,
    fleet::{Fleet, Topology},
    redis_cluster::{RedisCluster, RedisSentinels},
};
use uuid::Uuid;

use super::{after, assert_terminal_once, finish, record_terminal_transitions, start_stream};

/// Runs every operation that uses several keys at once on `redis` and checks that each
/// answered (a cross-slot group fails with `CROSSSLOT` on a cluster).
async fn every_key_group_answers(redis: &RedisSettings, fleet: &Fleet) {
    let conn = RedisConn::new(redis).unwrap();
    let queue = JobQueue::new(conn.clone());
    let job = JobId(Uuid::new_v4());
    queue.enqueue(Modality::Image, job).await.unwrap();
    queue
        .depth(Modality::Image, Duration::from_secs(15))
        .await
        .unwrap();
    queue.record_dead(Modality::Image, job).await.unwrap();
    // No image worker made the group: NOGROUP is the answer expected, CROSSSLOT is not.
    let removed = queue
        .remove_stale_consumers(Modality::Image, "nobody", Duration::from_secs(3600))
        .await;
    assert!(format!("{removed:?}").contains("NOGROUP"), "{removed:?}");
    let relay = Relay::new(
        fleet.pool.clone(),
        queue.clone(),
        vec![Modality::Image],
        QueueSettings::default(),
    );
    relay.try_relay(Modality::Image).await.unwrap();
    let limiter = Limiter::new(conn.clone(), LimitSettings::default());
    let source = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    assert!(
        matches!(
            limiter.admit(source, AccountId(Uuid::new_v4()), 60).await,
            Verdict::Admitted(Some(_))
        ),
        "the rate windows answered"
    );
    assert_eq!(
        limiter.record_failure(source).await,
        Verdict::Admitted(None)
    );
    let day = moderation_shared::clock::now();
    assert_eq!(
        quota::count_check(&conn, AccountId(Uuid::new_v4()), day)
            .await
            .unwrap(),
        1
    );
}

/// Asserts that no role logged a `CROSSSLOT` error.
fn assert_no_crossslot(fleet: &Fleet) {
    let logs = fleet.logs();
    assert!(!logs.contains("CROSSSLOT"), "{logs}");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn redis_cluster_master_of_the_text_queue_killed() {
    let mut cluster = RedisCluster::start().await;
    let redis = cluster.settings("chaos");
    let fleet = Fleet::start_with(Topology::Proxied, Some(&redis), &[]).await;
    record_terminal_transitions(&fleet).await;
    every_key_group_answers(&redis, &fleet).await;

    // On a healthy cluster.
    let streaming = start_stream(&fleet, "cluster-steady");
    let steady = finish(&fleet, "cluster-steady", streaming, Instant::now()).await;
    assert_terminal_once(&fleet, &steady.into_values().collect::<Vec<_>>()).await;

    // Across the death of the master serving the text queue: its replica is promoted.
    let text_queue = JobQueue::new(RedisConn::new(&redis).unwrap()).stream_key(Modality::Text);
    let streaming = start_stream(&fleet, "cluster-failover");
    after(Duration::from_secs(2)).await;
    let master = cluster.master_of(&text_queue).await;
    cluster.kill(master);
    let killed = Instant::now();
    cluster.wait_until_served(Duration::from_secs(30)).await;
    let promoted = killed.elapsed();
    let new_master = cluster.master_of(&text_queue).await;
    assert_ne!(new_master, master);
    println!(
        "chaos cluster-failover: the replica took over the text queue's slot {:.1} s after its \
         master was killed",
        promoted.as_secs_f64()
    );
    let failover = finish(&fleet, "cluster-failover", streaming, Instant::now()).await;
    assert_terminal_once(&fleet, &failover.into_values().collect::<Vec<_>>()).await;
    assert_no_crossslot(&fleet);
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn redis_cluster_losing_a_slot_answers_503_and_recovers_when_it_returns() {
    let mut cluster = RedisCluster::start().await;
    let redis = cluster.settings("chaos");
    // A request may wait on a lost slot in the rate limiter (each script's retries, about a
    // second, then it fails open) and in the enqueue: a deadline that lets it answer itself.
    let fleet = Fleet::start_with(
        Topology::Proxied,
        Some(&redis),
        &[("APP_REQUEST_DEADLINE_MS", "10000")],
    )
    .await;
    record_terminal_transitions(&fleet).await;
    let text_queue = JobQueue::new(RedisConn::new(&redis).unwrap()).stream_key(Modality::Text);
    let master = cluster.master_of(&text_queue).await;
    let replica = cluster.replica_of(master).await;

    // The text queue's slot is lost: its master and the master's replica are gone.
    cluster.kill(replica);
    cluster.kill(master);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap();
    let submit = |text: String| {
        let form = reqwest::multipart::Form::new().text("text", text);
        client
            .post(format!("{}/api/v1/moderate/prompt", fleet.api_url))
            .bearer_auth(&fleet.key)
            .multipart(form)
            .send()
    };
    let refused = eventually(
        Duration::from_secs(30),
        "a submission refused with 503",
        || {
            let answer = submit(format!("slot lost {}", Uuid::new_v4()));
            async move {
                let answer = answer.await.ok()?;
                (answer.status() == 503).then_some(answer)
            }
        },
    )
    .await;
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "SERVICE_UNAVAILABLE", "{body}");
    // The job was stored before the enqueue failed, when the answer names one.
    let stored: Option<Uuid> = body["job_id"].as_str().map(|id| id.parse().unwrap());

    // The slot returns; the fleet recovers by itself: the stored job and a new one complete.
    cluster.restart(master);
    cluster.restart(replica);
    let returned = Instant::now();
    cluster.wait_until_served(Duration::from_secs(60)).await;
    let accepted = eventually(Duration::from_secs(60), "a submission accepted", || {
        let answer = submit("slot back".to_owned());
        async move {
            let answer = answer.await.ok()?;
            if answer.status() != 202 {
                return None;
            }
            let body: serde_json::Value = answer.json().await.ok()?;
            body["job_id"].as_str()?.parse::<Uuid>().ok()
        }
    })
    .await;
    let jobs: Vec<Uuid> = stored.into_iter().chain([accepted]).collect();
    let pool = fleet.pool.clone();
    eventually(Duration::from_secs(60), "every job completed", || {
        let (pool, jobs) = (pool.clone(), jobs.clone());
        async move {
            let done: i64 = pool
                .get()
                .await
                .ok()?
                .query_one(
                    "SELECT count(*) FROM jobs WHERE id = ANY($1) AND status = 'completed'",
                    &[&jobs],
                )
                .await
                .ok()?
                .get(0);
            (done == jobs.len() as i64).then_some(())
        }
    })
    .await;
    println!(
        "chaos cluster-slot-lost: 503 {body}; every job completed {:.1} s after the slot's \
         nodes were started again",
        returned.elapsed().as_secs_f64()
    );
    assert_terminal_once(&fleet, &jobs).await;
    assert!(stored.is_some(), "the 503 named the stored job");
    assert_no_crossslot(&fleet);
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn redis_sentinel_master_killed_and_replica_promoted() {
    let mut sentinels = RedisSentinels::start().await;
    let redis = sentinels.settings("chaos", RedisSentinels::MASTER);
    let fleet = Fleet::start_with(Topology::Proxied, Some(&redis), &[]).await;
    record_terminal_transitions(&fleet).await;
    every_key_group_answers(&redis, &fleet).await;
    let streaming = start_stream(&fleet, "sentinel-failover");
    after(Duration::from_secs(2)).await;
    let killed = Instant::now();
    sentinels.fail_over().await;
    println!(
        "chaos sentinel-failover: the sentinels named the replica {:.1} s after the master \
         was killed",
        killed.elapsed().as_secs_f64()
    );
    let accepted = finish(&fleet, "sentinel-failover", streaming, Instant::now()).await;
    assert_terminal_once(&fleet, &accepted.into_values().collect::<Vec<_>>()).await;
}
