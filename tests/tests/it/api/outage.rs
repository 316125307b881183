//! Postgres blackholed under the api (a TCP proxy of our own holds every byte): every request
//! still answers within its deadline, submissions with their `job_id`, and the api recovers by
//! itself once the network heals.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use moderation_shared::config::DatabaseSettings;
use moderation_tests::{
    assert_error, eventually, forms::text_form, proxy::FaultProxy, spawn_app_with,
};
use serde_json::Value;
use uuid::Uuid;

/// The api's deadline in these tests.
const DEADLINE: Duration = Duration::from_secs(3);
/// What the answer may take beyond it on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(1500);

/// `url` with its port replaced by the proxy's.
fn through(url: &str, proxy: &FaultProxy) -> String {
    let config: tokio_postgres::Config = url.parse().unwrap();
    let port = config.get_ports()[0];
    url.replacen(&format!(":{port}/"), &format!(":{}/", proxy.port()), 1)
}

async fn upstream() -> std::net::SocketAddr {
    let config: tokio_postgres::Config = moderation_tests::postgres_base_url().parse().unwrap();
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(host) => host.clone(),
        other => panic!("Postgres must be reached over TCP here, not {other:?}"),
    };
    let found = tokio::net::lookup_host((host.as_str(), config.get_ports()[0]))
        .await
        .unwrap()
        .next()
        .unwrap();
    found
}

#[tokio::test]
async fn with_postgres_blackholed_every_request_answers_in_time_and_the_api_recovers() {
    let proxy = FaultProxy::start(upstream().await).await;
    let app = spawn_app_with(|settings| {
        let url = through(settings.database.url.expose(), &proxy);
        settings.database = DatabaseSettings {
            pool_size: settings.database.pool_size,
            acquire_timeout: settings.database.acquire_timeout,
            ..DatabaseSettings::new(url)
        };
        settings.request_deadline = DEADLINE;
        // All sixty requests come from one address at once.
        settings.limits.auth_concurrency = 100;
        // Long enough that the key stays known to the api through the outage, so the
        // submissions reach the point where their jobs are made.
        settings.auth_cache_ttl = Duration::from_secs(4);
    })
    .await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    let first = app
        .submit("prompt", &key, text_form("text", "before"))
        .await;
    assert_eq!(first.status(), 202);
    let first: Value = first.json().await.unwrap();
    let job = first["job_id"].as_str().unwrap().to_owned();

    proxy.blackhole();
    let (app, key) = (&app, &key);
    let submissions = (0..50).map(|i| async move {
        let started = Instant::now();
        let response = app
            .submit("prompt", key, text_form("text", format!("during {i}")))
            .await;
        (started.elapsed(), response)
    });
    let job = &job;
    let reads = (0..10).map(|_| async move {
        let started = Instant::now();
        let response = app.get(&format!("/api/v1/job/{job}"), key).await;
        (started.elapsed(), response)
    });
    let (submitted, read) = tokio::join!(join_all(submissions), join_all(reads));

    let mut offered = Vec::new();
    for (took, response) in submitted {
        assert!(took <= DEADLINE + SLACK, "a submission took {took:?}");
        let body = assert_error(response, 503, "SERVICE_UNAVAILABLE").await;
        let id: Uuid = body["job_id"]
            .as_str()
            .expect("the 503 names the job")
            .parse()
            .unwrap();
        offered.push(id);
    }
    for (took, response) in read {
        assert!(took <= DEADLINE + SLACK, "a job read took {took:?}");
        assert_error(response, 503, "SERVICE_UNAVAILABLE").await;
    }

    proxy.heal();
    let recovered = eventually(Duration::from_secs(30), "a submission accepted", || async {
        let response = app.submit("prompt", key, text_form("text", "after")).await;
        (response.status() == 202).then_some(())
    })
    .await;
    let read = app.get(&format!("/api/v1/job/{job}"), key).await;

    assert_eq!(recovered, ());
    assert_eq!(read.status(), 200);
    // A job named by a 503 is either stored (its write was on its way) and queued for the
    // relay, or was never stored: never stored twice, never anything else.
    let client = app.db.pool.get().await.unwrap();
    let rows = client
        .query("SELECT status FROM jobs WHERE id = ANY($1)", &[&offered])
        .await
        .unwrap();
    assert!(rows.len() <= offered.len());
    for row in rows {
        assert_eq!(row.get::<_, &str>(0), "queued");
    }
}
