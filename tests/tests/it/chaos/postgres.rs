//! Postgres beyond one node (contract 16): the primary killed and its synchronous standby
//! promoted under the stream, with `DATABASE_URL` listing both hosts; and the fleet through
//! PgBouncer with the dispatcher's `LISTEN` on `APP_DATABASE_DIRECT_URL`.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use moderation_tests::fleet::{Fleet, Topology};
use uuid::Uuid;

use super::{after, scenario_on, stream, tally, Tally, Target, JOBS, RECOVERY};

/// Makes the database record every move of a job into a terminal state (a test-only trigger
/// in the fleet's database, no migration), so a job ending twice shows.
async fn record_terminal_transitions(fleet: &Fleet) {
    let client = fleet.pool.get().await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE terminal_transitions (
                 job_id uuid NOT NULL,
                 status text NOT NULL,
                 at timestamptz NOT NULL DEFAULT clock_timestamp());
             CREATE FUNCTION record_terminal_transition() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO terminal_transitions (job_id, status) VALUES (NEW.id, NEW.status);
                 RETURN NULL;
             END $$;
             CREATE TRIGGER record_terminal_transition AFTER UPDATE OF status ON jobs
                 FOR EACH ROW
                 WHEN (OLD.status IS DISTINCT FROM NEW.status
                       AND NEW.status IN ('completed', 'failed'))
                 EXECUTE FUNCTION record_terminal_transition();",
        )
        .await
        .unwrap();
}

/// Per job of the scenario: its status, terminal transitions, deliveries and delivered ones.
async fn per_job(fleet: &Fleet, scenario: &str) -> HashMap<Uuid, (String, i64, i64, i64)> {
    let client = fleet.pool.get().await.unwrap();
    client
        .query(
            "SELECT j.id, j.status,
                    (SELECT count(*) FROM terminal_transitions t WHERE t.job_id = j.id),
                    (SELECT count(*) FROM deliveries d WHERE d.job_id = j.id),
                    (SELECT count(*) FROM deliveries d
                      WHERE d.job_id = j.id AND d.state = 'delivered')
             FROM jobs j WHERE j.content LIKE $1",
            &[&format!("chaos {scenario} %")],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.get(0), (row.get(1), row.get(2), row.get(3), row.get(4))))
        .collect()
}

/// Seconds from `origin` to `at`, negative before it.
fn signed_secs(at: Instant, origin: Instant) -> f64 {
    if at >= origin {
        at.duration_since(origin).as_secs_f64()
    } else {
        -origin.duration_since(at).as_secs_f64()
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn postgres_primary_killed_and_its_synchronous_standby_promoted_a_second_later() {
    failover("postgres-failover", Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn postgres_primary_killed_and_its_standby_promoted_after_the_request_deadline() {
    // Longer than the api's deadline (3 s): requests meanwhile must answer 503, not wait.
    failover("postgres-failover-slow", Duration::from_secs(5)).await;
}

/// The stream of submissions, and `detection` (what a failover tool takes to notice) after
/// the primary is killed, the standby promoted; then every accepted job must end exactly
/// once, with one delivery, delivered, and no request may have been answered 500.
async fn failover(name: &str, detection: Duration) {
    let fleet = Fleet::start_on(Topology::Standby).await;
    record_terminal_transitions(&fleet).await;
    let target = Target {
        api_url: fleet.api_url.clone(),
        key: fleet.key.clone(),
        hook: fleet.receiver.url("/hook"),
    };
    let streaming = tokio::spawn(stream(target, name.to_owned()));
    after(Duration::from_secs(2)).await;

    let killed = Instant::now();
    let promoting = fleet.fail_over(detection).await;
    let promoted = killed.elapsed();
    let stream = streaming.await.unwrap();
    let want = stream.accepted.len();
    let deadline = Instant::now() + RECOVERY;
    let settled = |jobs: &HashMap<Uuid, (String, i64, i64, i64)>| {
        stream.accepted.values().all(|id| {
            jobs.get(id)
                .is_some_and(|(status, _, _, delivered)| status == "completed" && *delivered >= 1)
        })
    };
    let mut jobs = per_job(&fleet, name).await;
    let mut last = tally(&fleet, name, &stream.accepted).await;
    while !(settled(&jobs) && last.received >= want) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        jobs = per_job(&fleet, name).await;
        last = tally(&fleet, name, &stream.accepted).await;
    }
    let settled_after = killed.elapsed();
    // Submissions resumed: the first acceptance once the promotion began.
    let resumed = stream
        .answers
        .iter()
        .filter(|(_, answered, status)| *answered >= promoting && *status == 202)
        .map(|(_, answered, _)| answered.duration_since(promoting))
        .min();
    // When the 503s were answered, from the kill.
    let unavailable: Vec<f64> = stream
        .answers
        .iter()
        .filter(|(_, _, status)| *status == 503)
        .map(|(_, answered, _)| signed_secs(*answered, killed))
        .collect();
    let span = match (
        unavailable.iter().copied().reduce(f64::min),
        unavailable.iter().copied().reduce(f64::max),
    ) {
        (Some(first), Some(last)) => format!("from {first:+.2} s to {last:+.2} s"),
        _ => "none".to_owned(),
    };
    let slowest = stream
        .answers
        .iter()
        .map(|(sent, answered, _)| answered.duration_since(*sent))
        .max()
        .unwrap_or_default();
    println!(
        "chaos {name}: submitted {JOBS}, accepted {}, completed {}, duplicated {}, webhooks \
         delivered {} (received {}), answers 503 {}, answers 500 {}, late answers {}; standby \
         promoted {:.1} s after the kill (detection {:.1} s), first submission accepted {} \
         after the promotion began, slowest answer {:.2} s, every job settled {:.1} s after the \
         kill; 503s answered (from the kill): {span}",
        last.accepted,
        last.completed,
        last.duplicated,
        last.delivered,
        last.received,
        stream.answered(503),
        stream.answered(500),
        stream.late,
        promoted.as_secs_f64(),
        detection.as_secs_f64(),
        resumed.map_or("never".to_owned(), |d| format!("{:.2} s", d.as_secs_f64())),
        slowest.as_secs_f64(),
        settled_after.as_secs_f64(),
    );

    let logs = fleet.log_tails(30);
    assert_eq!(
        stream.answered(500),
        0,
        "{name}: a 500 was answered\n{logs}"
    );
    assert_eq!(
        last,
        Tally {
            accepted: JOBS,
            completed: JOBS,
            duplicated: 0,
            delivered: JOBS,
            received: JOBS,
        },
        "{name}\n{logs}"
    );
    for id in stream.accepted.values() {
        assert_eq!(
            jobs.get(id),
            Some(&("completed".to_owned(), 1, 1, 1)),
            "{name}: job {id} (status, terminal transitions, deliveries, delivered)"
        );
    }
    let unsettled = jobs
        .values()
        .filter(|(status, ..)| status == "queued" || status == "processing")
        .count();
    assert_eq!(unsettled, 0, "{name}: jobs left queued or processing");
    assert_eq!(stream.late, 0, "{name}: answers later than the deadline");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn the_fleet_through_pgbouncer_delivers_every_job() {
    scenario_on(Topology::PgBouncer, "pgbouncer", |fleet| {
        Box::pin(async move {
            after(Duration::from_secs(2)).await;
            let bouncer = fleet.pgbouncer.as_ref().unwrap();
            assert!(
                bouncer.clients_of("chaos").await > 0,
                "the fleet's connections go through PgBouncer"
            );
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the chaos tier: scripts/chaos"]
async fn a_claim_commits_without_waiting_for_a_synchronous_standby_and_other_writes_wait() {
    use moderation_shared::{
        config::DatabaseSettings,
        db::{
            self,
            jobs::{claim_many, Claim, ClaimRequest},
        },
        domain::{ClaimToken, JobStage},
        policy::PolicyDefaults,
        provisioning,
    };
    let postgres = moderation_tests::postgres::PrivatePostgres::start();
    let admin = db::pool(&DatabaseSettings::new(format!(
        "{}/postgres",
        postgres.base_url()
    )))
    .unwrap();
    let admin = admin.get().await.unwrap();
    admin.simple_query("CREATE DATABASE claims").await.unwrap();
    let pool = db::pool(&DatabaseSettings::new(format!(
        "{}/claims",
        postgres.base_url()
    )))
    .unwrap();
    db::migrate(&pool).await.unwrap();
    let client = pool.get().await.unwrap();
    let account = provisioning::create_account(&client, "Claims", &PolicyDefaults::default())
        .await
        .unwrap()
        .id;
    let job: Uuid = client
        .query_one(
            "INSERT INTO jobs (id, account_id, type, content) \
             VALUES (uuid_v7(), $1, 'text', 'claim me') RETURNING id",
            &[&account.0],
        )
        .await
        .unwrap()
        .get(0);
    // A synchronous standby that never comes: every commit that waits for it waits forever.
    for statement in [
        "ALTER SYSTEM SET synchronous_standby_names = 'nobody'",
        "SELECT pg_reload_conf()",
    ] {
        admin.simple_query(statement).await.unwrap();
    }
    let other = pool.get().await.unwrap();
    let request = ClaimRequest {
        id: moderation_shared::domain::JobId(job),
        token: ClaimToken::new(),
        redelivery: false,
        first_stage: JobStage::Classifying,
    };

    let claimed = tokio::time::timeout(
        Duration::from_secs(10),
        claim_many(&client, &[request], 5, Duration::from_secs(60)),
    )
    .await;
    let waited = tokio::time::timeout(
        Duration::from_secs(2),
        other.execute("UPDATE jobs SET updated_at = now() WHERE id = $1", &[&job]),
    )
    .await;

    let claims = claimed.expect("the claim did not wait").unwrap();
    assert!(matches!(claims[..], [Claim::Claimed(_)]), "{claims:?}");
    assert!(waited.is_err(), "an ordinary write waits for the standby");
}
