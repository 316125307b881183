//! `REDIS_MODE` at start (contract 16): a mode that is not one of standalone, cluster and
//! sentinel, a cluster seed URL naming a database, a seed list where no node answers, a
//! sentinel set-up without a master name or with a name the sentinels do not know: every
//! process refuses to start, naming the variable at fault.

use moderation_tests::{redis_cluster::RedisSentinels, spawn_app, unused_port, TestApp};

/// Every process that reads the Redis settings, with its arguments.
const PROCESSES: [(&str, &[&str]); 4] = [
    ("api", &[]),
    ("worker", &["--modality", "text"]),
    ("dispatcher", &[]),
    ("dashboard", &[]),
];

/// Asserts that every process refuses `env`, naming `variable` and saying `why`.
async fn every_process_refuses(app: &TestApp, env: &[(&str, &str)], variable: &str, why: &str) {
    for (binary, args) in PROCESSES {
        let stderr = app.refused_start(binary, args, env).await;
        assert!(
            stderr.contains(variable) && stderr.contains(why),
            "{binary} with {env:?}: {stderr}"
        );
    }
}

#[tokio::test]
async fn a_mode_that_does_not_exist_is_refused_naming_redis_mode() {
    let app = spawn_app().await;
    let url = app.redis.url.expose().clone();
    every_process_refuses(
        &app,
        &[("REDIS_MODE", "clustered"), ("REDIS_URL", &url)],
        "REDIS_MODE",
        "standalone, cluster, sentinel",
    )
    .await;
}

#[tokio::test]
async fn a_cluster_seed_naming_a_database_is_refused_naming_redis_url() {
    let app = spawn_app().await;
    for url in [
        "redis://127.0.0.1:6379/2",
        "redis://127.0.0.1:6379,redis://127.0.0.1:6380/0",
    ] {
        every_process_refuses(
            &app,
            &[("REDIS_MODE", "cluster"), ("REDIS_URL", url)],
            "REDIS_URL",
            "database",
        )
        .await;
    }
}

#[tokio::test]
async fn a_cluster_whose_seeds_do_not_answer_is_refused_naming_redis_url() {
    let app = spawn_app().await;
    let seeds = format!(
        "redis://127.0.0.1:{},redis://127.0.0.1:{}",
        unused_port(),
        unused_port()
    );
    every_process_refuses(
        &app,
        &[("REDIS_MODE", "cluster"), ("REDIS_URL", &seeds)],
        "REDIS_URL",
        "no seed node of the cluster answered",
    )
    .await;
}

#[tokio::test]
async fn a_plain_server_given_as_a_cluster_seed_is_refused_naming_redis_url() {
    // The tests' Redis is no cluster: asking it for the slots fails.
    let app = spawn_app().await;
    let url = app.redis.url.expose().clone();
    every_process_refuses(
        &app,
        &[("REDIS_MODE", "cluster"), ("REDIS_URL", &url)],
        "REDIS_URL",
        "no seed node of the cluster answered",
    )
    .await;
}

#[tokio::test]
async fn sentinel_mode_without_a_master_name_is_refused_naming_it() {
    let app = spawn_app().await;
    let url = app.redis.url.expose().clone();
    every_process_refuses(
        &app,
        &[("REDIS_MODE", "sentinel"), ("REDIS_URL", &url)],
        "REDIS_SENTINEL_MASTER",
        "required",
    )
    .await;
}

#[tokio::test]
async fn a_master_name_the_sentinels_do_not_know_is_refused_naming_redis_sentinel_master() {
    let app = spawn_app().await;
    let sentinels = RedisSentinels::start().await;
    let unknown = sentinels.settings(&app.redis.namespace, "no-such-master");
    let url = unknown.url.expose().clone();
    every_process_refuses(
        &app,
        &[
            ("REDIS_MODE", "sentinel"),
            ("REDIS_URL", &url),
            ("REDIS_SENTINEL_MASTER", "no-such-master"),
        ],
        "REDIS_SENTINEL_MASTER",
        "no-such-master",
    )
    .await;
}
