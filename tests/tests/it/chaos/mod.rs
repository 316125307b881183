//! The chaos tier (`scripts/chaos`, run by `scripts/test`; `#[ignore]`d in the ordinary run):
//! the whole fleet as processes on a Postgres and a Redis of its own, each behind a TCP proxy
//! of ours, under one fault per scenario while a stream of submissions with webhooks runs.
//! Each scenario prints jobs submitted, completed, lost (must be 0) and the time from the end
//! of the fault until every job had completed and every webhook had arrived.
//!
//! A client here behaves as the docs tell one to: every submission carries an
//! `Idempotency-Key` and is sent again, with the same key, until it is answered 202.

mod multinode;
mod postgres;
mod redis_cluster;

use std::{
    collections::{HashMap, HashSet},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use futures_util::future::BoxFuture;
use moderation_shared::db::Pool;
use moderation_tests::{
    fleet::{Fleet, Role, Topology},
    multinode::MultiNode,
    receiver::TestReceiver,
};
use serde_json::Value;
use uuid::Uuid;

/// Submissions per scenario, spread over [`STREAM`].
const JOBS: usize = 60;
const STREAM: Duration = Duration::from_secs(8);
/// The api's deadline in the fleet (`APP_REQUEST_DEADLINE_MS`), and what an answer may take
/// beyond it on a loaded 2-core machine.
const DEADLINE: Duration = Duration::from_secs(3);
const SLACK: Duration = Duration::from_secs(2);
/// How long every job has, after the fault ends, to complete with its webhook delivered.
const RECOVERY: Duration = Duration::from_secs(90);

/// What the stream of submissions saw.
struct Stream {
    /// The job each submission was answered with, by its text.
    accepted: HashMap<String, Uuid>,
    /// Answers that came later than the deadline allows.
    late: usize,
    /// Every answer: when its request was sent, when it was answered, its status.
    answers: Vec<(Instant, Instant, u16)>,
}

impl Stream {
    /// How many answers had `status`.
    fn answered(&self, status: u16) -> usize {
        self.answers.iter().filter(|(_, _, s)| *s == status).count()
    }
}

/// Where the stream submits.
#[derive(Clone)]
struct Target {
    api_url: String,
    key: String,
    hook: String,
}

/// What a scenario runs on and watches: the fleet on one host or across hosts.
trait Watched {
    /// A pool to the database that takes writes.
    fn pool(&self) -> &Pool;
    /// The receiver of every webhook.
    fn receiver(&self) -> &TestReceiver;
    /// The api's base URL and a key.
    fn api(&self) -> (&str, &str);
    /// The last `lines` lines of every process's log.
    fn log_tails(&self, lines: usize) -> String;
}

/// [`Watched`] for a fleet type with the fields `pool`, `receiver`, `api_url` and `key`, and a
/// `log_tails` method of its own.
macro_rules! watched {
    ($fleet:ty) => {
        impl Watched for $fleet {
            fn pool(&self) -> &Pool {
                &self.pool
            }
            fn receiver(&self) -> &TestReceiver {
                &self.receiver
            }
            fn api(&self) -> (&str, &str) {
                (&self.api_url, &self.key)
            }
            fn log_tails(&self, lines: usize) -> String {
                <$fleet>::log_tails(self, lines)
            }
        }
    };
}
watched!(Fleet);
watched!(MultiNode);

/// Records every transition of a job into a terminal status, so a test can tell that each
/// job ended exactly once (a test-only trigger, on the fleet's database only).
async fn record_terminal_transitions(fleet: &impl Watched) {
    fleet
        .pool()
        .get()
        .await
        .unwrap()
        .batch_execute(
            "CREATE TABLE test_terminal (job_id uuid NOT NULL, status text NOT NULL);
             CREATE FUNCTION test_record_terminal() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               IF NEW.status IN ('completed', 'failed')
                  AND (TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status) THEN
                 INSERT INTO test_terminal VALUES (NEW.id, NEW.status);
               END IF;
               RETURN NEW;
             END $$;
             CREATE TRIGGER test_terminal AFTER INSERT OR UPDATE OF status ON jobs
               FOR EACH ROW EXECUTE FUNCTION test_record_terminal();",
        )
        .await
        .unwrap();
}

/// Asserts that every job of `accepted` went terminal exactly once.
async fn assert_terminal_once(fleet: &impl Watched, accepted: &[Uuid]) {
    let rows = fleet
        .pool()
        .get()
        .await
        .unwrap()
        .query(
            "SELECT job_id, count(*) FROM test_terminal WHERE job_id = ANY($1) GROUP BY job_id",
            &[&accepted],
        )
        .await
        .unwrap();
    let once = rows.iter().filter(|r| r.get::<_, i64>(1) == 1).count();
    assert_eq!(
        (rows.len(), once),
        (accepted.len(), accepted.len()),
        "every accepted job terminal exactly once"
    );
}

/// Submits [`JOBS`] prompts over [`STREAM`], each with its own `Idempotency-Key`, retrying
/// each until it is accepted.
async fn stream(target: Target, scenario: String) -> Stream {
    let client = reqwest::Client::builder()
        .timeout(DEADLINE + SLACK + Duration::from_secs(5))
        .build()
        .unwrap();
    let late = Arc::new(AtomicUsize::new(0));
    let answers = Arc::new(Mutex::new(Vec::new()));
    let gap = STREAM / JOBS as u32;
    let submissions = (0..JOBS).map(|i| {
        let client = client.clone();
        let late = late.clone();
        let answers = answers.clone();
        let text = format!("chaos {scenario} {i}");
        let url = format!("{}/api/v1/moderate/prompt", target.api_url);
        let hook = target.hook.clone();
        let key = target.key.clone();
        async move {
            tokio::time::sleep(gap * i as u32).await;
            let idempotency = Uuid::new_v4().to_string();
            let started = Instant::now();
            loop {
                assert!(started.elapsed() < RECOVERY, "{text:?} was never accepted");
                let form = reqwest::multipart::Form::new()
                    .text("text", text.clone())
                    .text("webhook_url", hook.clone());
                let sent = Instant::now();
                let answer = client
                    .post(&url)
                    .bearer_auth(&key)
                    .header("Idempotency-Key", &idempotency)
                    .multipart(form)
                    .send()
                    .await;
                match answer {
                    Ok(response) => {
                        if sent.elapsed() > DEADLINE + SLACK {
                            late.fetch_add(1, Ordering::Relaxed);
                        }
                        let status = response.status().as_u16();
                        answers.lock().unwrap().push((sent, Instant::now(), status));
                        if response.status() == 202 {
                            let body: Value = response.json().await.unwrap();
                            let id = body["job_id"].as_str().unwrap().parse().unwrap();
                            return (text, id);
                        }
                    }
                    // A timeout is an answer that never came in time; a refused or reset
                    // connection is an api being killed or restarted.
                    Err(err) if err.is_timeout() => {
                        late.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => {}
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
    let accepted = futures_util::future::join_all(submissions)
        .await
        .into_iter()
        .collect();
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    Stream {
        accepted,
        late: late.load(Ordering::Relaxed),
        answers,
    }
}

/// Where the jobs of a scenario stand, read straight from the database and the receiver.
#[derive(Debug, PartialEq, Eq)]
struct Tally {
    /// Submissions answered 202.
    accepted: usize,
    /// Jobs completed (each submission's text in exactly one completed job).
    completed: usize,
    /// Texts stored in more than one job.
    duplicated: usize,
    /// Deliveries in the `delivered` state.
    delivered: usize,
    /// Distinct `webhook-id`s the receiver got for these jobs.
    received: usize,
}

async fn tally(fleet: &impl Watched, scenario: &str, accepted: &HashMap<String, Uuid>) -> Tally {
    let client = fleet.pool().get().await.unwrap();
    let rows = client
        .query(
            "SELECT j.content, j.id, j.status, d.id AS delivery, d.state \
             FROM jobs j LEFT JOIN deliveries d ON d.job_id = j.id WHERE j.content LIKE $1",
            &[&format!("chaos {scenario} %")],
        )
        .await
        .unwrap();
    let mut per_text: HashMap<String, usize> = HashMap::new();
    let mut completed = 0;
    let mut delivered = 0;
    let mut deliveries = HashSet::new();
    for row in &rows {
        let text: String = row.get("content");
        *per_text.entry(text.clone()).or_default() += 1;
        let id: Uuid = row.get("id");
        let status: &str = row.get("status");
        if status == "completed" && accepted.get(&text) == Some(&id) {
            completed += 1;
        }
        if row.get::<_, Option<&str>>("state") == Some("delivered") {
            delivered += 1;
        }
        if let Some(delivery) = row.get::<_, Option<Uuid>>("delivery") {
            deliveries.insert(delivery.to_string());
        }
    }
    let received: HashSet<String> = fleet
        .receiver()
        .received()
        .iter()
        .filter_map(|r| {
            r.headers
                .get("webhook-id")?
                .to_str()
                .ok()
                .map(str::to_owned)
        })
        .filter(|id| deliveries.contains(id))
        .collect();
    Tally {
        accepted: accepted.len(),
        completed,
        duplicated: per_text.values().filter(|n| **n > 1).count(),
        delivered,
        received: received.len(),
    }
}

/// Runs one scenario: the stream beside `fault`, then waits for every job to complete and
/// every webhook to arrive, prints the figures and checks that nothing was lost.
async fn scenario<F>(name: &str, fault: F)
where
    F: for<'a> FnOnce(&'a mut Fleet) -> BoxFuture<'a, ()>,
{
    scenario_on(Topology::Proxied, name, fault).await;
}

/// [`scenario`] on a fleet reaching Postgres as `topology` says.
async fn scenario_on<F>(topology: Topology, name: &str, fault: F)
where
    F: for<'a> FnOnce(&'a mut Fleet) -> BoxFuture<'a, ()>,
{
    let mut fleet = Fleet::start_on(topology).await;
    let streaming = start_stream(&fleet, name);
    fault(&mut fleet).await;
    finish(&fleet, name, streaming, Instant::now()).await;
}

/// Starts the stream of submissions of scenario `name` on `fleet`.
fn start_stream(fleet: &impl Watched, name: &str) -> tokio::task::JoinHandle<Stream> {
    let (api_url, key) = fleet.api();
    let target = Target {
        api_url: api_url.to_owned(),
        key: key.to_owned(),
        hook: fleet.receiver().url("/hook"),
    };
    tokio::spawn(stream(target, name.to_owned()))
}

/// Waits for the stream to end, then for every job to complete and every webhook to arrive
/// (the fault ended at `healed`); prints the figures, checks that nothing was lost and
/// returns the accepted jobs by their text.
async fn finish(
    fleet: &impl Watched,
    name: &str,
    streaming: tokio::task::JoinHandle<Stream>,
    healed: Instant,
) -> HashMap<String, Uuid> {
    let stream = streaming.await.unwrap();
    let want = stream.accepted.len();
    let deadline = Instant::now() + RECOVERY;
    let mut last = tally(fleet, name, &stream.accepted).await;
    while (last.completed < want || last.delivered < want || last.received < want)
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
        last = tally(fleet, name, &stream.accepted).await;
    }
    let recovered = healed.elapsed();
    println!(
        "chaos {name}: submitted {JOBS}, accepted {}, completed {}, lost {}, duplicated {}, \
         webhooks delivered {} (received {}), late answers {}, answers 503 {}, answers 500 {}, \
         recovered in {:.1} s",
        last.accepted,
        last.completed,
        JOBS - last.completed,
        last.duplicated,
        last.delivered,
        last.received,
        stream.late,
        stream.answered(503),
        stream.answered(500),
        recovered.as_secs_f64()
    );
    let expected = Tally {
        accepted: JOBS,
        completed: JOBS,
        duplicated: 0,
        delivered: JOBS,
        received: JOBS,
    };
    assert_eq!(last, expected, "{name}\n{}", fleet.log_tails(30));
    assert_eq!(stream.late, 0, "{name}: answers later than the deadline");
    stream.accepted
}

/// Waits `d` in a fault's schedule (when the fault starts and ends, not a wait for work).
async fn after(d: Duration) {
    tokio::time::sleep(d).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn postgres_blackholed_then_healed() {
    scenario("postgres-blackhole", |fleet| {
        Box::pin(async move {
            after(Duration::from_secs(2)).await;
            fleet.postgres_proxy.blackhole();
            after(Duration::from_secs(4)).await;
            fleet.postgres_proxy.heal();
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn postgres_replies_lost_after_commit() {
    scenario("postgres-lost-replies", |fleet| {
        Box::pin(async move {
            for _ in 0..3 {
                after(Duration::from_millis(1500)).await;
                fleet.postgres_proxy.lose_replies();
                after(Duration::from_millis(300)).await;
                fleet.postgres_proxy.cut();
                fleet.postgres_proxy.heal();
            }
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn redis_blackholed_then_healed() {
    scenario("redis-blackhole", |fleet| {
        Box::pin(async move {
            after(Duration::from_secs(2)).await;
            fleet.redis_proxy.blackhole();
            after(Duration::from_secs(4)).await;
            fleet.redis_proxy.heal();
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn redis_replies_lost_and_connections_cut() {
    scenario("redis-lost-replies", |fleet| {
        Box::pin(async move {
            for _ in 0..3 {
                after(Duration::from_millis(1500)).await;
                fleet.redis_proxy.lose_replies();
                after(Duration::from_millis(300)).await;
                fleet.redis_proxy.cut();
                fleet.redis_proxy.heal();
            }
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn redis_flushed_then_restarted_empty() {
    scenario("redis-flush-restart", |fleet| {
        Box::pin(async move {
            after(Duration::from_secs(2)).await;
            let mut redis = redis::Client::open(fleet.redis.settings("").url.expose().as_str())
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            redis::cmd("FLUSHALL")
                .query_async::<()>(&mut redis)
                .await
                .unwrap();
            after(Duration::from_secs(2)).await;
            tokio::task::block_in_place(|| fleet.redis.restart());
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn postgres_restarted() {
    scenario("postgres-restart", |fleet| {
        Box::pin(async move {
            after(Duration::from_secs(2)).await;
            tokio::task::block_in_place(|| fleet.postgres.restart());
            after(Duration::from_secs(2)).await;
            tokio::task::block_in_place(|| fleet.postgres.restart());
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn every_role_killed_in_a_loop() {
    scenario("sigkill-loop", |fleet| {
        Box::pin(async move {
            for round in 0..6 {
                after(Duration::from_millis(1200)).await;
                let role = Role::ALL[round % Role::ALL.len()];
                fleet.kill(role);
                fleet.spawn(role);
            }
        })
    })
    .await;
}
