//! Postgres lost under a request, as in a failover (contract 16): the request answers 503
//! `SERVICE_UNAVAILABLE` (a submission's with its `job_id`), never 500, and the api reconnects
//! by itself; a `DATABASE_URL` listing several hosts reaches the one that takes writes.

use std::time::Duration;

use moderation_shared::config::DatabaseSettings;
use moderation_tests::{
    assert_error, eventually, forms::text_form, proxy::FaultProxy, spawn_app_with, TestApp,
};
use serde_json::Value;
use uuid::Uuid;

/// The test server's address.
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

/// `url` with its `host:port` replaced by `hosts` (a comma-separated list) and `query` added.
fn with_hosts(url: &str, hosts: &str, query: &str) -> String {
    let config: tokio_postgres::Config = url.parse().unwrap();
    let port = config.get_ports()[0];
    let (before, after) = url.split_once(&format!(":{port}/")).unwrap();
    let (credentials, _host) = before.rsplit_once('@').unwrap();
    let joiner = if after.contains('?') { '&' } else { '?' };
    format!("{credentials}@{hosts}/{after}{joiner}{query}")
}

/// An api reaching Postgres through `proxy`, with a deadline long enough that only a lost
/// connection (not the deadline) ends a request early.
async fn app_through(proxy: &FaultProxy) -> TestApp {
    let port = proxy.port();
    spawn_app_with(|settings| {
        let url = with_hosts(
            settings.database.url.expose(),
            &format!("127.0.0.1:{port}"),
            "application_name=failover",
        );
        settings.database = DatabaseSettings {
            pool_size: settings.database.pool_size,
            acquire_timeout: Duration::from_secs(2),
            ..DatabaseSettings::new(url)
        };
        settings.request_deadline = Duration::from_secs(20);
        settings.auth_cache_ttl = Duration::from_secs(4);
    })
    .await
}

/// Waits until a statement matching `like` has run on one of the api's connections since
/// `since` (the server's clock): with the replies lost, it ran and its client is waiting.
async fn wait_until_sent(app: &TestApp, like: &str, since: time::OffsetDateTime) {
    let client = app.db.pool.get().await.unwrap();
    let name = app.db.name.clone();
    eventually(
        Duration::from_secs(10),
        "the statement to reach Postgres",
        || {
            let (client, name) = (&client, &name);
            async move {
                let row = client
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity \
                     WHERE datname = $1 AND application_name = 'failover' \
                       AND query_start >= $2 AND query ILIKE $3",
                        &[name, &since, &like],
                    )
                    .await
                    .unwrap();
                (row.get::<_, i64>(0) > 0).then_some(())
            }
        },
    )
    .await;
}

async fn server_now(app: &TestApp) -> time::OffsetDateTime {
    let client = app.db.pool.get().await.unwrap();
    client.query_one("SELECT now()", &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn a_multi_host_url_passes_a_dead_host_and_reaches_the_one_taking_writes() {
    let dead = moderation_tests::unused_port();
    let live = upstream().await;
    let app = spawn_app_with(|settings| {
        let url = with_hosts(
            settings.database.url.expose(),
            &format!("127.0.0.1:{dead},{live}"),
            "target_session_attrs=read-write",
        );
        settings.database = DatabaseSettings {
            pool_size: settings.database.pool_size,
            ..DatabaseSettings::new(url)
        };
    })
    .await;
    let key = app.account_with_key(None).await;

    let job = app.submit_prompt(&key, "two hosts").await;
    let read = app.get(&format!("/api/v1/job/{job}"), &key).await;

    assert_eq!(read.status(), 200);
}

#[tokio::test]
async fn a_read_whose_connection_is_lost_answers_503_and_the_next_one_reconnects() {
    let proxy = FaultProxy::start(upstream().await).await;
    let app = app_through(&proxy).await;
    let key = app.account_with_key(None).await;
    let job = app.submit_prompt(&key, "read me").await;
    let path = format!("/api/v1/job/{job}");
    assert_eq!(app.get(&path, &key).await.status(), 200);

    let since = server_now(&app).await;
    proxy.lose_replies();
    let (app_ref, key_ref, path_ref) = (&app, &key, &path);
    let read = async move { app_ref.get(path_ref, key_ref).await };
    let cut = async {
        wait_until_sent(&app, "%FROM jobs%", since).await;
        proxy.cut();
        proxy.heal();
    };
    let (response, ()) = tokio::join!(read, cut);

    assert_error(response, 503, "SERVICE_UNAVAILABLE").await;
    let again = app.get(&path, &key).await;
    assert_eq!(again.status(), 200, "the api reconnected by itself");
}

#[tokio::test]
async fn a_submission_whose_connection_is_lost_after_its_insert_answers_503_with_its_job_id() {
    let proxy = FaultProxy::start(upstream().await).await;
    let app = app_through(&proxy).await;
    let key = app.account_with_key(None).await;
    app.submit_prompt(&key, "warm up").await;

    proxy.lose_replies();
    let (app_ref, key_ref) = (&app, &key);
    let submit = async move {
        app_ref
            .submit("prompt", key_ref, text_form("text", "cut short"))
            .await
    };
    let cut = async {
        // Once the insert has committed (seen on a connection of the test's own): the
        // statement being sent is not enough, as its transaction ends only with the Sync
        // that follows it, which the proxy might not have passed on yet.
        eventually(Duration::from_secs(20), "the insert to commit", || async {
            let client = app.db.pool.get().await.ok()?;
            let row = client
                .query_opt("SELECT 1 FROM jobs WHERE content = 'cut short'", &[])
                .await
                .ok()?;
            row.map(drop)
        })
        .await;
        // No new connection either until the answer is given, as while a standby is promoted.
        proxy.blackhole();
        proxy.cut();
    };
    let (response, ()) = tokio::join!(submit, cut);
    proxy.heal();

    let body = assert_error(response, 503, "SERVICE_UNAVAILABLE").await;
    let named: Uuid = body["job_id"]
        .as_str()
        .expect("the 503 names the job")
        .parse()
        .unwrap();
    let client = app.db.pool.get().await.unwrap();
    let stored = client
        .query_opt(
            "SELECT id, status FROM jobs WHERE content = 'cut short'",
            &[],
        )
        .await
        .unwrap()
        .expect("the insert committed before the connection was lost");
    assert_eq!(stored.get::<_, Uuid>("id"), named);
    let read = eventually(Duration::from_secs(20), "the api back", || async {
        let response = app.get(&format!("/api/v1/job/{named}"), &key).await;
        (response.status() == 200).then_some(response)
    })
    .await;
    let job: Value = read.json().await.unwrap();
    assert_eq!(job["status"], "queued");
}

#[tokio::test]
async fn a_lost_connection_or_a_demoted_host_is_unavailable_and_a_bad_statement_is_not() {
    use moderation_shared::db::DbError;
    let app = moderation_tests::spawn_app().await;
    let mut client = app.db.pool.get().await.unwrap();
    let doomed = app.db.pool.get().await.unwrap();
    let pid: i32 = doomed
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);

    // A write in a read-only transaction fails as it does on a host demoted to standby.
    let tx = client
        .build_transaction()
        .read_only(true)
        .start()
        .await
        .unwrap();
    let read_only = tx
        .execute("CREATE TABLE demoted (x int)", &[])
        .await
        .unwrap_err();
    drop(tx);
    let misspelt = client.execute("SELEC 1", &[]).await.unwrap_err();
    // As a failover or a restart ends every session.
    client
        .execute("SELECT pg_terminate_backend($1, 5000)", &[&pid])
        .await
        .unwrap();
    let ended = doomed.execute("SELECT 1", &[]).await.unwrap_err();

    assert_eq!(read_only.code().map(|c| c.code()), Some("25006"));
    assert!(DbError::from(read_only).is_unavailable());
    assert!(DbError::from(ended).is_unavailable());
    assert!(!DbError::from(misspelt).is_unavailable());
}
