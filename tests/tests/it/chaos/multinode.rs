//! The multi-host chaos tier (`scripts/chaos --multinode`, run by `scripts/test`): the fleet
//! across hosts made of network namespaces on this machine ([`MultiNode`]: a six-node Redis
//! Cluster, a Postgres primary with a synchronous standby, the api, two workers, two
//! dispatchers and the webhook receiver, each on a host of its own), under one fault per
//! scenario while a stream of submissions with webhooks runs. The faults are the network's and
//! the servers': a worker cut from Redis, a worker cut from Postgres, a dispatcher cut in the
//! middle of an attempt, the receiver unreachable, the Redis master of the text queue killed
//! (its replica promoted) and the Postgres primary killed (its standby promoted). Each scenario
//! prints what held: every accepted job terminal exactly once (a test-only trigger records each
//! terminal transition), one delivery per job, every delivery delivered, no `CROSSSLOT` error
//! in any log, and the time to recover.

use std::{
    collections::HashMap,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    time::{Duration, Instant},
};

use futures_util::future::BoxFuture;
use moderation_shared::{domain::Modality, queue::JobQueue, redis_conn::RedisConn};
use moderation_tests::{eventually, multinode::MultiNode, netns::Host, receiver::Reply};
use uuid::Uuid;

use super::{after, assert_terminal_once, finish, record_terminal_transitions, start_stream};

/// How long the receiver takes to answer: long enough that every dispatcher has attempts in
/// flight whenever jobs are flowing, shorter than `APP_WEBHOOK_TIMEOUT_MS`.
const REPLY_AFTER: Duration = Duration::from_millis(800);

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the multi-host chaos tier: scripts/chaos --multinode"]
async fn faults_across_hosts() {
    let mut nodes = MultiNode::start().await;
    record_terminal_transitions(&nodes).await;
    nodes.receiver.script([], Reply::Delayed(200, REPLY_AFTER));

    across(&mut nodes, "hosts-worker-cut-from-redis", |nodes| {
        Box::pin(async move {
            after(Duration::from_secs(2)).await;
            let worker = &nodes.hosts.workers[0];
            let redis: Vec<SocketAddr> = nodes
                .redis
                .addresses()
                .into_iter()
                .map(Into::into)
                .collect();
            cut(worker, &redis).await;
        })
    })
    .await;

    across(&mut nodes, "hosts-worker-cut-from-postgres", |nodes| {
        Box::pin(async move {
            after(Duration::from_secs(2)).await;
            let worker = &nodes.hosts.workers[0];
            cut(worker, &[nodes.primary.addr(), nodes.standby.addr()]).await;
        })
    })
    .await;

    // The cut comes as soon as the receiver has a request of the dispatcher's in hand, whose
    // answer (REPLY_AFTER later) can then never reach it; the same delivery must arrive again.
    let cut = across(&mut nodes, "hosts-dispatcher-cut-mid-attempt", |nodes| {
        Box::pin(async move {
            after(Duration::from_secs(2)).await;
            let dispatcher = &nodes.hosts.dispatchers[0];
            let (receiver, from) = (&nodes.receiver, IpAddr::V4(dispatcher.ip));
            let seen = receiver.received().len();
            let id = eventually(
                Duration::from_secs(10),
                "an attempt of the dispatcher's",
                move || async move {
                    receiver.received()[seen..]
                        .iter()
                        .find(|r| r.peer.ip() == from)
                        .and_then(|r| r.headers.get("webhook-id")?.to_str().ok())
                        .map(str::to_owned)
                },
            )
            .await;
            dispatcher.isolate();
            let postgres = nodes.primary.addr();
            assert!(!reaches(dispatcher, postgres), "dispatcher 1 is cut off");
            after(Duration::from_secs(5)).await;
            dispatcher.rejoin();
            back(dispatcher, postgres).await;
            id
        })
    })
    .await;
    let arrivals = nodes
        .receiver
        .received()
        .iter()
        .filter(|r| r.headers.get("webhook-id").and_then(|v| v.to_str().ok()) == Some(&cut))
        .count();
    println!("chaos hosts-dispatcher-cut-mid-attempt: the cut attempt's delivery arrived {arrivals} times");
    assert!(
        arrivals >= 2,
        "the delivery whose attempt was cut was sent again"
    );

    across(&mut nodes, "hosts-receiver-unreachable", |nodes| {
        Box::pin(async move {
            after(Duration::from_secs(2)).await;
            let (receiver, dispatcher) = (&nodes.hosts.receiver, &nodes.hosts.dispatchers[1]);
            receiver.isolate();
            assert!(
                !reaches(dispatcher, nodes.receiver.addr),
                "the receiver is cut off"
            );
            after(Duration::from_secs(5)).await;
            receiver.rejoin();
            back(dispatcher, nodes.receiver.addr).await;
        })
    })
    .await;
    let failed: i64 = nodes
        .pool
        .get()
        .await
        .unwrap()
        .query_one(
            "SELECT count(*) FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
             JOIN jobs j ON j.id = d.job_id
             WHERE j.content LIKE 'chaos hosts-receiver-unreachable %' AND a.error IS NOT NULL",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    println!("chaos hosts-receiver-unreachable: attempts that failed while it was away {failed}");
    assert!(failed > 0, "the fleet found the receiver unreachable");

    across(&mut nodes, "hosts-redis-master-killed", |nodes| {
        Box::pin(async move {
            after(Duration::from_secs(2)).await;
            let settings = nodes.redis.settings("chaos");
            let text_queue =
                JobQueue::new(RedisConn::new(&settings).unwrap()).stream_key(Modality::Text);
            let master = nodes.redis.master_of(&text_queue).await;
            nodes.redis.kill(master);
            let killed = Instant::now();
            nodes.redis.wait_until_served(Duration::from_secs(30)).await;
            assert_ne!(nodes.redis.master_of(&text_queue).await, master);
            println!(
                "chaos hosts-redis-master-killed: the replica took over the text queue's slot \
                 {:.1} s after its master was killed",
                killed.elapsed().as_secs_f64()
            );
        })
    })
    .await;

    across(&mut nodes, "hosts-postgres-primary-killed", |nodes| {
        Box::pin(async move {
            after(Duration::from_secs(2)).await;
            nodes.fail_over_postgres(Duration::from_secs(1)).await;
        })
    })
    .await;
}

/// Cuts `host` from `servers` for 5 s, checking that it reaches none of them meanwhile and
/// every one of them after.
async fn cut(host: &Host, servers: &[SocketAddr]) {
    let ips: Vec<Ipv4Addr> = servers
        .iter()
        .filter_map(|s| match s.ip() {
            IpAddr::V4(ip) => Some(ip),
            IpAddr::V6(_) => None,
        })
        .collect();
    host.cut_from(&ips);
    assert!(
        servers.iter().all(|s| !reaches(host, *s)),
        "{} is cut from {servers:?}",
        host.name
    );
    after(Duration::from_secs(5)).await;
    host.heal();
    for server in servers {
        back(host, *server).await;
    }
}

/// Waits until `host` reaches `server` again (a link brought up takes a moment to carry).
async fn back(host: &Host, server: SocketAddr) {
    let what = format!("{} to reach {server} again", host.name);
    eventually(Duration::from_secs(10), &what, || {
        std::future::ready(reaches(host, server).then_some(()))
    })
    .await;
}

/// Whether `host` can open a connection to `server` now.
fn reaches(host: &Host, server: SocketAddr) -> bool {
    tokio::task::block_in_place(|| host.reaches(server))
}

/// Runs one scenario on `nodes`: the stream beside `fault`, then waits for every job to
/// complete and every webhook to arrive, checks and prints what must hold, and returns what
/// the fault returned.
async fn across<F, T>(nodes: &mut MultiNode, name: &str, fault: F) -> T
where
    F: for<'a> FnOnce(&'a mut MultiNode) -> BoxFuture<'a, T>,
{
    let streaming = start_stream(&*nodes, name);
    let faulted = fault(nodes).await;
    let accepted = finish(&*nodes, name, streaming, Instant::now()).await;
    let jobs: Vec<Uuid> = accepted.into_values().collect();
    assert_terminal_once(&*nodes, &jobs).await;
    let deliveries: HashMap<Uuid, i64> = nodes
        .pool
        .get()
        .await
        .unwrap()
        .query(
            "SELECT job_id, count(*) FROM deliveries WHERE job_id = ANY($1) GROUP BY job_id",
            &[&jobs],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let crossslot = nodes.logs().matches("CROSSSLOT").count();
    println!(
        "chaos {name}: terminal exactly once {}/{}, jobs with one delivery {}, CROSSSLOT errors \
         in the logs {crossslot}",
        jobs.len(),
        jobs.len(),
        deliveries.values().filter(|n| **n == 1).count()
    );
    assert!(
        jobs.iter().all(|job| deliveries.get(job) == Some(&1)),
        "{name}: one delivery per job: {deliveries:?}"
    );
    assert_eq!(crossslot, 0, "{name}\n{}", nodes.log_tails(30));
    faulted
}
